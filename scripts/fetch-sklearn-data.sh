#!/usr/bin/env bash
# Fetches the CSV data sets that Debian's python3-sklearn ships (iris, wine,
# breast cancer, diabetes, digits) into DIR, gunzipping the compressed ones,
# and checks their md5 sums. The files come from the installed package when
# it is there, otherwise from the package file itself (apt-get download,
# unpacked with dpkg-deb: nothing is installed). The tests of the CSV and
# regression paths read them. Usage: scripts/fetch-sklearn-data.sh DIR
set -euo pipefail
dir=${1:-data/sklearn}
mkdir -p "$dir"
check() {
	(cd "$dir" && md5sum --status -c - <<SUMS
d69a16ea6136ccb02a7c37c66375ebba  iris.csv
4a4db56405701ab0f3ed0e194e993c0f  wine_data.csv
36ef90874abc87f4b4a8554dcc17cf6f  breast_cancer.csv
2c4ab40e72f133defddd16aa997d7a84  diabetes_data_raw.csv
3e3835cad7a1565b5142786dfbd64bc6  diabetes_target.csv
a0339c30a8a5312a1b6f9e5c719dcce5  digits.csv
SUMS
	)
}
if check 2>/dev/null; then
	echo "scikit-learn data sets already in $dir (md5 sums match)"
	exit 0
fi
src=/usr/lib/python3/dist-packages/sklearn/datasets/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$src/iris.csv" ]; then
	echo "fetching Debian's python3-sklearn package (unpacked, not installed)..."
	if ! (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1); then
		sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		$sudo apt-get update -qq
		(cd "$tmp" && apt-get download python3-sklearn >/dev/null)
	fi
	dpkg-deb -x "$tmp"/python3-sklearn_*.deb "$tmp/root"
	src="$tmp/root$src"
fi
for f in iris.csv wine_data.csv breast_cancer.csv; do
	cp "$src/$f" "$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
done
for f in diabetes_data_raw.csv diabetes_target.csv digits.csv; do
	gunzip -c "$src/$f.gz" >"$dir/$f.tmp" && mv "$dir/$f.tmp" "$dir/$f"
done
check || { echo "the scikit-learn data sets' md5 sums do not match the files of python3-sklearn 1.2.1" >&2; exit 1; }
echo "scikit-learn data sets in $dir (md5 sums match)"
