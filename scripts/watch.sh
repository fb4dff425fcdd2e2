#!/usr/bin/env bash
# make watch L=NN [T=N]: runs the lesson's checks (make check L=NN, or T=N:
# that TODO's alone) again each time one of its files is saved.
#
# The files' state (name, modification time, size) is noted before each
# check starts and compared once it ends: a save made while a check runs
# starts the next one at once, never goes unseen. Between checks it waits
# with inotifywait (Linux, package inotify-tools) where present, a few
# seconds at a time, and looks at the state again; elsewhere it looks once
# a second.
set -uo pipefail
cd "$(dirname "$0")/.."
lesson=${1:?usage: scripts/watch.sh LESSON-FOLDER [TODO]}
todo=${2:-}
dir=lessons/$lesson
[ -d "$dir" ] || { echo "watch: no folder $dir" >&2; exit 2; }

# One line per source file of the lesson: its name, time and size.
state() {
    if find "$dir" -maxdepth 0 -printf '' 2>/dev/null; then
        find "$dir" -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \) -printf '%p %T@ %s\n'
    else    # BSD find (macOS) has no -printf
        find "$dir" -type f \( -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \) -exec stat -f '%N %Fm %z' {} +
    fi | LC_ALL=C sort
}

check() {
    clear 2>/dev/null || true
    echo "== make check L=${lesson%%-*}${todo:+ T=$todo}   ($(date +%H:%M:%S); Ctrl-C to stop)"
    make --no-print-directory check L="${lesson%%-*}" ${todo:+T="$todo"}
}

if command -v inotifywait >/dev/null 2>&1; then
    wait_for_change() { inotifywait -qq -t 5 -e close_write -e moved_to -e create -e delete "$dir" >/dev/null 2>&1; }
else
    echo "watch: inotifywait not found (apt-get install inotify-tools); looking at the files every second instead"
    wait_for_change() { sleep 1; }
fi

seen=$(state)
check
while :; do
    now=$(state)
    if [ "$now" != "$seen" ]; then
        sleep 0.2   # editors save in several steps
        seen=$(state)
        check
        continue
    fi
    wait_for_change
done
