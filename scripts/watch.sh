#!/usr/bin/env bash
# make watch L=NN: runs the lesson's checks again each time one of its files
# is saved. Uses inotifywait (Linux, package inotify-tools) when present;
# elsewhere it looks at the files' modification times once a second.
set -uo pipefail
cd "$(dirname "$0")/.."
lesson=${1:?usage: scripts/watch.sh LESSON-FOLDER}
dir=lessons/$lesson
[ -d "$dir" ] || { echo "watch: no folder $dir" >&2; exit 2; }

check() {
    clear 2>/dev/null || true
    echo "== make check L=${lesson%%-*}   ($(date +%H:%M:%S); Ctrl-C to stop)"
    make --no-print-directory check L="${lesson%%-*}"
}

check
if command -v inotifywait >/dev/null 2>&1; then
    while inotifywait -qq -e close_write -e moved_to "$dir"; do
        sleep 0.2   # editors save in several steps
        check
    done
else
    echo "watch: inotifywait not found (apt-get install inotify-tools); checking the files' times every second instead"
    stamp() { find "$dir" \( -name '*.[ch]' -o -name '*.cu' \) -newer "$1" -print -quit; }
    marker=$(mktemp)
    trap 'rm -f "$marker"' EXIT
    while sleep 1; do
        if [ -n "$(stamp "$marker")" ]; then
            touch "$marker"
            check
        fi
    done
fi
