#!/usr/bin/env bash
# Checks a lesson's edited files, compiled, before anything links them:
#   scripts/check-submission.sh LESSON LIBCOMMON OBJECT...
# Each OBJECT was compiled from one of the files a student edits, with -MMD
# (its .d file beside it). Refused, with one line "refused: FILE ..." each:
#   - a call to anything that tests/symbols/all.txt and LESSON.txt do not
#     allow (the C library beyond output, memory and mathematics; MPI calls
#     the communication ledger does not count; the ledgers; the reference
#     implementation; loading code; running programs; opening files);
#   - a raw system call instruction (a way around every rule above);
#   - an #include of any file but the lesson's and common/'s headers (and
#     an earlier lesson's, where LESSON.txt says include-from) and the
#     system's (the solutions, the tests), and .incbin or #embed;
#   - a file that leaves out a function the lesson's symbols file says it
#     must define ("define" lines): one common/ also has, which the linker
#     would otherwise take from libcommon.a in place of the student's.
# Exits 0 when every file passes, 1 otherwise. The student build, the
# solutions and every grading run it, so students meet the rules early and
# the solutions prove they are satisfiable.
set -uo pipefail
lesson=${1:?usage: check-submission.sh LESSON LIBCOMMON OBJECT...}
library=${2:?usage: check-submission.sh LESSON LIBCOMMON OBJECT...}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)

allows=() denies=() reasons=() local_files=() local_globs=() include_lessons=()
defined_files=() defined_symbols=() defined_reasons=()
while read -r verb first rest; do
    case "$verb" in
        allow) allows+=("$first") ;;
        deny) denies+=("$first"); reasons+=("$rest") ;;
        allow-in) local_files+=("$first"); local_globs+=("${rest%% *}") ;;
        include-from) include_lessons+=("$first") ;;
        define) defined_files+=("$first"); defined_symbols+=("${rest%% *}")
                defined_reasons+=("${rest#* }") ;;
    esac
done < <(cat "$root/tests/symbols/all.txt" "$root/tests/symbols/$lesson.txt" 2>/dev/null | grep -v '^[[:space:]]*#')
# The shared library's own functions are allowed (unless denied above).
declare -A library_symbols=()
while read -r symbol; do
    library_symbols[$symbol]=1
done < <(nm --defined-only -g "$library" 2>/dev/null | awk 'NF == 3 { print $3 }')

# Functions the lesson's edited files define for each other.
while read -r symbol; do
    library_symbols[$symbol]=1
done < <(nm --defined-only -g "$@" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBR]/ { print $3 }')

status=0
refuse() {
    echo "refused: $*" >&2
    status=1
}

for object in "$@"; do
    deps=${object%.o}.d
    # The .d file's first rule: "OBJECT: SOURCE HEADER ...".
    mapfile -t files < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$deps" 2>/dev/null | head -1 | cut -d: -f2- | tr -s ' ' '\n' | sed '/^$/d')
    source=${files[0]:-$object}
    name=$(basename "$source")
    shown=lessons/$lesson/$name
    for header in "${files[@]:1}"; do
        # -MMD leaves the compiler's own headers out; MPI's and CUDA's are
        # under /usr or /opt (or CUDA_HOME).
        real=$(realpath -m "$header")
        # An earlier lesson's headers, where the lesson builds on it (its
        # symbols file says include-from LESSON).
        for earlier in "${include_lessons[@]}"; do
            [[ $real == "$root/lessons/$earlier/"*.h ]] && continue 2
        done
        case "$real" in
            "$root/common/"*.h|"$root/lessons/$lesson/"*.h) ;;
            # A CUDA lesson's given device code and templates (.cuh).
            "$root/lessons/$lesson/"*.cuh) ;;
            "$root/"*) refuse "$shown includes $header: a lesson's files may include only the system's headers, common/'s and the lesson's own" ;;
            /usr/*|/opt/*|"${CUDA_HOME:-/usr/local/cuda}/"*) ;;
            *) refuse "$shown includes $header: a lesson's files may include only the system's headers, common/'s and the lesson's own" ;;
        esac
    done
    if grep -qE '\.incbin|#[[:space:]]*embed' "$source" 2>/dev/null; then
        refuse "$shown pulls a file's bytes in with .incbin or #embed: a lesson's files may not read other files"
    fi
    for k in "${!defined_files[@]}"; do
        [ "${defined_files[k]}" = "$name" ] || continue
        if ! nm --defined-only -g "$object" 2>/dev/null | awk '$2 == "T" { print $3 }' | grep -qxF "${defined_symbols[k]}"; then
            refuse "$shown does not define ${defined_symbols[k]}, which ${defined_reasons[k]}"
        fi
    done
    if objdump -d --no-show-raw-insn "$object" 2>/dev/null | grep -qE $'\t(syscall|sysenter|svc|int +\\$0x80)( |$)'; then
        refuse "$shown holds a raw system call instruction: code in a lesson reaches the system only through the calls its lesson allows"
    fi
    while read -r symbol; do
        [ -n "$symbol" ] || continue
        symbol=${symbol%%@*}
        verdict=""
        for k in "${!local_files[@]}"; do
            # shellcheck disable=SC2053  # globs on purpose
            if [ "${local_files[k]}" = "$name" ] && [[ $symbol == ${local_globs[k]} ]]; then
                verdict=allowed
                break
            fi
        done
        if [ -z "$verdict" ]; then
            for k in "${!denies[@]}"; do
                # shellcheck disable=SC2053
                if [[ $symbol == ${denies[k]} ]]; then
                    verdict="denied"
                    refuse "$shown calls $symbol, which $( [ -n "${reasons[k]}" ] && echo "${reasons[k]}" || echo "is not allowed here")"
                    break
                fi
            done
        fi
        [ -n "$verdict" ] && continue
        [ -n "${library_symbols[$symbol]:-}" ] && continue
        for glob in "${allows[@]}"; do
            # shellcheck disable=SC2053
            if [[ $symbol == $glob ]]; then
                verdict=allowed
                break
            fi
        done
        [ -n "$verdict" ] || refuse "$shown calls $symbol, which code in lesson $lesson may not call (what it may call: tests/symbols/all.txt and tests/symbols/$lesson.txt)"
    done < <(nm -u "$object" 2>/dev/null | awk '{ print $NF }' | sort -u)
done
exit $status
