#!/usr/bin/env bash
# Installs the system packages the tests need, through apt-get, when missing.
set -euo pipefail
need=()
command -v g++ >/dev/null || need+=(g++)
command -v npm >/dev/null || need+=(npm)
# ONNX's backend test data, which the import tests run (cmd/mlbuild/import_test.go)
[ -d /usr/share/libonnx-testdata/data/node ] || need+=(libonnx-testdata)
if [ ${#need[@]} -gt 0 ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq "${need[@]}"
fi
