#!/usr/bin/env bash
# Python reader benchmark: one worker process -> a Python process that touches each element,
# side by side with the C++ reader (`tfdata bench --dispatcher`, steady state) in the same run,
# for int64 scalars, 1 MiB int64 elements and batches of 64 224x224x3 uint8 images. Then the
# per-element Python cost without the service (pipeline.run()). Usage: bench/python.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-4}"
scripts/install-deps.sh
source bench/python_build.sh
py=.venv/bin/python
bin=./build/tfdata
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
mkdir -p build/bench-data
$py -c "
import numpy as np, tfdata
rng = np.random.default_rng(0)
img = rng.integers(0, 255, (224, 224, 3)).astype(np.uint8)
tfdata.io.write_tfrecord('build/bench-data/image224.tfrecord', [tfdata.io.encode_jpeg(img)])"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
source bench/one_worker.sh
cxx() {  # the C++ reader's steady state through the service
  $bin bench "$1" --dispatcher "$addr" --duration "$secs" --warmup 1 --json 2>/dev/null |
    $py -c "import json,sys; t=json.load(sys.stdin)['service']['throughput']; print(f\"{t['elements_per_s']:.0f} elements/s, {t['bytes_per_s']/1e9:.3f} GB/s\")"
}
python() {
  $py bench/python_read.py "$1" --dispatcher "$addr" --duration "$secs" --warmup 1 "${@:2}" |
    $py -c "import json,sys; t=json.load(sys.stdin); print(f\"{t['elements_per_s']:.0f} elements/s, {t['bytes_per_s']/1e9:.3f} GB/s, {t['python_us_per_element']:.2f} us/element in Python, {t['wait_seconds']:.2f} s waiting\")"
}
# Alternate the two readers, three rounds: the machine is shared and noisy.
for name in service_scalars service_1mib service_images; do
  for round in 1 2 3; do
    echo "$name C++ reader (tfdata bench), round $round: $(cxx "bench/pipelines/$name.pbtxt")"
    echo "$name Python reader, round $round:           $(python "bench/pipelines/$name.pbtxt")"
  done
done
for name in service_scalars service_1mib; do
  echo "$name Python, pipeline.run() in process (no service): $(python "bench/pipelines/$name.pbtxt" --source local)"
done
