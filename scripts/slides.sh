#!/usr/bin/env bash
# make slides: renders slides/*.md into self-contained HTML slide decks in
# build/slides/, one per lesson, with pandoc. dzslides keeps its style and
# script inside the page, so the decks open offline.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v pandoc >/dev/null 2>&1; then
    echo "make slides: pandoc is not installed; get it with" >&2
    echo "  scripts/install-deps.sh --extras   (or: apt-get install pandoc, brew install pandoc)" >&2
    echo "The decks are plain Markdown and read well as they are: slides/*.md" >&2
    exit 1
fi
mkdir -p build/slides
# --embed-resources appeared in pandoc 2.19; older ones call it --self-contained.
if pandoc --help | grep -q -- --embed-resources; then
    embed=(--embed-resources --standalone)
else
    embed=(--self-contained)
fi
for deck in slides/*.md; do
    out=build/slides/$(basename "${deck%.md}").html
    pandoc -t dzslides "${embed[@]}" "$deck" -o "$out"
    echo "  $out"
done
