#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image
# (Ubuntu): it installs what the toolkit needs and builds the grader's tools
# and the tests, so that each submission is only compiled and tested.
set -euo pipefail
cd "${AUTOGRADER_ROOT:-/autograder}/source/zero-to-zero"
scripts/install-deps.sh
make all >/dev/null
make build/grade-tool/grade
