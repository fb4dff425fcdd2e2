#!/usr/bin/env bash
# The scripts a student or an instructor runs, on macOS's bash 3.2:
#
#   tests/check-bash32.sh [--tally FILE] [FILE...]   (default: scripts/)
#
# macOS ships bash 3.2. A script there either runs on it, or sources
# scripts/portable.sh first, which runs it again under Homebrew's bash 4+
# (or stops, saying so). So each script of scripts/ (and its gradescope/)
# holds none of bash 4's constructs before that line, and none at all
# where it has no such line (portable.sh itself, and install-deps.sh, which
# installs the newer bash): associative arrays (declare -A), mapfile and
# readarray, case changes (${x,,} ${x^^}), wait -n, coproc, |&, &>>,
# namerefs (declare -n) and bash 4.4's ${x@Q}. Then it proves it can
# refuse: a file with each construct is refused, one with none passes.
# And portable.sh on a PATH made here: GNU's tools found under Homebrew's
# g-prefixed names only, one line and status 2 without them, and one line
# and status 2 under a shell that is not bash 4 (dash stands in for it).
# Prints [pass] or [FAIL] lines; exit status 0 when all pass.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
tally=""
if [ "${1:-}" = --tally ]; then
    tally=${2:?usage: tests/check-bash32.sh [--tally FILE] [FILE...]}
    shift 2
fi
echo "== scripts that macOS's bash 3.2 can start (tests/check-bash32.sh)"
. tests/say.sh
say_to "$tally" bash32
if ! command -v python3 > /dev/null 2>&1; then
    say skip "bash 3.2: python3 is not installed"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/zz-bash32-XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
# The planted files: one construct each, and one clean.
planted=(
    'declare -A seen=()'
    'mapfile -t lines < file'
    'readarray lines < file'
    'echo "${name,,}"'
    'echo "${name^^}"'
    'wait -n'
    'coproc worker { cat; }'
    'make |& tee log'
    'echo more &>> log'
    'declare -n ref=name'
    'echo "${name@Q}"'
)
for k in "${!planted[@]}"; do
    printf '#!/usr/bin/env bash\nset -u\n%s\n' "${planted[k]}" > "$work/planted-$k.sh"
