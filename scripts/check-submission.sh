#!/usr/bin/env bash
# Checks a lesson's edited files, compiled, before anything links them:
#   scripts/check-submission.sh LESSON LIBCOMMON [OPTION...] OBJECT...
#     --program PART,PART,...  the objects one of the lesson's programs (or
#                              its producer) links besides LIBCOMMON, the
#                              student's among them
#     --libraries LIST         what the shared libraries the lesson's
#                              programs load define (scripts/library-symbols.sh)
#     --earlier OBJECT         an earlier lesson's edited file, compiled, that
#                              the lesson's programs link
#     --mpi-constants LIST     the symbols MPI's predefined constants refer
#                              to (scripts/mpi-constants.sh): every one is
#                              allowed, whatever the lesson
# Each OBJECT was compiled from one of the files a student edits by the
# Makefile's rules: with -MMD (its .d file beside it) and -fstack-usage (its
# .su file). Refused, with one line "refused: FILE ..." each:
#   what it calls and reads
#   - a call to anything (or a use of a library's variable) that
#     tests/symbols/all.txt and LESSON.txt do not allow (the C library
#     beyond output, memory and mathematics; MPI calls that move data,
#     except the ones the lesson allows, which the communication ledger
#     counts; the ledgers; the reference implementations; loading code;
#     running programs; opening files). Every other function of the MPI
#     library (MPI_Get_count, MPI_Comm_dup, MPI_Waitall: they move none of
#     the student's data) is allowed, read from the library (--libraries),
#     and so are MPI's predefined constants, data a correct program uses
#     (MPI_REQUEST_NULL is a variable of Open MPI's), derived from mpi.h
#     (--mpi-constants): neither is listed by hand;
#   - a raw system call instruction (a way around every rule above);
#   - an #include of any file but the lesson's and common/'s headers (and
#     an earlier lesson's, where LESSON.txt says include-from) and the
#     system's (the solutions, the tests), and .incbin or #embed;
#   - a file that leaves out a function the lesson's symbols file says it
#     must define ("define" lines): one common/ also has, which the linker
#     would otherwise take from libcommon.a in place of the student's;
#   what it defines
#   - a global function or variable that anything linked with it defines
#     too: a shared library the lesson's programs load (the C library,
#     libm, OpenMP's, either MPI's, CUDA's: mallinfo2, which the memory
#     ledger reads, PMPI_Send, which the communication ledger calls,
#     memcpy), common/, the lesson's given code, another of the student's
#     files. Linked, one definition takes the other's place for every
#     caller, the library's and the given code's own. And any name MPI
#     reserves (MPI_*, PMPI_*, MPIX_*), whichever MPI builds it. A "define"
#     line's function is the one that must be defined;
#   what runs outside the lesson's calls
#   - a constructor, a destructor, a static initialiser, anything the loader
#     or exit runs: a section .init_array, .fini_array, .preinit_array,
#     .ctors, .dtors (by name, with or without a priority, or by type),
#     .init, .fini, .jcr; an indirect function (IFUNC), whose resolver the
#     loader runs; a definition of _init, _fini or _start; a call that
#     registers code to run at exit (atexit and its kind). In a .cu file,
#     nvcc's own registration of its kernels with the CUDA runtime is the
#     one exception;
#   what it holds
#   - a variable (global, file-static, function-static, thread-local,
#     constant) of more than 64 KiB, more than 96 KiB of static data in all,
#     more than 4 MiB of code;
#   - a function whose fixed stack frame is larger than 64 KiB.
# An earlier lesson's file (--earlier) was checked under its own lesson's
# rules for what it calls and reads; here it is checked for what it
# defines, runs and holds, among what this lesson links with it (CUDA's
# libraries, this lesson's given code). Which of its calls this lesson's
# programs can run is checked on the linked programs (scripts/check-program.sh).
# Exits 0 when every file passes, 1 otherwise, 2 on bad usage. The student
# build, the solutions and every grading run it, so students meet the rules
# early and the solutions prove they are satisfiable.
. "$(dirname "$0")/portable.sh" "$@"  # bash 4, GNU tools (macOS: Homebrew's)
set -uo pipefail
usage="usage: check-submission.sh LESSON LIBCOMMON [--program PART,...] [--libraries LIST] [--mpi-constants LIST] [--earlier OBJECT] OBJECT..."
lesson=${1:?$usage}
library=${2:?$usage}
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)

