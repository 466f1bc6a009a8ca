#!/usr/bin/env bash
# Load and soak test: 1 dispatcher and 8 worker processes on loopback, 64 readers (threads of 4
# Python processes) starting and stopping parallel_epochs and distributed_epoch reads for SECONDS
# (default 600), every element checked; RSS and open fds of the servers at start and end. The
# report goes to stderr, a JSON summary to stdout; exits 1 on any error, duplicate, missing
# element, crash, or RSS / fd growth beyond bench/load.py's bounds. tests/python/test_load.py
# runs 60 s of it in CI. Usage: bench/load.sh [SECONDS] > summary.json
# TFDATA_BINARY=path uses that binary and the Python in .venv (or TFDATA_PYTHON) as they are;
# otherwise the binary and the package are built first, as bench/python.sh does.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-600}"
if [ -z "${TFDATA_BINARY:-}" ]; then
  scripts/install-deps.sh >/dev/null
  source bench/python_build.sh >/dev/null
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" >&2
exec "${TFDATA_PYTHON:-.venv/bin/python}" bench/load.py --binary "${TFDATA_BINARY:-build/tfdata}" --seconds "$secs"
