#!/usr/bin/env bash
# Installs the build tree BUILD into a temporary prefix, builds tests/install/consumer.cc against
# it with find_package(tfdata), and checks that it reads range(10) through the service.
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" --component cpp >/dev/null
test -x "$tmp/prefix/bin/tfdata"
cmake -S "$here" -B "$tmp/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" >/dev/null
# Only the elements: the servers log to stdout in a program that does not set up logging.
out=$("$tmp/build/consumer" | grep -E "^[0-9]+$")
expected=$(seq 0 9)
if [[ "$out" != "$expected" ]]; then
  echo "consumer printed:"; echo "$out"; echo "expected 0..9, one per line"; exit 1
fi
echo "installed tfdata: consumer read 0..9"
