#!/usr/bin/env bash
# tools/dup_figures.sh [TREE]: the `duplicates` figures of issue 38, for a
# checkout (default: this one): pairs among the product's C files
# (pipeline, receivers, processors, exporters) and among tests/, each part
# copied alone so that a pair is within it, as
#   product: PAIRS pairs, NOT_BOILERPLATE not boilerplate
# then the rows not marked boilerplate (a place to look, not a verdict).
set -euo pipefail
src=$(cd "${1:-.}" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for part in product tests; do
    mkdir -p "$tmp/$part"
    if [ "$part" = product ]; then
        files=$(cd "$src" && git ls-files pipeline receivers processors exporters | grep '\.[ch]$')
    else
        files=$(cd "$src" && git ls-files tests)
    fi
    (cd "$src" && echo "$files" | tar -cf - -T -) | tar -xf - -C "$tmp/$part"
    duplicates --repo "$tmp/$part" --most 200 --seconds 120 > "$tmp/$part.txt"
    # "N pairs of places (...) (S by shape alone, B of those marked boilerplate)"
    head -1 "$tmp/$part.txt" | sed -E 's/^([0-9]+) pairs.* ([0-9]+) of those marked boilerplate.*/\1 \2/' |
        { read -r pairs bp; echo "$part: $pairs pairs, $((pairs - bp)) not boilerplate"; }
    [ "$part" = product ] && grep '^D' "$tmp/$part.txt" | grep -v ' boilerplate' || true
done
