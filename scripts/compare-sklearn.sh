#!/usr/bin/env bash
# Installs Debian's python3-sklearn for /usr/bin/python3 when missing, then
# runs scripts/compare-sklearn.py: the CSV examples against scikit-learn
# models of the same architecture on the same split.
# Usage: scripts/compare-sklearn.sh MLBUILD DATA_DIR [SEEDS]
set -euo pipefail
if ! /usr/bin/python3 -c 'import sklearn' 2>/dev/null; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	echo "scripts/compare-sklearn.sh: installing python3-sklearn" >&2
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3-sklearn >/dev/null
fi
exec /usr/bin/python3 "$(dirname "$0")/compare-sklearn.py" "$@"