# The limits on what a file holds. No lesson's honest solution comes near
# them: the largest variable of any solution or skeleton is lesson 00's
# given greetings (hello_omp.c: 1024 threads x 64 characters, 64 KiB, the
# one above a few hundred bytes), and the largest stack frame 688 bytes.
# Below them, a rank can hold none of the tests' model in storage the
# ledgers do not count: one bf16 copy of its parameters (55885, lesson 06's
# and 07's tests) is 109 KiB, its fp32 master weights on 2 ranks 109 KiB
# each. A variable-length array's or alloca's part of a frame is not
# refused: its size is known only at run time, small ones are honest C, and
# the memory a program holds is measured from outside it, stack pages
# included (the grader may also cap RLIMIT_STACK). Code is limited so that
# data hidden among instructions cannot make the data limit moot.
VARIABLE_LIMIT=65536
DATA_LIMIT=98304
CODE_LIMIT=4194304
FRAME_LIMIT=65536

programs=() library_lists=() constant_lists=() earlier=() objects=()
while [ $# -gt 0 ]; do
    case "$1" in
        --program) programs+=("${2:?$usage}"); shift 2 ;;
        --libraries) library_lists+=("${2:?$usage}"); shift 2 ;;
        --earlier) earlier+=("${2:?$usage}"); shift 2 ;;
        --mpi-constants) constant_lists+=("${2:?$usage}"); shift 2 ;;
        --*) echo "check-submission.sh: unknown option $1 ($usage)" >&2; exit 2 ;;
        *) objects+=("$1"); shift ;;
    esac
done
[ "${#objects[@]}" -gt 0 ] || { echo "$usage" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-check-submission-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT

allows=() denies=() reasons=() local_files=() local_globs=() include_lessons=()
data_movers=() data_mover_kinds=() counted=() allow_counted=false
defined_files=() defined_symbols=() defined_reasons=()
while read -r verb first rest; do
    case "$verb" in
        allow) allows+=("$first") ;;
        # A reference is refused as a call, as a denied symbol is; the
        # linked programs must not hold it at all (scripts/check-program.sh).
        deny|reference) denies+=("$first"); reasons+=("$rest") ;;
        moves-data) data_movers+=("$first"); data_mover_kinds+=("$rest") ;;
        counted) counted+=("$first") ;;
        allow-counted) allow_counted=true ;;
        allow-in) local_files+=("$first"); local_globs+=("${rest%% *}") ;;
        include-from) include_lessons+=("$first") ;;
        define) defined_files+=("$first"); defined_symbols+=("${rest%% *}")
                defined_reasons+=("${rest#* }") ;;
    esac
done < <(cat "$root/tests/symbols/all.txt" "$root/tests/symbols/$lesson.txt" 2>/dev/null | grep -v '^[[:space:]]*#')
# A lesson that allows the counted calls allows each.
! $allow_counted || allows+=("${counted[@]}")

# The shared library's own functions are allowed (unless denied above).
declare -A library_symbols=()
while read -r symbol; do
    library_symbols[$symbol]=1
done < <(nm --defined-only -g "$library" 2>/dev/null | awk 'NF == 3 { print $3 }')

# Functions the lesson's edited files define for each other.
while read -r symbol; do
    library_symbols[$symbol]=1
done < <(nm --defined-only -g "${objects[@]}" 2>/dev/null | awk 'NF == 3 && $2 ~ /[TDBR]/ { print $3 }')

# The MPI library's functions (an MPI lesson's --libraries): each one that
# moves no data (a "moves-data" line names the families that do) is
# allowed, whatever the lesson. Read from the library, not listed by hand.
declare -A mpi_functions=()
if [ "${#library_lists[@]}" -gt 0 ]; then
    while read -r symbol; do
        mpi_functions[$symbol]=1
    done < <(awk -F '\t' '$1 ~ /^MPI_/ && $3 == "function" { print $1 }' "${library_lists[@]}")
fi

# MPI's predefined constants: used, never called, by a correct program.
declare -A mpi_constants=()
if [ "${#constant_lists[@]}" -gt 0 ]; then
    while read -r symbol; do
        [ -n "$symbol" ] && mpi_constants[$symbol]=1
    done < <(cat "${constant_lists[@]}")
