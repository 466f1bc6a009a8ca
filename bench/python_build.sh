# Sourced by the benchmarks that use the Python package: makes .venv (scripts/python-env.sh; with
# torch when TFDATA_WITH_TORCH=1 is exported), builds tfdata with its Python module and installs
# the package into .venv, reusing build/.
scripts/python-env.sh
scripts/build.sh -DTFDATA_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
.venv/bin/pip install -q --disable-pip-version-check --no-build-isolation -Cbuild-dir=build \
  -Ccmake.define.TFDATA_BUILD_TESTS=ON -Ccmake.define.TFDATA_WERROR=ON .
