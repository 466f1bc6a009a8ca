#!/usr/bin/env bash
# The slower checks: clang -Wthread-safety build (lib/, cmd/ and the tests), and the tests under
# ASan + UBSan. The thread-safety build is unoptimized (build type None): the analysis runs in
# the front end, and it is only compiled, not run.
set -euo pipefail
cd "$(dirname "$0")/.."
TFDATA_WITH_CLANG=1 scripts/install-deps.sh
CC=clang CXX=clang++ cmake -S . -B build-tsa -G Ninja -DTFDATA_THREAD_SAFETY=ON -DTFDATA_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=None >/dev/null
cmake --build build-tsa -j "$(nproc)"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTFDATA_SANITIZE="address;undefined" >/dev/null
cmake --build build-asan -j "$(nproc)"
cd build-asan
export LSAN_OPTIONS="suppressions=$PWD/../scripts/lsan.supp:print_suppressions=0"
ctest --output-on-failure -j "$(nproc)" --timeout 600
