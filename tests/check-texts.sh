#!/usr/bin/env bash
# Texts that match the code: what the lessons, slides and docs quote as a
# program's output is what the program prints, checked by running it.
#
#   tests/check-texts.sh [--tally FILE] [--jobs N] [--full] [FILE.md ...]
# (--full: only the quotes of the broken submissions that make test-full
# grades, from its logs; without it those are left to make test-full)
#
# Without FILEs: README.md, docs/*.md, lessons/*/README.md, slides/*.md.
# Prints one [pass], [FAIL] or [skip] line per quote and rule, then
# "N passed, N failed[, N skipped]"; --tally appends "P F S texts" to FILE
# (tests/run-all.sh's tally). Exit status 0 when nothing failed, 1 when
# something did, 2 on bad usage. Run it after the builds (make test's, or
# make all): it runs build/solution/ and build/student/ programs as they
# are. Its own files are under tests/texts/ (see tests/texts/README.md).
#
# A quote is marked by an HTML comment on the line before its fenced block,
# invisible once the Markdown is rendered:
#
#   <!-- output OPTIONS: COMMAND -->     the block is what COMMAND prints
#                     (the block: the fenced block after the marker, or the
#                     table or paragraph there, up to a blank line)
#   <!-- output OPTIONS: fixture DIR... -->
#                     what the tests print on broken submission DIR
#                     (tests/fixtures/L/N or tests/texts/fixtures/L/N: make
#                     test's own log, or the log of an earlier run of this
#                     script in build/texts/, when newer than everything it
#                     depends on; else graded here, which takes as long as
#                     that fixture does in make test)
#   <!-- output OPTIONS: format FILE... -->
#                     each line is printed by one of the printf formats in
#                     FILEs (for output that needs a GPU or hours)
#   <!-- output recorded: REASON -->    not checked, and why (a [skip])
#   <!-- says "PHRASE {}": COMMAND -->  the next paragraph contains PHRASE,
#                     with {} replaced by what COMMAND prints
#   <!-- measured "PHRASE": HOW -->  the next paragraph contains PHRASE, a
#                     measurement on record (a timing, a size seen once),
#                     not re-run; HOW says how it was measured
#
# COMMAND runs with bash in the repository's top folder, with $MPIRUN set as
# the Makefile sets it; its standard output is compared (standard error is
# shown when the check fails). A COMMAND that exits with status 77 cannot
# check here (no nvcc, say): it is reported skipped, its last line the
# reason. A COMMAND may run make check: the lesson's records for make
# progress are put back afterwards. The block's lines must match
# consecutive lines of the output, in order; leading and trailing spaces do
# not count, nor colours, and of a line rewritten with carriage returns (a
# progress line) only the last version counts.
# A line "..." (or "…") in the block stands for any number of lines, and
# "..." inside a line for any text. OPTIONS:
#   numbers    every number in the block stands for any number (timings)
#   any=W,...  these words stand for any word (a host name)
#   wrapped    a line that starts with a space continues the line before it
#   lines=A-B,C  only these lines of the block are checked (1 = the first)
#   each       each line may be anywhere in the output, in any order
#   head, tail, whole   the block starts / ends / is all of the output
#
# Rules every text follows, checked without markers:
#   in docs/instructors.md (FIGURE_FILES) every figure with a unit (a time,
#   a size, a rate, a share) lies in what a says marker's PHRASE covers or
#   in a measured marker's PHRASE;
#   a text that names a broken submission (`name`) and gives it a score "N
#   of M" gives the one its expected.txt records;
#   no lesson README, skeleton or slide names solutions/ (a student
#   release has none); each lesson's README has at most 1500 words before
#   its first heading with a TODO;
#   every command a lesson's README prints (the lines of a fenced block
#   without a marker that starts with one, and `code` in the prose that
#   starts with make or runs a path under build/ or scripts/) works as
#   printed on a student's machine, in a student release: no mpirun or
#   mpiexec of its own (it refuses as root, and with more ranks than cores;
#   scripts/mpirun runs the Makefile's MPIRUN), except with a hostfile (a
#   cluster's); make's targets exist and need no solutions/, L= names a
#   lesson; build/student/LESSON/PROGRAM is a program the lesson builds,
#   with options its --help lists; no build/solution/; scripts and
#   lessons' scripts exist and can run.
set -u
here=$PWD
cd "$(dirname "$0")/.." || exit 2
if ! command -v python3 >/dev/null 2>&1; then
    echo "  [skip] texts: python3 is not installed"
    echo "0 passed, 0 failed, 1 skipped"
    if [ "${1:-}" = --tally ] && [ -n "${2:-}" ]; then echo "0 0 1 texts" >> "$2"; fi
    exit 0
fi
exec python3 - "$here" "$@" <<'PYTHON'
import concurrent.futures
import difflib
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.getcwd()
WORD_LIMIT = 1500
COMMAND_SECONDS = 300
DEFAULT_FILES = (["README.md"] + sorted(glob.glob("docs/*.md"))
                 + sorted(glob.glob("lessons/*/README.md"))
                 + sorted(glob.glob("slides/*.md")))