fi
# The variables (not functions) of the libraries and of common/: a file
# that refers to one uses it, and a refusal says so ("uses", not "calls").
declare -A data_symbols=()
while read -r symbol; do
    data_symbols[$symbol]=1
done < <({ [ "${#library_lists[@]}" -gt 0 ] && awk -F '\t' '$3 == "data" { print $1 }' "${library_lists[@]}"
           nm --defined-only -g "$library" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[BDGRSVbdgrsv]$/ { print $3 }'; } | sort -u)

# Calls that register code to run at exit: refused as what they are, below,
# not as calls the lesson does not allow.
exit_registrations="atexit on_exit at_quick_exit __cxa_atexit __cxa_thread_atexit __cxa_thread_atexit_impl pthread_atfork __register_atfork"

# Whether anything the lesson's programs link or load defines SYMBOL: a
# library, common/, the given code. A name nothing defines is a slip
# (CHECK_MP for CHECK_MPI), and the refusal says so, not "may not call".
declare -A defined_names=()
defined_anywhere() {   # defined_anywhere SYMBOL
    if [ "${#defined_names[@]}" -eq 0 ]; then
        local symbol
        while read -r symbol; do
            [ -n "$symbol" ] && defined_names[$symbol]=1
        done < <({ [ "${#library_lists[@]}" -gt 0 ] && cut -f1 "${library_lists[@]}"
                   local program parts
                   for program in "${programs[@]}"; do
                       IFS=, read -r -a parts <<< "$program"
                       nm --defined-only -g "${parts[@]}" 2>/dev/null | awk 'NF == 3 { print $3 }'
                   done
                   echo "-"; } | sort -u)
    fi
    [ -n "${defined_names[$1]:-}" ] || [ -n "${library_symbols[$1]:-}" ]
}

status=0
refuse() {
    echo "refused: $*" >&2
    status=1
}

# The name a compiled file is shown by: lessons/LESSON/SOURCE, its source
# from the first rule of its .d file ("OBJECT: SOURCE HEADER ...").
shown_name() {   # shown_name OBJECT
    local object=$1 source
    source=$(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "${object%.o}.d" 2>/dev/null | head -1 | cut -d: -f2- | awk '{ print $1 }')
    local part=${object%/*}
    echo "lessons/${part##*/}/$(basename "${source:-${object%.o}.c}")"
}

# ---- What each file reads and calls -------------------------------------
for object in "${objects[@]}"; do
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
        for earlier_lesson in "${include_lessons[@]}"; do
            [[ $real == "$root/lessons/$earlier_lesson/"*.h ]] && continue 2
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
    while read -r symbol; do
        [ -n "$symbol" ] || continue
        symbol=${symbol%%@*}
        [[ " $exit_registrations " == *" $symbol "* ]] && continue
        [ -n "${mpi_constants[$symbol]:-}" ] && continue
        # What the file does with it, in a refusal.
        does=calls may=call
        [ -n "${data_symbols[$symbol]:-}" ] && does=uses may=use
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
                    refuse "$shown $does $symbol, which $( [ -n "${reasons[k]}" ] && echo "${reasons[k]}" || echo "is not allowed here")"
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
        [ -n "$verdict" ] && continue
        for k in "${!data_movers[@]}"; do
            # shellcheck disable=SC2053
            if [[ $symbol == ${data_movers[k]} ]]; then
                verdict=refused
                refuse "$shown calls $symbol, which ${data_mover_kinds[k]}: a call that moves data, which code in lesson $lesson may not make with $symbol (the ones it may: tests/symbols/$lesson.txt)"
                break
            fi
        done
        [ -n "$verdict" ] && continue
        [ -n "${mpi_functions[$symbol]:-}" ] && continue
        if ! defined_anywhere "$symbol"; then
            refuse "$shown calls $symbol, which nothing defines: not C, MPI, common/ or the lesson's code. A misspelt name? The compiler's warning \"implicit declaration of function '$symbol'\" gives the line"
            continue
        fi
        refuse "$shown $does $symbol, which code in lesson $lesson may not $may (what it may $may: tests/symbols/all.txt and tests/symbols/$lesson.txt)"
    done < <(nm -u "$object" 2>/dev/null | awk '{ print $NF }' | sort -u)
done

# ---- What each file defines, runs outside the calls, and holds ----------
# The student's files here: this lesson's, then the earlier lessons' that
# its programs link.
checked=("${objects[@]}" "${earlier[@]}")
declare -A is_student=() linked_with=()
for object in "${checked[@]}"; do
    is_student[$object]=1
done
# What each is linked with, in any of the programs that link it.
for program in "${programs[@]}"; do
    IFS=, read -r -a parts <<< "$program"
    for part in "${parts[@]}"; do
        [ -n "${is_student[$part]:-}" ] || continue
        for other in "${parts[@]}"; do
            [ "$other" = "$part" ] || linked_with[$part]+=" $other"
        done
    done
done

# What is linked with each file: "PART<TAB>FILE" a line, and how each
# PART is named in a refusal ("PART<TAB>WHO"): the student's own by their
# sources, given code by its source and what it is.
: > "$work/pairs"
: > "$work/names"
for object in "${checked[@]}"; do
    printf '%s\t%s\n' "$object" "$(shown_name "$object") (yours)" >> "$work/names"
    for part in ${linked_with[$object]:-}; do
        printf '%s\t%s\n' "$part" "$object" >> "$work/pairs"
    done
done
# The global symbols that each file's companions define, one
# "SYMBOL<TAB>WHO<TAB>FILE" a line, and the shared library's ("*": linked
# with every file), in one pass of nm.
claimed=$work/claimed
{
    # nm -A: "ARCHIVE:MEMBER:ADDRESS TYPE NAME", "OBJECT:ADDRESS TYPE NAME".
    nm -A -g --defined-only "$library" 2>/dev/null | awk 'NF == 3 {
        n = split($1, where, ":"); member = where[n - 1]; sub(/\.o$/, "", member)
        print $3 "\tcommon/" member ".c (the shared library)\t*" }'
    cut -f1 "$work/pairs" | sort -u | xargs -r nm -A -g --defined-only 2>/dev/null |
        awk -F '\t' '
            FILENAME == names_file { who[$1] = $2; next }
            FILENAME == pairs_file { linked[$1] = linked[$1] " " $2; next }
            {
                split($0, fields, " "); part = fields[1]; sub(/:[0-9a-f]*$/, "", part)
                if (fields[3] == "" || !(part in linked)) next
                if (part in who) name = who[part]
                else if (part ~ /\/tests\//) { name = part; sub(/.*\/tests\//, "tests/", name); sub(/\.o$/, ".c (given)", name) }
                else if (part ~ /\/common\//) { name = part; sub(/.*\/common\//, "common/", name); sub(/\.o$/, ".c (the shared library)", name) }
                else { name = part; n = split(name, path, "/"); name = "lessons/" path[n - 1] "/" path[n]; sub(/\.o$/, ".c (given)", name) }
                m = split(linked[part], files, " ")
                for (k = 1; k <= m; k++) print fields[3] "\t" name "\t" files[k]
            }' names_file="$work/names" pairs_file="$work/pairs" "$work/names" "$work/pairs" -
} > "$claimed"

# Reads `readelf -W -t -s -r` of one object: prints its global definitions
# ("def<TAB>SYMBOL<TAB>COMDAT", COMDAT 1 for one in a section group, the
# copies of C++'s inline functions and templates), and a refusal line for
# each section, symbol or size the rules above refuse.
# shellcheck disable=SC2016  # an awk program
inspect='
function hex(text,    i, n) {
    n = 0; text = tolower(text); sub(/^0x/, "", text)
    for (i = 1; i <= length(text); i++)
        n = n * 16 + index("0123456789abcdef", substr(text, i, 1)) - 1
    return n
}
function number(text) { return text ~ /^0x/ ? hex(text) : text + 0 }
/^Section Headers:/ { part = "sections"; next }
/^Relocation section / { part = "relocations"; target = $3; gsub(/'\''/, "", target); next }
/^Symbol table / { part = "symbols"; next }
part == "sections" && /^  \[ *[0-9]+\]/ {
    line = $0; sub(/^  \[ */, "", line); index_text = line; sub(/\].*/, "", index_text)
    sub(/^[0-9]+\] ?/, "", line); name[index_text + 0] = line; current = index_text + 0; step = 1; next
}
part == "sections" && step == 1 { type[current] = $1; size[current] = hex($4); step = 2; next }
part == "sections" && step == 2 { flags_text = $1; gsub(/[\[\]:]/, "", flags_text); flags[current] = hex(flags_text); step = 0; next }
part == "relocations" && NF >= 5 && $1 ~ /^[0-9a-f]+$/ {
    relocated = target; sub(/^\.rela?/, "", relocated)
    called = $5; sub(/@.*/, "", called)
    # A reference to a function that registers code to run at exit, from
    # code or from data (a pointer to it called later).
    if (index(" " registrations " ", " " called " ") > 0) {
        exits++; exit_symbol[exits] = called; exit_section[exits] = relocated; exit_offset[exits] = hex($1)
    }
    if (relocated ~ /^\.(init_array|preinit_array|ctors|fini_array|dtors)/) {
        entries++; entry_symbol[entries] = $5; entry_addend[entries] = ($6 == "-" ? -hex($7) : ($6 == "+" ? hex($7) : 0))
        entry_section[entries] = relocated; listed[relocated] = 1
    }
    next
}
part == "symbols" && $1 ~ /^[0-9]+:$/ {
    rest = $0; for (k = 1; k <= 7; k++) sub(/^ *[^ ]+/, "", rest); sub(/^ /, "", rest)
    symbols++; s_value[symbols] = hex($2); s_size[symbols] = number($3); s_type[symbols] = $4
    s_bind[symbols] = $5; s_index[symbols] = $7; s_name[symbols] = rest
}
function group_member(section) { return int(flags[section] / 512) % 2 == 1 }
function allocated(section) { return int(flags[section] / 2) % 2 == 1 }
function executable(section) { return int(flags[section] / 4) % 2 == 1 }
function kilobytes(bytes) { return sprintf("%d bytes (%.1f KiB)", bytes, bytes / 1024) }
END {
    runs_outside = "a lesson'\''s code runs only when the lesson'\''s programs call it: do that work in the function that needs it"
    storage = "keep data that large (model state, buffers) in memory allocated at run time, which the ledgers count (malloc, or ledger_alloc where the lesson uses it)"
    # nvcc registers a .cu file'\''s kernels from one function of its own,
    # which .init_array names: that entry alone is allowed.
    for (e = 1; e <= entries; e++) {
        called = entry_symbol[e]
        for (k = 1; k <= symbols; k++)
            if (s_name[k] == called && s_type[k] == "SECTION") {
                called = ""
                for (j = 1; j <= symbols; j++)
                    if (s_index[j] == s_index[k] && s_type[j] == "FUNC" && s_value[j] == entry_addend[e])
                        called = s_name[j]
                break
            }
        if (cuda && entry_section[e] == ".init_array" && called ~ /__sti____cudaRegisterAll/)
            continue
        when = entry_section[e] ~ /^\.(fini_array|dtors)/ ? "after main" : "before main"
        kind = when == "after main" ? "a destructor" : "a constructor or a static initialiser"
        print "refused: " shown " has code that runs " when ": " (called == "" ? "an entry of its " entry_section[e] : called) " (" kind ", from section " entry_section[e] "); " runs_outside
    }
    # Each call or pointer that registers code to run at exit, by the
    # function it is in; nvcc'\''s registration of the kernels may call atexit.
    for (e = 1; e <= exits; e++) {
        where = ""
        for (s in name)
            if (name[s] == exit_section[e])
                for (k = 1; k <= symbols; k++)
                    if (s_index[k] == s "" && s_type[k] == "FUNC" && s_value[k] <= exit_offset[e] && exit_offset[e] < s_value[k] + s_size[k])
                        where = s_name[k]
        if (cuda && where ~ /__sti____cudaRegisterAll/ || reported[exit_symbol[e], where]++)
            continue
        print "refused: " shown " calls " exit_symbol[e] " (" (where == "" ? "from its data, in section " exit_section[e] : "in " where) "), which registers code to run at exit, outside the lesson'\''s calls: do that work in the lesson'\''s functions"
    }
    for (s in name) {
        n = name[s]
        if (n ~ /^\.(init_array|fini_array|preinit_array|ctors|dtors)(\..*)?$/ || n ~ /^\.(init|fini|jcr)$/ ||
            type[s] ~ /^(INIT_ARRAY|FINI_ARRAY|PREINIT_ARRAY)$/) {
            # Its entries were judged one by one above.
            if (n in listed)
                continue
            print "refused: " shown " has code that runs before main or after it (section " n ": a constructor, a destructor or a static initialiser); " runs_outside
        }
        if (!allocated(s))
            continue
        if (executable(s) || n == ".nv_fatbin" || n == ".eh_frame" || n == ".gcc_except_table")
            code += size[s]
        else
            data += size[s]
    }
    for (k = 1; k <= symbols; k++) {
        if (s_type[k] == "IFUNC")
            print "refused: " shown " defines " s_name[k] " as an indirect function (IFUNC), whose resolver the loader runs before main: make it a plain function"
        if (s_index[k] == "UND" || s_type[k] == "FILE" || s_type[k] == "SECTION")
            continue
        if (s_bind[k] != "LOCAL" && s_name[k] ~ /^(_init|_fini|_start)$/)
            print "refused: " shown " defines " s_name[k] ", which the program'\''s start or end runs; " runs_outside
        if (s_type[k] != "FUNC" && s_type[k] != "IFUNC" && s_size[k] > variable_limit && name[s_index[k] + 0] != ".nv_fatbin")
            print "refused: " shown " holds " s_name[k] ", " kilobytes(s_size[k]) " of static storage, more than the " variable_limit " bytes a variable may have: " storage
        if (s_bind[k] != "LOCAL" && s_name[k] != "")
            print "def\t" s_name[k] "\t" ((s_index[k] ~ /^[0-9]+$/ && group_member(s_index[k] + 0)) ? 1 : 0)
    }
    if (data > data_limit)
        print "refused: " shown " holds " kilobytes(data) " of static data in all (variables, constants and strings), more than the " data_limit " a file may have: " storage
    if (code > code_limit)
        print "refused: " shown " has " kilobytes(code) " of code, more than the " code_limit " a file may have (data among instructions counts too): " storage
}'

# Reads a .su file (-fstack-usage): "FILE:LINE:COLUMN:FUNCTION<TAB>BYTES<TAB>
# static|dynamic|dynamic,bounded" (clang leaves the column out); BYTES is
# the fixed part, or the bound.
# shellcheck disable=SC2016  # an awk program
frames='
BEGIN { FS = "\t" }
$2 + 0 > limit {
    function_name = $1; sub(/^[^:]*:[0-9]+:([0-9]+:)?/, "", function_name)
    region = ""
    if (function_name ~ /\._omp_fn\.[0-9]+$/) { sub(/\._omp_fn\.[0-9]+$/, "", function_name); region = " (its OpenMP region)" }
    print "refused: " shown "'"'"'s " function_name region " needs a stack frame of " $2 " bytes, more than the " limit " a function may have: allocate arrays that large at run time (malloc, or ledger_alloc where the lesson uses it)"
}'

# Mach-O (macOS), which readelf does not read: the code that runs before
# or after main is found by its sections there, __mod_init_func and
# __init_offsets (constructors, static initialisers) and __mod_term_func
# (destructors), and a call that registers code to run at exit by its
# relocations; both as LLVM's objdump (macOS's own objdump) lists them.
is_macho() {
    case $(od -An -N4 -tx1 "$1" 2>/dev/null | tr -d ' \n') in
        cffaedfe | cefaedfe | feedfacf | feedface) return 0 ;;
    esac
    return 1
}
inspect_macho() {
    local object=$1 shown=$2 tool listing=""
    for tool in llvm-objdump objdump; do
        command -v "$tool" > /dev/null || continue
        listing=$("$tool" -h -r "$object" 2>/dev/null) && [[ $listing == *mach-o* ]] && break
        listing=""
    done
    if [ -z "$listing" ]; then
        echo "check-submission: skipped: the check of $shown for code that runs before or after main (no objdump here reads Mach-O: install Xcode's command line tools)" >&2
        return 0
    fi
    printf '%s\n' "$listing" | awk -v shown="$shown" -v registrations="$exit_registrations" '
    BEGIN {
        split(registrations, names, " ")
        for (k in names) registers[names[k]] = 1
        runs_outside = "a lesson'"'"'s code runs only when the lesson'"'"'s programs call it: do that work in the function that needs it"
    }
    /^Sections:/ { listing = 1; next }
    /^RELOCATION RECORDS FOR \[/ {
        listing = 0; section = $4; gsub(/[\[\]:]/, "", section); next
    }
    listing && $1 ~ /^[0-9]+$/ && $2 ~ /^__(mod_init_func|init_offsets|mod_term_func)$/ {
        if (!($2 in found)) order[++count] = $2
        found[$2] = 1
        next
    }
    section != "" && NF >= 3 && $1 ~ /^[0-9a-fA-F]+$/ {
        name = $NF; sub(/^_/, "", name)
        if (section in found && index(", " called[section] ", ", ", " name ", ") == 0)
            called[section] = called[section] (called[section] == "" ? "" : ", ") name
        if (name in registers && !seen[name]++)
            print "refused: " shown " calls " name " (in section " section "), which registers code to run at exit, outside the lesson'"'"'s calls: do that work in the lesson'"'"'s functions"
    }
    END {
        for (k = 1; k <= count; k++) {
            s = order[k]
            when = s == "__mod_term_func" ? "after main" : "before main"
            kind = s == "__mod_term_func" ? "a destructor" : "a constructor or a static initialiser"
            print "refused: " shown " has code that runs " when ": " (called[s] == "" ? "an entry of its " s : called[s]) " (" kind ", from section " s "); " runs_outside
        }
    }' | grep '^refused: ' >&2 && return 1
    return 0
}

definitions=$work/definitions
: > "$definitions"
for object in "${checked[@]}"; do
    shown=$(shown_name "$object")
    cuda=0
    [[ $shown == *.cu ]] && cuda=1
    readelf -W -t -s -r "$object" 2>/dev/null |
        awk -v shown="$shown" -v cuda="$cuda" -v registrations="$exit_registrations" \
            -v variable_limit="$VARIABLE_LIMIT" -v data_limit="$DATA_LIMIT" \
            -v code_limit="$CODE_LIMIT" "$inspect" > "$work/inspected"
    grep '^refused: ' "$work/inspected" >&2 && status=1
    if is_macho "$object"; then
        inspect_macho "$object" "$shown" || status=1
    fi
    awk -F '\t' -v object="$object" -v shown="$shown" -v cuda="$cuda" \
        '$1 == "def" { print $2 "\t" object "\t" shown "\t" (cuda && $3 == 1 && $2 ~ /^_Z/) }' \
        "$work/inspected" >> "$definitions"
    if objdump -d --no-show-raw-insn "$object" 2>/dev/null | grep -qE $'\t(syscall|sysenter|svc|int +\\$0x80)( |$)'; then
        refuse "$shown holds a raw system call instruction: code in a lesson reaches the system only through the calls its lesson allows"
    fi
    if [ -f "${object%.o}.su" ]; then
        awk -v shown="$shown" -v limit="$FRAME_LIMIT" "$frames" "${object%.o}.su" | grep '^refused: ' >&2 && status=1
    else
        refuse "$shown has no stack-usage file beside it (${object%.o}.su): it was not compiled by the toolkit's rules (make clean, then build again)"
    fi
done

# Each global definition against what the files linked with it define, and
# against the names MPI reserves. A "define" line's function must be
# defined; a C++ inline function's or template's copy (in a section group,
# in a .cu file) is the same code as the library's, not a replacement.
defines=""
for k in "${!defined_files[@]}"; do
    defines+="${defined_files[k]}:${defined_symbols[k]} "
done
awk -F '\t' -v defines=" $defines" '
    FILENAME == claimed_file {
        if (!(($1 SUBSEP $3) in who)) who[$1, $3] = $2
        next
    }
    FILENAME != definitions_file {
        if (!(($1 SUBSEP "*") in who)) who[$1, "*"] = $2 " (a library the lesson'\''s programs load)"
        next
    }
    {
        symbol = $1; object = $2; shown = $3; copy = $4
        base = shown; sub(/.*\//, "", base)
        if (index(defines, " " base ":" symbol " ") > 0 || copy == 1)
            next
        if (symbol ~ /^(P?MPI|MPIX)_/) {
            print "refused: " shown " defines " symbol ", a name MPI reserves for itself (MPI_*, PMPI_*, MPIX_*): linked, it would take the place of the MPI library'\''s or the communication ledger'\''s; rename it"
            next
        }
        what = ((symbol, object) in who) ? who[symbol, object] : (((symbol, "*") in who) ? who[symbol, "*"] : "")
        if (what != "")
            print "refused: " shown " defines " symbol ", which " what " defines too: linked, one would take the other'\''s place for every caller; rename yours, or make it static"
    }' claimed_file="$claimed" definitions_file="$definitions" "$claimed" "${library_lists[@]}" "$definitions" | sort -u > "$work/collisions"
if [ -s "$work/collisions" ]; then
    cat "$work/collisions" >&2
    status=1
fi
exit $status
