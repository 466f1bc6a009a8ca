#!/usr/bin/env bash
# Quick start, part 1: install what is missing, build, and run the main job (`tfdata local`) on an example.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
./build/tfdata local examples/range.pbtxt
