#!/usr/bin/env bash
# Makes .venv/, the Python environment the tests, examples and benchmarks use: numpy, pytest,
# nanobind and scikit-build-core from PyPI; grpcio with its health and reflection clients (the
# standard tools that the health and reflection tests call the servers with); torch (CPU use) and torchdata (StatefulDataLoader)
# too when TFDATA_WITH_TORCH=1.
# Does nothing that is already done.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
need=()
for m in numpy pytest nanobind scikit_build_core; do
  .venv/bin/python -c "import $m" 2>/dev/null || need+=("${m//_/-}")
done
for pair in grpc:grpcio grpc_health:grpcio-health-checking grpc_reflection:grpcio-reflection kubernetes_validate:kubernetes-validate; do
  .venv/bin/python -c "import ${pair%%:*}" 2>/dev/null || need+=("${pair#*:}")
done
# --no-cache-dir throughout: a wheel kept in pip's cache beside its installed copy doubles the
# disk this takes (torch and its CUDA libraries are about 5 GB installed).
if ((${#need[@]})); then
  .venv/bin/pip install -q --no-cache-dir --disable-pip-version-check "${need[@]}"
fi
if [[ "${TFDATA_WITH_TORCH:-0}" == 1 ]] && ! .venv/bin/python -c "import torch" 2>/dev/null; then
  # PyPI's torch wheel (it brings CUDA libraries it needs to import; they stay unused on a CPU).
  free_kb=$(df -Pk .venv | awk 'NR == 2 {print $4}')
  if ((free_kb < 7 * 1024 * 1024)); then
    echo "scripts/python-env.sh: torch from PyPI needs about 7 GB of free disk (its CUDA libraries" \
         "install whether or not they are used); $((free_kb / 1024 / 1024)) GB free under $PWD/.venv" >&2
    exit 1
  fi
  .venv/bin/pip install -q --no-cache-dir --disable-pip-version-check torch
fi
if [[ "${TFDATA_WITH_TORCH:-0}" == 1 ]] && ! .venv/bin/python -c "import torchdata.stateful_dataloader" 2>/dev/null; then
  .venv/bin/pip install -q --no-cache-dir --disable-pip-version-check torchdata
fi