NUMBER = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan))"
ELLIPSIS = r"\.\.\.|…"
OUTPUT_MARK = re.compile(r"^\s*<!--\s*output\b(?P<options>[^:]*?)\s*:\s*(?P<source>.*?)\s*-->\s*$")
SAYS_MARK = re.compile(r'^\s*<!--\s*says\s+"(?P<phrase>[^"]*)"\s*:\s*(?P<source>.*?)\s*-->\s*$')
MEASURED_MARK = re.compile(r'^\s*<!--\s*measured\s+"(?P<phrase>[^"]*)"\s*:\s*(?P<source>.*?)\s*-->\s*$')
ANY_MARK = re.compile(r"^\s*<!--\s*(output|says|measured)\b")
# A figure with a unit in prose: a time, a size, a rate or a share.
FIGURE = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:\s?(?:-|to)\s?\d+(?:\.\d+)?)?\s?"
                    r"(?:ns|us|µs|ms|s|min|minutes|seconds|hours|GiB|MiB|KiB|GB|MB|bytes"
                    r"|samples/s|%)(?![\w])")
# The texts whose every figure is checked or marked as measured.
FIGURE_FILES = ("docs/instructors.md",)
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})")


def usage():
    print("usage: tests/check-texts.sh [--tally FILE] [--jobs N] [--full] [FILE.md ...]", file=sys.stderr)
    sys.exit(2)


def parse_arguments(argv):
    tally, jobs, files = None, 4, []
    k = 0
    while k < len(argv):
        if argv[k] == "--tally" and k + 1 < len(argv):
            tally = argv[k + 1]
            k += 1
        elif argv[k] == "--full":
            global FULL
            FULL = True
        elif argv[k] == "--jobs" and k + 1 < len(argv) and argv[k + 1].isdigit():
            jobs = max(1, int(argv[k + 1]))
            k += 1
        elif argv[k].startswith("-"):
            usage()
        else:
            files.append(argv[k])
        k += 1
    return tally, jobs, files


def make_settings():
    """The ZZ_* variables the Makefile exports (MPIRUN, lessons, edited
    files), as make test has them: asked of make itself."""
    settings = {k: v for k, v in os.environ.items() if k.startswith("ZZ_")}
    with tempfile.TemporaryDirectory(prefix="zz-texts-") as scratch:
        extra = os.path.join(scratch, "print.mk")
        with open(extra, "w") as f:
            f.write("zz-texts-env:\n\t@env | grep '^ZZ_'\n")
        try:
            out = subprocess.run(["make", "-s", "--no-print-directory", "-f", "Makefile",
                                  "-f", extra, "zz-texts-env"], capture_output=True,
                                 text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.SubprocessError):
            out = ""
    for line in out.splitlines():
        key, _, value = line.partition("=")
        settings.setdefault(key, value)
    return settings


class Quote:
    """One marked quote or claim in one text."""

    def __init__(self, path, line, kind):
        self.path, self.line, self.kind = path, line, kind
        self.options, self.source, self.phrase = {}, "", ""
        self.lines = []        # (file line, text) of the block
        self.paragraph = ""    # says: the paragraph after the marker
        self.problem = None    # a malformed marker


def parse_options(text):
    options = {}
    for word in text.split():
        key, eq, value = word.partition("=")
        if key in ("numbers", "wrapped", "each", "head", "tail", "whole", "recorded") and not eq:
            options[key] = True
        elif key in ("any", "lines") and eq and value:
            options[key] = value
        else:
            raise ValueError(f"unknown option '{word}'")
    return options


def read_block(lines, start):
    """The block at or after lines[start] (blank lines between): a fenced
    block's content, or a table's or paragraph's lines: (file line, text)
    of each line, or None."""
    k = start
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k >= len(lines):
        return None
    opening = FENCE.match(lines[k])
    if not opening:
        # A table or paragraph: its lines, up to the next blank line.
        block = []
        while k < len(lines) and lines[k].strip():
            block.append((k + 1, lines[k]))
            k += 1
        return block
    indent, fence = len(opening.group("indent")), opening.group("fence")
    closing = re.compile(r"^\s*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}\s*$")
    block = []
    for j in range(k + 1, len(lines)):
        if closing.match(lines[j]):
            return block
        text = lines[j]
        cut = len(text) - len(text.lstrip(" "))
        block.append((j + 1, text[min(cut, indent):]))
    return None


