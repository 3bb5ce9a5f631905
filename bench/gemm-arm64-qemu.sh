#!/bin/sh
# gemm-arm64-qemu.sh cross-compiles rt/cpu's tests for arm64 and runs the
# Sgemm ones (NEON kernel and pure-Go fallback, forced in turn) under
# qemu-user, which is how the NEON assembly is checked on an amd64 machine.
# It installs Debian's qemu-user when qemu-aarch64 is missing.
set -eu
cd "$(dirname "$0")/.."
if ! command -v qemu-aarch64 >/dev/null; then
	SUDO=""
	if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq qemu-user >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOARCH=arm64 go test -c -o "$tmp/cpu.test" ./rt/cpu
status=0
qemu-aarch64 "$tmp/cpu.test" -test.run 'Sgemm|GemmPath' -test.v "$@" >"$tmp/log" 2>&1 || status=$?
grep -E -- '--- (PASS|FAIL)|^(PASS|FAIL)|panic' "$tmp/log" || cat "$tmp/log"
exit $status
