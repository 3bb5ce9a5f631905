#!/bin/sh
# setup.sh installs what the sgemm benchmark compares against, from Debian:
# OpenBLAS (the OpenMP build, which shares libgomp's pool with PyTorch, see
# /work/shared/BENCHMARKS.md), its headers for the C driver, numpy and PyTorch
# for /usr/bin/python3, and gcc. It is idempotent: already-installed packages
# are left alone.
set -eu
pkgs="gcc libopenblas-dev libopenblas0-openmp libopenblas0-pthread python3-numpy python3-torch"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
echo "bench/setup.sh: installing$missing" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