def parse_text(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    quotes = []
    in_fence = None
    for k, text in enumerate(lines):
        fence = FENCE.match(text)
        if fence:
            mark = fence.group("fence")
            if in_fence is None:
                in_fence = mark
            elif mark[0] == in_fence[0] and len(mark) >= len(in_fence) and not text.strip().strip(mark[0]):
                in_fence = None
            continue
        if in_fence is not None or not ANY_MARK.match(text):
            continue
        output, says = OUTPUT_MARK.match(text), SAYS_MARK.match(text)
        measured = MEASURED_MARK.match(text)
        quote = Quote(path, k + 1, "output" if output else "measured" if measured else "says")
        quotes.append(quote)
        if output:
            try:
                quote.options = parse_options(output.group("options"))
            except ValueError as problem:
                quote.problem = str(problem)
                continue
            quote.source = output.group("source")
            if quote.options.get("recorded"):
                continue
            block = read_block(lines, k + 1)
            if not block:
                quote.problem = "no block follows the marker"
            else:
                quote.lines = block
        elif says or measured:
            found = says or measured
            quote.phrase, quote.source = found.group("phrase"), found.group("source")
            j = k + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            paragraph = []
            while j < len(lines) and lines[j].strip():
                paragraph.append(lines[j].strip())
                j += 1
            quote.paragraph = " ".join(paragraph)
            if says and "{}" not in quote.phrase:
                quote.problem = 'the phrase has no {} for what the command prints'
            elif measured and not (quote.phrase.strip() and quote.source.strip()):
                quote.problem = 'a measured marker names the figure and how it was measured'
            elif measured and " ".join(quote.phrase.split()) not in " ".join(quote.paragraph.split()):
                quote.problem = (f'the paragraph after the marker does not say "{quote.phrase}": '
                                 f'"{describe(quote.paragraph, 120)}"')
        else:
            quote.problem = ('a marker is <!-- output OPTIONS: SOURCE -->, '
                             '<!-- says "PHRASE {}": COMMAND --> or '
                             '<!-- measured "PHRASE": HOW -->, on one line')
    return quotes


# ---- Running the sources ---------------------------------------------------

class Ran:
    def __init__(self, out, err="", status=0, seconds=0.0, note=""):
        self.out, self.err, self.status, self.seconds, self.note = out, err, status, seconds, note


def run_command(command, env):
    start = time.time()
    try:
        # Bytes, decoded here: text mode would turn a progress line's
        # carriage returns into line ends.
        # Nothing typed, as at a terminal: a pipe nobody writes to, open
        # until the command ends. With /dev/null, MPICH's mpiexec races a
        # quick program (hostname): it tells rank 0's proxy that stdin has
        # ended, and when that proxy has already finished it dies of
        # SIGPIPE, silently (status 141). A stdin it cannot read it reports
        # ended at once, with the same race.
        typed_from, typed_into = os.pipe()
        try:
            done = subprocess.run(["bash", "-c", command], capture_output=True, env=env,
                                  stdin=typed_from, timeout=COMMAND_SECONDS)
        finally:
            os.close(typed_from)
            os.close(typed_into)
        return Ran(done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"),
                   done.returncode, time.time() - start)
    except subprocess.TimeoutExpired as late:
        out = (late.stdout or b"").decode(errors="replace")
        return Ran(out, f"(stopped after {COMMAND_SECONDS} s)", 124, time.time() - start)


def newest(paths):
    times = [0.0]
    for path in paths:
        for name in glob.glob(path):
            if os.path.isdir(name):
                for top, _, files in os.walk(name):
                    times += [os.path.getmtime(os.path.join(top, f)) for f in files]
            elif os.path.exists(name):
                times.append(os.path.getmtime(name))
    return max(times)


# A broken submission quoted by two texts is graded once: the quotes run in
# parallel, and two gradings of it at once would share its build folder.
FIXTURE_GUARD = threading.Lock()
FIXTURE_LOCKS, FIXTURE_RESULTS = {}, {}


def grade_fixture(folder, env):
    folder = os.path.normpath(folder)
    with FIXTURE_GUARD:
        lock = FIXTURE_LOCKS.setdefault(folder, threading.Lock())
    with lock:
        if folder not in FIXTURE_RESULTS:
            FIXTURE_RESULTS[folder] = grade_fixture_once(folder, env)
        ran = FIXTURE_RESULTS[folder]
    return Ran(ran.out, ran.err, ran.status, ran.seconds, ran.note)


def grade_fixture_once(folder, env):
    """The tests' output on broken submission `folder` (LESSON/NAME): make
    test's log, or this script's own from an earlier run, when newer than
    everything the grading depends on; else graded here, and kept."""
    folder = os.path.normpath(folder)
    lesson, name = os.path.basename(os.path.dirname(folder)), os.path.basename(folder)
    if not os.path.isdir(folder):
        return Ran("", f"{folder}: no such folder", 2)
    depends = newest([folder, f"lessons/{lesson}", f"solutions/{lesson}", f"tests/test_{lesson}.c",
                      f"tests/producer/{lesson}.c", "tests/harness", "tests/symbols", "tests/manifest",
                      "tests/hidden", "common", "Makefile", "scripts"])
    kept = f"build/texts/{folder.replace('/', '_')}.log"
    logs = [(kept, "graded by an earlier run")]
    if folder.startswith("tests/fixtures/"):
        logs.insert(0, (f"build/test/fixtures/{lesson}/{name}/work/{lesson}.log", "make test's log"))
    for log, note in logs:
        if os.path.exists(log) and os.path.getmtime(log) >= depends:
            with open(log, errors="replace", newline="") as f:
                return Ran(f.read(), note=note)
    out = f"build/texts/{lesson}-{name}-{os.getpid()}-{threading.get_ident()}"
    ran = run_command(f"GRADE_SANITIZERS=0 scripts/grade.sh --no-sandbox --lesson {lesson} --overlay {folder} --out {out}", env)
    try:
        with open(f"{out}/work/{lesson}.log", errors="replace", newline="") as f:
            ran.out = f.read()
    except OSError:
        ran.err = ran.out + ran.err
        ran.out = ""
    else:
        if ran.out.strip():     # a grading that did not build is not kept
            os.makedirs("build/texts", exist_ok=True)
            shutil.copyfile(f"{out}/work/{lesson}.log", kept)
        else:
            ran.err = ran.out + ran.err
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree("build/graded/" + re.sub(r"[^A-Za-z0-9_.-]", "_", out), ignore_errors=True)
    ran.note = "graded here"
    return ran


def run_source(source, env):
    words = source.split()
    if words and words[0] == "fixture":
        start = time.time()
        parts = [grade_fixture(folder, env) for folder in words[1:]]
        return Ran("".join(p.out for p in parts), "".join(p.err for p in parts),
                   max([p.status for p in parts] + [0]), time.time() - start,
                   ", ".join(sorted({p.note for p in parts if p.note})))
    if words and words[0] == "format":
        return Ran("")      # read by format_patterns, nothing to run
    return run_command(source, env)


# ---- Matching ----------------------------------------------------------------

class Item:
    def __init__(self, line, text, pattern):
        self.line, self.text, self.pattern = line, text, pattern   # pattern None: "..."


def line_pattern(text, options):
    """A regular expression for one quoted line, matched against one
    output line with its outer spaces removed."""
    parts = [ELLIPSIS]
    if options.get("numbers"):
        parts.append(r"(?<![A-Za-z_\d.])[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")
    words = [w for w in options.get("any", "").split(",") if w]
    if words:
        parts.append(r"(?<!\S)(?:" + "|".join(map(re.escape, words)) + r")(?=$|[\s,;:.)])")
    if options.get("numbers"):
        parts.append(r"\s+")
    token = re.compile("|".join(f"({p})" for p in parts))
    body, at, s = [], 0, text.strip()
    for found in token.finditer(s):
        body.append(re.escape(s[at:found.start()]))
        kind = found.lastindex
        if kind == 1:
            body.append(".*?")
        elif options.get("numbers") and kind == 2:
            body.append(NUMBER)
        elif words and kind == (3 if options.get("numbers") else 2):
            body.append(r"\S+?")
        else:
            body.append(r"\s*")
        at = found.end()
    body.append(re.escape(s[at:]))
    return re.compile("".join(body))


def select_lines(quote):
    lines = quote.lines
    spec = quote.options.get("lines")
    if spec:
        keep = set()
        for piece in spec.split(","):
            first, _, last = piece.partition("-")
            keep.update(range(int(first), int(last or first) + 1))
        lines = [entry for k, entry in enumerate(lines, 1) if k in keep]
    if quote.options.get("wrapped"):
        joined = []
        for line, text in lines:
            if joined and text[:1].isspace() and text.strip():
                joined[-1] = (joined[-1][0], joined[-1][1].rstrip() + " " + text.strip())
            else:
                joined.append((line, text))
        lines = joined
    return lines


def items_of(quote):
    items = []
    for line, text in select_lines(quote):
        if text.strip() in ("...", "…"):
            if not items or items[-1].pattern is not None:
                items.append(Item(line, text, None))
        else:
            items.append(Item(line, text, line_pattern(text, quote.options)))
    return items


def closest(text, candidates):
    near = difflib.get_close_matches(text.strip(), [c.strip() for c in candidates if c.strip()], 1, 0.4)
    return near[0] if near else None


def match_in_order(items, out, head, tail):
    """None when the items match consecutive lines of out (a "..." item any
    run of them, empty included); else (the first item that cannot match,
    or None when all did but the output goes on; the output line after
    the last one matched)."""
    n = len(out)
    where = [None if it.pattern is None else [j for j in range(n) if it.pattern.fullmatch(out[j])]
             for it in items]
    hits = [None if w is None else set(w) for w in where]
    deepest = [0, 0]
    memo = {}

    def from_(i, j):      # can items[i:] match from output line j on?
        if (i, j) in memo:
            return memo[(i, j)]
        if (i, j) > tuple(deepest):
            deepest[:] = [i, j]
        if i == len(items):
            result = (not tail) or j == n
        elif items[i].pattern is None:
            # A gap at the end takes the rest; otherwise the next item is a
            # line (items never hold two gaps in a row).
            result = i + 1 == len(items) or any(
                from_(i + 2, k + 1) for k in where[i + 1] if k >= j)
        else:
            result = j in hits[i] and from_(i + 1, j + 1)
        memo[(i, j)] = result
        return result

    if items[0].pattern is None or head:
        starts = [0]
    else:
        starts = where[0]
    for j in starts:
        if from_(0, j):
            return None
    i = deepest[0]
    return (items[i] if i < len(items) else None), deepest[1]


def format_patterns(files):
    """Every line of every string literal in files (C, shell, awk), as a
    pattern: conversions match what they print, spaces any spaces."""
    conversion = re.compile(r"%%|%[-+ #0]*(\*|\d+)?(?:\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGsc])")
    literal = re.compile(r'"((?:[^"\\\n]|\\.)*)"((?:\s*"(?:[^"\\\n]|\\.)*")*)')
    patterns = []
    for name in files:
        for path in sorted(glob.glob(name)):
            with open(path, errors="replace") as f:
                source = f.read()
            for found in literal.finditer(source):
                text = found.group(1) + "".join(re.findall(r'"((?:[^"\\\n]|\\.)*)"', found.group(2)))
                text = re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), text)
                for piece in text.split("\n"):
                    if not piece.strip() or "%" not in piece and len(piece.strip()) < 8:
                        continue
                    body, at = [], 0
                    for c in conversion.finditer(piece):
                        body.append(re.sub(r"(\\\s)+", r"\\s*", re.escape(piece[at:c.start()])))
                        if c.group(0) == "%%":
                            body.append("%")
                        elif c.group(4) in "sc":
                            body.append(".*?")
                        elif c.group(4) in "xX":
                            body.append(r"\s*[0-9a-fA-F]+")
                        else:
                            body.append(r"\s*" + NUMBER)
                        at = c.end()
                    body.append(re.sub(r"(\\\s)+", r"\\s*", re.escape(piece[at:])))
                    patterns.append((piece, re.compile(r"\s*" + "".join(body) + r"\s*")))
    return patterns


