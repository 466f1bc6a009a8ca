#!/usr/bin/env bash
# Quick start, part 2: install what is missing, build, and run every test: the C++ tests with
# ctest, then the Python package's with pytest (tests/python) against the package as pip installs
# it. Set TFDATA_WITH_TORCH=1 to install torch and run the PyTorch tests too (.ci/run does).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/check-layering.sh   # lib/service's roles include each other only the allowed way; only grpc/ includes gRPC
TFDATA_WITH_BROWSER=1 scripts/install-deps.sh  # chromium: tests/python/test_status.py loads the status page
scripts/check-format.sh     # clang-format (.clang-format) would change no file
scripts/python-env.sh
scripts/build.sh -DTFDATA_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python"
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 300)
# pip install of the package, through scikit-build-core, reusing build/ (the same CMake project;
# the defines match build/'s so that nothing but the extension is built again).
.venv/bin/pip install -q --disable-pip-version-check --no-build-isolation -Cbuild-dir=build \
  -Ccmake.define.TFDATA_BUILD_TESTS=ON -Ccmake.define.TFDATA_WERROR=ON .
# From outside the source tree, so the tests import the installed package.
cd tests/python
TFDATA_BINARY="$OLDPWD/build/tfdata" ../../.venv/bin/python -m pytest -q -p no:cacheprovider .
