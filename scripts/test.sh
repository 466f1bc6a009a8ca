#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build, and run every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 300