# ---- The checks ----------------------------------------------------------------

def describe(source, length=70):
    source = " ".join(source.split())
    return source if len(source) <= length else source[:length - 3] + "..."


def tail_of(text, lines=8):
    kept = [l for l in text.rstrip("\n").split("\n") if l.strip()][-lines:]
    return "\n".join("           | " + l for l in kept) if kept else "           | (nothing)"


def shown(line):
    """What a terminal shows of one output line: colours and other escape
    sequences dropped, and of a line rewritten with carriage returns (a
    progress counter) its last version."""
    line = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line)
    parts = [p for p in line.split("\r") if p.strip()]
    return parts[-1].strip() if parts else ""


def check_output(quote, ran):
    """A list of problems (empty: the quote holds)."""
    items = items_of(quote)
    if not [it for it in items if it.pattern is not None]:
        return ["the block has no line to check"]
    if quote.source.split()[0] == "format":
        patterns = format_patterns(quote.source.split()[1:])
        problems = []
        for it in items:
            if it.pattern is None:
                continue
            if not any(p.fullmatch(it.text.strip()) for _, p in patterns):
                near = closest(it.text, [text for text, _ in patterns])
                problems.append(f"{quote.path}:{it.line}: no printf format in {' '.join(quote.source.split()[1:])} "
                                f"prints this line: \"{it.text.strip()}\""
                                + (f"\n         closest format: \"{near}\"" if near else ""))
        return problems
    out = [shown(line) for line in ran.out.rstrip("\n").split("\n")] if ran.out.strip() else []
    while out and not out[-1]:
        out.pop()
    where = f"the output of `{describe(quote.source)}`"
    if not out:
        return [f"{quote.path}:{quote.line}: {where} is empty (exit status {ran.status})\n" + tail_of(ran.err)]
    if quote.options.get("each"):
        problems = []
        for it in items:
            if it.pattern is not None and not any(it.pattern.fullmatch(o) for o in out):
                near = closest(it.text, out)
                problems.append(f"{quote.path}:{it.line}: not in {where}: \"{it.text.strip()}\""
                                + (f"\n         closest output line: \"{near}\"" if near else ""))
        return problems
    opts = quote.options
    failed = match_in_order(items, out, opts.get("head") or opts.get("whole"),
                            opts.get("tail") or opts.get("whole"))
    if failed is None:
        return []
    item, matched_to = failed
    if item is None:
        return [f"{quote.path}:{items[-1].line}: the quote ends before {where} does: "
                f"output line {matched_to + 1} follows, \"{out[matched_to] if matched_to < len(out) else ''}\""]
    first = next(it for it in items if it.pattern is not None)
    if item is first:
        context = "no output line matches it"
    else:
        context = f"the quote's lines before it match output lines up to line {matched_to}"
    near = closest(item.text, out)
    return [f"{quote.path}:{item.line}: not in {where} ({context}): \"{item.text.strip()}\""
            + (f"\n         closest output line: \"{near}\"" if near else "")]


