#!/usr/bin/env bash
# Installs Debian's python3-sklearn for /usr/bin/python3 when missing, then
# runs scripts/compare-sklearn.py: the CSV, npz and image-folder examples
# against scikit-learn models of the same architecture on the same split
# (Pillow, python3-pil, decodes the JPEG photographs on its side).
# Usage: scripts/compare-sklearn.sh MLBUILD SKLEARN_DIR IMAGES_DIR [SEEDS]
set -euo pipefail
if ! /usr/bin/python3 -c 'import sklearn, PIL' 2>/dev/null; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "scripts/compare-sklearn.sh: installing python3-sklearn and python3-pil" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-sklearn python3-pil >/dev/null
fi
exec /usr/bin/python3 "$(dirname "$0")/compare-sklearn.py" "$@"