done
printf '#!/usr/bin/env bash\nset -u\nnames=(a b)\necho "${names[@]}" "${#names[@]}" 2>&1 | cat\n# declare -A in a comment\n' > "$work/clean.sh"
printf '#!/usr/bin/env bash\n. "$(dirname "$0")/portable.sh" "$@"\ndeclare -A allowed=()\n' > "$work/after-portable.sh"
printf '#!/usr/bin/env bash\ndeclare -A too_early=()\n. "$(dirname "$0")/portable.sh" "$@"\n' > "$work/before-portable.sh"
if [ $# -eq 0 ]; then
    set -- $(grep -lE '^#!.*\b(ba)?sh\b' scripts/*.sh scripts/mpirun scripts/gradescope/* 2>/dev/null | sort -u)
fi
python3 - "$tally" "$work" "$@" <<'PYTHON'
import os, re, sys
tally, work, files = sys.argv[1], sys.argv[2], sys.argv[3:]
CONSTRUCTS = [
    (r"\b(declare|local|typeset)\s+-[a-zA-Z]*A", "an associative array (declare -A)"),
    (r"\b(declare|local|typeset)\s+-[a-zA-Z]*n\b", "a nameref (declare -n)"),
    (r"(^|[;&|(\s])(mapfile|readarray)\b", "mapfile/readarray"),
    (r"\$\{[#!]?[A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?(,,?|\^\^?)[^}]*\}", "a case change (${x,,}, ${x^^})"),
    (r"\$\{[A-Za-z_][A-Za-z_0-9]*(\[[^]]*\])?@[QEPAaUuLK]\}", "${x@Q} (bash 4.4)"),
    (r"\bwait\s+-n\b", "wait -n"),
    (r"(^|[;&|(\s])coproc\b", "coproc"),
    (r"\|&", "|&"),
    (r"&>>", "&>>"),
]
SOURCES_PORTABLE = re.compile(r'^\s*(\.|source)\s+"?\$\(dirname "\$0"\)/(\.\./scripts/)?portable\.sh"?')

def code_lines(path):
    """(number, line) of the lines that are code: no comment lines, and no
    text after a # that starts a comment."""
    for number, line in enumerate(open(path, errors="replace"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        yield number, re.sub(r"\s#(?![{!}]).*$", "", line.rstrip("\n"))

def problems(path):
    """What bash 3.2 would meet before portable.sh runs (all of it, where
    the file does not source it)."""
    found = []
    for number, line in code_lines(path):
        if SOURCES_PORTABLE.match(line):
            break
        for pattern, name in CONSTRUCTS:
            if re.search(pattern, line):
                found.append(f"{path}:{number}: {name}: {line.strip()[:80]}")
    return found

failed = passed = 0
def verdict(ok, text):
    global failed, passed
    ok = bool(ok)
    print(f"  [{'pass' if ok else 'FAIL'}] {text}")
    passed += ok
    failed += not ok

bad = [p for f in files for p in problems(f)]
verdict(not bad, f"{len(files)} scripts: bash 3.2 meets none of bash 4's constructs "
        f"before portable.sh (or at all)" + ("".join("\n    " + b for b in bad)))
planted = sorted(f for f in os.listdir(work) if f.startswith("planted-"))
refused = [f for f in planted if problems(os.path.join(work, f))]
verdict(len(refused) == len(planted) == 11,
        f"the rule refuses {len(refused)} of {len(planted)} planted constructs")
verdict(not problems(os.path.join(work, "clean.sh")) and
        not problems(os.path.join(work, "after-portable.sh")) and
        problems(os.path.join(work, "before-portable.sh")),
        "it passes plain arrays and what comes after portable.sh, and refuses what comes before")
if tally:
    with open(tally, "a") as out:
        out.write(f"{passed} {failed} 0 bash32\n")
sys.exit(1 if failed else 0)
PYTHON
status=$?

# scripts/portable.sh itself, in a copy of its folder, on a PATH made here.
say_to "$tally" portable
tree=$work/tree
mkdir -p "$tree/scripts" "$work/g-only" "$work/none"
cp scripts/portable.sh "$tree/scripts/"
printf '%s\n' '#!/usr/bin/env bash' '. "$(dirname "$0")/portable.sh" "$@"' \
    'timeout 5 true && sha256sum < /dev/null | cut -c1-8 && realpath -m /a/b/../c' \
    > "$tree/scripts/probe.sh"
# What the probe and portable.sh run, and GNU's three only g-prefixed (as
# Homebrew's coreutils names them); the other folder without them at all.
for tool in bash env dirname mkdir ln cut true uname; do
    ln -s "$(type -P "$tool")" "$work/g-only/$tool"
    ln -s "$(type -P "$tool")" "$work/none/$tool"
done
for tool in timeout sha256sum realpath; do
    ln -s "$(type -P "$tool")" "$work/g-only/g$tool"
done
PATH=$work/g-only bash "$tree/scripts/probe.sh" > "$work/g-only.log" 2>&1
if [ "$(cat "$work/g-only.log")" = "$(printf 'e3b0c442\n/a/c')" ] &&
   [ -L "$tree/build/gnu-tools/timeout" ]; then
    say yes "GNU's timeout, sha256sum and realpath -m found as gtimeout, gsha256sum and grealpath (Homebrew's names), by their own names through build/gnu-tools/"
else
    say no "GNU's tools under Homebrew's names (gtimeout, ...) should be found" "$work/g-only.log"
fi
PATH=$work/none bash "$tree/scripts/probe.sh" > "$work/none.log" 2>&1
code=$?
if [ $code -eq 2 ] && [ "$(wc -l < "$work/none.log")" -eq 1 ] &&
   grep -q "^probe.sh: needs GNU timeout, found neither as timeout nor as gtimeout: on macOS, brew install coreutils" "$work/none.log"; then
    say yes "without them: one line, status 2: $(cut -c1-90 "$work/none.log")..."
else
    echo "(exit status $code)" >> "$work/none.log"
    say no "without GNU's tools: one line and status 2" "$work/none.log"
fi
# A shell that is not bash 4 (dash stands in for macOS's bash 3.2, where
# no Homebrew bash is installed): one line, status 2.
if command -v dash > /dev/null 2>&1; then
    dash "$tree/scripts/probe.sh" > "$work/dash.log" 2>&1
    code=$?
    if [ $code -eq 2 ] && [ "$(wc -l < "$work/dash.log")" -eq 1 ] &&
       grep -q "^probe.sh: needs bash 4 or later, and this is bash of another kind: on macOS, brew install bash" "$work/dash.log"; then
        say yes "under a shell that is not bash 4 (dash, for macOS's bash 3.2 without Homebrew's): one line, status 2"
    else
        echo "(exit status $code)" >> "$work/dash.log"
        say no "under a shell that is not bash 4: one line and status 2" "$work/dash.log"
    fi
fi
[ $say_failed -eq 0 ] || status=1
exit $status