def check_says(quote, ran):
    value = " ".join(ran.out.split())
    phrase = " ".join(quote.phrase.replace("{}", value).split())
    if not value:
        return [f"{quote.path}:{quote.line}: `{describe(quote.source)}` printed nothing "
                f"(exit status {ran.status})\n" + tail_of(ran.err)]
    if phrase in " ".join(quote.paragraph.split()):
        return []
    return [f"{quote.path}:{quote.line + 1}: the paragraph should say \"{phrase}\" "
            f"(`{describe(quote.source)}` prints {value}); it says: "
            f"\"{describe(quote.paragraph, 160)}\""]


def words_before_first_todo(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    words, in_fence = 0, False
    for k, line in enumerate(lines):
        if FENCE.match(line):
            in_fence = not in_fence
        if not in_fence and re.match(r"^#+ .*\bTODO\b", line):
            return words, k + 1
        if not line.strip().startswith("<!--"):
            words += len(line.split())
    return words, None


# ---- The commands a lesson prints ---------------------------------------------

COMMAND_START = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*"
                           r"(?:(?:make|mpirun|mpiexec\S*)(?=\s|/|$)|build/|scripts/|lessons/)")
CLUSTER_OPTIONS = ("--hostfile", "-hostfile", "--machinefile", "-machinefile", "--host", "-host", "-H")


