#!/usr/bin/env bash
# Python functions on workers (issue 23), side by side in one run:
#  - the per-call cost of a trivial function on int64 scalars (one helper: one core's worth);
#  - a filter with a Python predicate on scalars (chunks of inputs per round trip);
#  - a CPU-bound numpy function on 224x224x3 images with 1 helper, and with num_parallel_calls 2
#    and 2 helpers (the ratio is what the second core gives): read from Python through the
#    service, and consumed in the worker's process by `tfdata run` (no data plane);
#  - the same function through PyTorch's DataLoader with 0 and 2 worker processes.
# One in-process worker per measurement, read from Python. Usage: bench/python_functions.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-3}"
scripts/install-deps.sh
export TFDATA_WITH_TORCH=1
source bench/python_build.sh
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
TFDATA_BINARY="$PWD/build/tfdata" .venv/bin/python bench/python_functions.py "$secs"
