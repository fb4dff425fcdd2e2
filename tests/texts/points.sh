#!/usr/bin/env bash
# The tests and points of every lesson, as docs/instructors.md tabulates
# them: from the manifests (tests/manifest/, and tests/hidden/manifest/ where
# this copy has hidden tests), one line per test. For tests/check-texts.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "| lesson | tests | points |"
echo "|---|---:|---:|"
for manifest in tests/manifest/*.txt; do
    lesson=$(basename "$manifest" .txt)
    cat "$manifest" $(ls "tests/hidden/manifest/$lesson.txt" 2>/dev/null) |
        awk -F'|' -v lesson="$lesson" '!/^#/ && NF > 2 { tests++; points += $1 }
            END { printf "| %s | %d | %d |\n", lesson, tests, points }'
done