def quoted_commands(path):
    """(line, command) for each command the text prints (the header says
    which), continuation lines joined."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    commands, previous, k = [], "", 0
    while k < len(lines):
        fence = FENCE.match(lines[k])
        if fence:
            mark = fence.group("fence")
            closing = re.compile(r"^\s*" + re.escape(mark[0]) + "{" + str(len(mark)) + r",}\s*$")
            j, body = k + 1, []
            while j < len(lines) and not closing.match(lines[j]):
                body.append((j + 1, lines[j].strip()))
                j += 1
            first = next((text for _, text in body if text), "")
            if not ANY_MARK.match(previous) and COMMAND_START.match(first):
                pending = None
                for number, text in body:
                    if not text or text.startswith("#"):
                        continue
                    pending = (pending[0], pending[1] + " " + text) if pending else (number, text)
                    if pending[1].endswith("\\"):
                        pending = (pending[0], pending[1][:-1].rstrip())
                        continue
                    commands.append(pending)
                    pending = None
            previous, k = "", j + 1
            continue
        if lines[k].strip():
            previous = lines[k]
        for span in re.findall(r"`([^`\n]+)`", lines[k]):
            span = span.strip()
            if COMMAND_START.match(span) and (span.startswith("make ") or re.search(
                    r"(?:^|\s)(?:build/student/|build/solution/|build/bench/|scripts/)\S", span)):
                commands.append((k + 1, span))
        k += 1
    return commands


class Facts:
    """What the commands are checked against, read once."""

    def __init__(self):
        with open("Makefile", encoding="utf-8") as f:
            makefile = f.read()
        self.targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
        self.solution_targets = set()
        for words in re.findall(r"^SOLUTION_TARGETS\s*[:+]?=(.*)$", makefile, re.M):
            self.solution_targets |= set(words.split())
        self.lessons = sorted(os.path.basename(d) for d in glob.glob("lessons/*") if os.path.isdir(d))
        self.programs = {}
        for lesson in self.lessons:
            try:
                with open(f"lessons/{lesson}/lesson.mk", encoding="utf-8") as f:
                    found = re.search(r"_PROGRAMS\s*:?=(.*)", f.read())
            except OSError:
                found = None
            self.programs[lesson] = found.group(1).split() if found else []
        self.helps = {}

    def lesson_of(self, name):
        if name.isdigit():
            name = name.zfill(2)
        return next((lesson for lesson in self.lessons if lesson.startswith(name)), None)

    def help_of(self, lesson, program):
        """The program's --help, from a build of this checkout; None where
        it is not built (CUDA without nvcc)."""
        if (lesson, program) not in self.helps:
            text = None
            for build in ("build/solution", "build/student"):
                binary = f"{build}/{lesson}/{program}"
                if os.access(binary, os.X_OK):
                    try:
                        done = subprocess.run([binary, "--help"], capture_output=True, text=True,
                                              timeout=30, stdin=subprocess.DEVNULL)
                        text = done.stdout + done.stderr
                    except (OSError, subprocess.SubprocessError):
                        text = None
                    break
            self.helps[(lesson, program)] = text
        return self.helps[(lesson, program)]


def command_problems(command, facts):
    """Why a printed command would not work as printed (empty: it would)."""
    problems = []
    for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue
        while words and (re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]) or words[0] in ("env", "time", "nice")):
            words.pop(0)
        if not words:
            continue
        if words[0] == "make":
            for word in words[1:]:
                if word.startswith("L=") and not facts.lesson_of(word[2:]):
                    problems.append(f"`{word}`: there is no such lesson ({' '.join(facts.lessons)})")
                elif word.startswith("-") or "=" in word:
                    continue
                elif word not in facts.targets:
                    problems.append(f"`make {word}`: the Makefile has no target {word}")
                elif word in facts.solution_targets:
                    problems.append(f"`make {word}` needs solutions/, which a student release leaves out")
            continue
        if re.fullmatch(r"mpirun|mpiexec(?:\.\S+)?|orterun", words[0]) and not any(
                w.split("=")[0] in CLUSTER_OPTIONS for w in words):
            problems.append(f"`{words[0]}` as printed refuses to start as root, and with more ranks than "
                            f"cores: print `scripts/mpirun` (the Makefile's MPIRUN) in its place")
        for index, word in enumerate(words):
            student = re.fullmatch(r"build/student/([^/]+)/([^/\s]+)", word)
            if word.startswith("build/solution/"):
                problems.append(f"`{word}`: a student release has no build/solution/; "
                                f"print build/student/ (the student's own build)")
            elif student:
                lesson, program = student.groups()
                if lesson not in facts.programs:
                    problems.append(f"`{word}`: there is no lesson {lesson}")
                elif program not in facts.programs[lesson]:
                    problems.append(f"`{word}`: lesson {lesson} builds no program {program} "
                                    f"(it builds {' '.join(facts.programs[lesson]) or 'none'})")
                else:
                    usage = facts.help_of(lesson, program)
                    for option in words[index + 1:]:
                        name = option.split("=")[0]
                        if (usage is not None and re.fullmatch(r"--[a-z][a-z0-9-]*", name)
                                and not re.search(r"(?<![\w-])" + re.escape(name) + r"(?![\w-])", usage)):
                            problems.append(f"`{program} {name}`: {program} --help lists no option {name}")
            elif re.fullmatch(r"build/bench/bench_\d\d", word):
                if not glob.glob(f"bench/{os.path.basename(word)}.c"):
                    problems.append(f"`{word}`: there is no bench/{os.path.basename(word)}.c")
            elif index == 0 and re.match(r"(?:scripts|lessons)/", word):
                if not (os.path.isfile(word) and os.access(word, os.X_OK)):
                    problems.append(f"`{word}`: no such script, or it cannot run (chmod +x)")
    return problems


def fixture_scores():
    """{fixture name: {score "N of M", ...}} from every expected*.txt."""
    scores = {}
    for expect in glob.glob("tests/fixtures/*/*/expected*.txt") + \
            glob.glob("tests/texts/fixtures/*/*/expected*.txt"):
        name = os.path.basename(os.path.dirname(expect))
        with open(expect, errors="replace") as f:
            for line in f:
                found = re.match(r"score: (\d+)/(\d+)", line)
                if found:
                    scores.setdefault(name, set()).add(f"{found[1]} of {found[2]}")
    return scores


def quoted_score_problems(path, scores):
    """A text that names a broken submission (`name`) and, before the next
    one in the same paragraph, gives a score "N of M" must give one of the
    scores its expected.txt records. ([problems], how many scores given)"""
    with open(path, errors="replace") as f:
        text = f.read()
    problems, count = [], 0
    for paragraph in re.finditer(r"(?:.+\n?)+", text):
        names = [m for m in re.finditer(r"`([a-z0-9-]+)`", paragraph[0]) if m[1] in scores]
        for k, name in enumerate(names):
            end = names[k + 1].start() if k + 1 < len(names) else len(paragraph[0])
            said = re.search(r"\b(\d+) of (\d+)\b", paragraph[0][name.end():end])
            if not said:
                continue
            count += 1
            if said[0] not in scores[name[1]]:
                line = text.count("\n", 0, paragraph.start() + name.start()) + 1
                problems.append(f"{path}:{line}: gives `{name[1]}` {said[0]}, but its expected "
                                f"score is {' or '.join(sorted(scores[name[1]]))}")
    return problems, count


def unaccounted_figures(path):
    """The figures with a unit in `path`'s prose (FIGURE) that no marker
    accounts for: each must lie in what a says marker's phrase covers in the
    paragraph after it ({} standing for any text), which check_says checks,
    or in a measured marker's phrase. Fenced blocks are quotes, checked as
    such. ([problems], how many figures)"""
    with open(path, errors="replace") as f:
        lines = f.read().split("\n")
    problems, count, markers, paragraph, in_fence = [], 0, [], [], None

    def close():
        text = " ".join(t for _, t in paragraph)
        covered = []
        for kind, phrase in markers:
            phrase = " ".join(phrase.split())
            pattern = (".+?".join(re.escape(part) for part in phrase.split("{}"))
                       if kind == "says" else re.escape(phrase))
            covered += [m.span() for m in re.finditer(pattern, text)]
        nonlocal count
        for m in FIGURE.finditer(text):
            count += 1
            if not any(a <= m.start() and m.end() <= b for a, b in covered):
                # The line it is on: count the characters of the lines.
                at, line = 0, paragraph[0][0]
                for k, t in paragraph:
                    if at <= m.start() < at + len(t) + 1:
                        line = k
                    at += len(t) + 1
                problems.append(f"{path}:{line}: \"{m.group(0)}\" is neither checked (<!-- says "
                                f"\"...{{}}...\": COMMAND -->) nor marked as measured (<!-- measured "
                                f"\"...\": HOW -->)")
    for k, text in enumerate(lines, 1):
        fence = FENCE.match(text)
        if fence or in_fence is not None:
            if fence:
                mark = fence.group("fence")
                in_fence = mark if in_fence is None else (
                    None if mark[0] == in_fence[0] and not text.strip().strip(mark[0]) else in_fence)
            continue
        mark = SAYS_MARK.match(text) or MEASURED_MARK.match(text)
        if mark:
            markers.append(("says" if SAYS_MARK.match(text) else "measured", mark.group("phrase")))
        elif text.strip().startswith("<!--"):
            continue
        elif text.strip():
            paragraph.append((k, text.strip()))
        elif paragraph:
            close()
            markers, paragraph = [], []
    if paragraph:
        close()
    return problems, count


def rules(files):
    """(passed, [problems], description) for the rules without markers."""
    results = []
    student = [f for f in files if re.fullmatch(r"(lessons/[^/]+/README|slides/[^/]+)\.md", f)]
    if any(re.fullmatch(r"lessons/[^/]+/README\.md", f) for f in files):
        student += sorted(glob.glob("lessons/*/*.[ch]") + glob.glob("lessons/*/*.cu"))
    if student:
        problems = []
        for path in student:
            with open(path, errors="replace") as f:
                for k, line in enumerate(f, 1):
                    if "solutions/" in line:
                        problems.append(f"{path}:{k}: names solutions/, which a student release "
                                        f"does not have: \"{line.strip()[:120]}\"")
        results.append((problems, "no lesson text, skeleton or slide points students to solutions/"))
    readmes = [f for f in files if re.fullmatch(r"lessons/[^/]+/README\.md", f)]
    if readmes:
        facts, problems, count = Facts(), [], 0
        for path in readmes:
            for line, command in quoted_commands(path):
                count += 1
                for problem in command_problems(command, facts):
                    problems.append(f"{path}:{line}: {problem}: \"{describe(command, 100)}\"")
        results.append((problems, f"the {count} commands the lessons print work as printed, in a "
                                  f"student release, as root and on few cores"))
        # The rule can fail: each of these must be refused.
        planted = ["mpirun -np 4 build/student/06-zero/train_zero --stage 3",
                   "ZZ_STEPS_DIR=/tmp/steps mpiexec -n 2 build/student/02-mpi-matvec/matvec_mpi",
                   "make build-solution", "make check L=99", "make no-such-target",
                   "build/solution/01-serial-matvec/matvec",
                   "build/student/01-serial-matvec/no_such_program",
                   "scripts/mpirun -np 2 build/student/06-zero/train_zero --no-such-option 1",
                   "scripts/no-such-script.sh"]
        missed = [c for c in planted if not command_problems(c, facts)]
        # ... and each must be found where a text prints it: a block that
        # starts with it is a command, whatever word it begins with.
        missed += [f"{c} (not taken for a command)" for c in planted
                   if not COMMAND_START.match(c)]
        results.append(([f"a planted command that would not work was not refused: \"{c}\""
                         for c in missed],
                        f"the rule refuses {len(planted)} planted commands that would not work"))
    for path in files:
        if path in FIGURE_FILES:
            problems, count = unaccounted_figures(path)
            results.append((problems, f"{path}: each of its {count} figures with a unit is "
                                      f"checked, or marked as measured"))
    scores = fixture_scores()
    for path in files:
        problems, count = quoted_score_problems(path, scores)
        if count:
            results.append((problems, f"{path}: the {count} scores it gives for broken "
                                      f"submissions are their expected.txt's"))
    for path in files:
        if not re.fullmatch(r"lessons/[^/]+/README\.md", path):
            continue
        words, line = words_before_first_todo(path)
        if line is None:
            results.append(([f"{path}: no heading names a TODO"], f"{path}: the core path"))
        elif words > WORD_LIMIT:
            results.append(([f"{path}:{line}: {words} words before the first TODO, more than "
                             f"{WORD_LIMIT}: move derivations and extras after the core path"],
                            f"{path}: the core path"))
        else:
            results.append(([], f"{path}: {words} words before the first TODO (line {line}), "
                                f"at most {WORD_LIMIT}"))
    return results


# make test grades the quick broken submissions and make test-full the slow
# ones (those marked "graded: in make test-full"): a quote of a slow one is
# checked by make test-full (--full), which checks only those.
FULL = False


def graded_by_test_full(source):
    words = source.split()
    if not words or words[0] != "fixture":
        return False
    for folder in words[1:]:
        for expect in glob.glob(os.path.join(folder, "expected*.txt")):
            with open(expect, errors="replace") as f:
                if any(line.startswith("graded: in make test-full") for line in f):
                    return True
    return False


def main():
    here = sys.argv[1]
    tally, jobs, files = parse_arguments(sys.argv[2:])
    if tally:
        tally = os.path.join(here, tally)
    # FILEs as given (from where the script was started), shown relative to
    # the top folder when they are inside it.
    given = [os.path.normpath(os.path.join(here, f)) for f in files]
    files = [os.path.relpath(f) if f.startswith(ROOT + "/") else f for f in given] or DEFAULT_FILES
    start = time.time()
    quotes = []
    for path in files:
        try:
            quotes += parse_text(path)
        except OSError as problem:
            print(f"check-texts: {path}: {problem.strerror}", file=sys.stderr)
            sys.exit(2)

    settings = make_settings()
    env = dict(os.environ, **settings)
    env["MPIRUN"] = settings.get("ZZ_MPIRUN", "mpirun")
    deferred = [q for q in quotes if q.problem is None and not q.options.get("recorded")
                and graded_by_test_full(q.source) != FULL]
    if FULL:
        quotes = [q for q in quotes if q not in deferred]
    sources = sorted({q.source for q in quotes
                      if q.problem is None and not q.options.get("recorded")
                      and q.kind != "measured"
                      and q not in deferred})

    # A quote of make check's output runs it, and make check records its
    # results for make progress: those lessons' records are put back as
    # they were (and nothing else in build/check is touched).
    records = {}
    for source in sources:
        for name in re.findall(r"\bcheck\s+L=(\S+)", source):
            for folder in glob.glob(f"lessons/{name.zfill(2) if name.isdigit() else name}*"):
                for path in (f"build/check/{os.path.basename(folder)}.results",
                             f"build/check/{os.path.basename(folder)}.build.log"):
                    try:
                        with open(path, "rb") as f:
                            records[path] = f.read()
                    except OSError:
                        records[path] = None
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            ran = dict(zip(sources, pool.map(lambda s: run_source(s, env), sources)))
    finally:
        for path, content in records.items():
            if content is None:
                if os.path.exists(path):
                    os.remove(path)
            else:
                with open(path, "wb") as f:
                    f.write(content)

    passed = failed = skipped = 0
    print("== texts: what they quote is what the programs print")
    for q in quotes:
        where = f"{q.path}:{q.line}"
        if q.problem:
            print(f"  [FAIL] {where}: {q.problem}")
            failed += 1
            continue
        if q.options.get("recorded"):
            print(f"  [skip] {where}: recorded, not checked: {q.source}")
            skipped += 1
            continue
        if q.kind == "measured":
            print(f"  [pass] {where}: \"{q.phrase}\" is in its paragraph, a measurement on "
                  f"record: {describe(q.source, 70)}")
            passed += 1
            continue
        if q in deferred:
            print(f"  [skip] {where}: `{describe(q.source, 60)}` is graded by make test-full, which checks this quote")
            skipped += 1
            continue
        result = ran[q.source]
        if result.status == 77 and q.source.split()[0] not in ("fixture", "format"):
            reason = ([l for l in (result.out + result.err).split("\n") if l.strip()] or ["exit status 77"])[-1]
            print(f"  [skip] {where}: `{describe(q.source, 50)}` skipped: {reason.strip()}")
            skipped += 1
            continue
        problems = check_output(q, result) if q.kind == "output" else check_says(q, result)
        if problems:
            failed += 1
            for k, problem in enumerate(problems):
                print(("  [FAIL] " if k == 0 else "         ") + problem)
        else:
            passed += 1
            if q.kind == "output":
                count = len([it for it in items_of(q) if it.pattern is not None])
                what = f"{count} line{'s' if count != 1 else ''} match"
            else:
                what = f"\"{q.phrase}\" from"
            note = f", {result.note}" if result.note else ""
            print(f"  [pass] {where}: {what} `{describe(q.source, 60)}`{note}")
    for problems, description in ([] if FULL else rules(files)):
        if problems:
            failed += 1
            for k, problem in enumerate(problems):
                print(("  [FAIL] " if k == 0 else "         ") + problem)
        else:
            passed += 1
            print(f"  [pass] {description}")
    print(f"  ({time.time() - start:.0f} s)")
    print(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else ""))
    if tally:
        with open(tally, "a") as f:
            f.write(f"{passed} {failed} {skipped} texts\n")
    sys.exit(1 if failed else 0)


main()
PYTHON
