#!/usr/bin/env bash
# tfdata side by side with TensorFlow (its tf.data service, and tf.data in process), in one run on
# this machine; each figure RUNS times, the two systems taking turns. Prints every measurement,
# then a table of ranges and ratios for docs/performance.md (bench/vs_tensorflow/table.py).
#
# TensorFlow (tensorflow-cpu from PyPI) goes into a virtualenv of its own, build/tfvenv; tfdata
# never needs it, and neither .ci/run nor the quick start runs this.
#
# What is compared (steady state: 1 s warm-up, then 3 s; start-up is not counted):
# - the data plane: 1 MiB elements and int64 scalars from one worker process to one reader process.
#   The 1 MiB element is made once and replayed (service_1mib_cached.pbtxt; TF: from_tensors(...)
#   .repeat()), so that the data plane is measured, not the making of data: TF's range + batch
#   takes about 30 ms to make one. TF's reader pulls inside a tf.function, as a TF trainer does; tfdata's C++
#   reader is `tfdata bench --dispatcher`, its Python client bench/python_read.py. With and
#   without compression (TF's "AUTO", i.e. snappy; tfdata's snappy and auto).
# - distributed_epoch against parallel_epochs, scalars, for both.
# - the pipeline engine in process: range + batch, TFRecord + parse_example, and TFRecord +
#   parse_example + decode_jpeg + resize(224), on 1 and 2 threads (bench/pipelines/*.pbtxt and
#   their twins in bench/vs_tensorflow/tf_pipelines.py).
# - scaling over 1, 2, 4 and 8 workers on a map that sleeps 2 ms per element. tfdata's workers are
#   processes; TF's are servers in one process (they sleep, so they do not compete for cores).
# Usage: bench/vs_tensorflow.sh [RUNS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
TFDATA_WITH_BENCH=1 scripts/install-deps.sh
source bench/python_build.sh
if [ ! -x build/tfvenv/bin/python ]; then
  python3 -m venv build/tfvenv
  build/tfvenv/bin/pip install -q --no-cache-dir --disable-pip-version-check tensorflow-cpu numpy
fi
[ -d build/bench-data ] || ./build/tfdata_make_data --out build/bench-data >/dev/null
bin=./build/tfdata
tfpy="$PWD/build/tfvenv/bin/python"
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$tmp"' EXIT
results="$tmp/results"
: >"$results"
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ {print $2}') GB"
echo "TensorFlow $("$tfpy" -c 'import os; os.environ["TF_CPP_MIN_LOG_LEVEL"]="3"; import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"

# record KEY RUN JSON: keeps elements_per_s and bytes_per_s of a JSON line (or of its "service"
# or "pipeline" part), and prints them.
record() {
  python3 - "$1" "$2" "$3" >>"$results" <<'PY'
import json, sys
key, run, line = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    j = json.loads(line.strip().splitlines()[-1])
except (ValueError, IndexError):
    print(f"{key}\t{run}\tnan\tnan")
    sys.exit(0)
if "service" in j:  # tfdata bench --dispatcher: the service's figure
    j = j["service"]["throughput"]
elif "pipeline" in j:  # tfdata bench: the pipeline in process
    j = j["pipeline"]
print(f"{key}\t{run}\t{j['elements_per_s']}\t{j['bytes_per_s']}")
PY
  tail -1 "$results" | awk -F'\t' '{ printf "%-34s run %s: %12.0f elements/s %8.3f GB/s\n", $1, $2, $3, $4 / 1e9 }'
}
tf_read() { (cd bench/vs_tensorflow && "$tfpy" tf_read.py "$@" 2>/dev/null | tail -1); }
ours_service() { # PIPELINE TRANSFER MODE COMPRESSION
  $bin bench "bench/pipelines/$1.pbtxt" --dispatcher "$addr" --duration 3 --warmup 1 --transfer "$2" --mode "$3" \
    --compression "$4" --json 2>/dev/null
}
ours_python() { # PIPELINE TRANSFER MODE COMPRESSION
  .venv/bin/python bench/python_read.py "bench/pipelines/$1.pbtxt" --dispatcher "$addr" --duration 3 --warmup 1 \
    --transfer "$2" --mode "$3" --compression "$4"
}

# TensorFlow's service: a dispatcher and one worker, more for the scaling rows.
"$tfpy" bench/vs_tensorflow/tf_service.py --target-file "$tmp/tf.target" --workers-file "$tmp/tf.workers" \
  >"$tmp/tf_service.log" 2>&1 &
tf_workers() {
  echo "$1" >"$tmp/tf.workers"
  for _ in $(seq 1200); do [ "$(cat "$tmp/tf.workers.ready" 2>/dev/null)" = "$1" ] && return; sleep 0.05; done
  echo "TF's service did not start $1 workers; its log:" >&2
  cat "$tmp/tf_service.log" >&2
  exit 1
}
tf_workers 1
tf=$(cat "$tmp/tf.target")
# tfdata: a dispatcher and one worker process.
source bench/one_worker.sh
source bench/iperf.sh
# iperf3 first and last: the loopback TCP ceiling of any gRPC plane, in the same run.
record_iperf() {
  iperf | tee "$tmp/iperf"
  python3 -c "import sys; print(f'iperf3\t{sys.argv[1]}\t0\t{float(sys.argv[2]) * 1e9 / 8}')" \
    "$1" "$(awk '{print $4}' "$tmp/iperf")" >>"$results"
}
record_iperf 1

for i in $(seq "$runs"); do
  for p in service_1mib_cached service_scalars; do
    record "$p.tf.none" "$i" "$(tf_read $p --service "$tf")"
    record "$p.cpp.grpc.none" "$i" "$(ours_service $p grpc parallel_epochs none)"
    record "$p.cpp.shm.none" "$i" "$(ours_service $p shm parallel_epochs none)"
    record "$p.py.grpc.none" "$i" "$(ours_python $p grpc parallel_epochs none)"
    record "$p.py.shm.none" "$i" "$(ours_python $p shm parallel_epochs none)"
  done
  record "service_1mib_cached.tf.auto" "$i" "$(tf_read service_1mib_cached --service "$tf" --compression auto)"
  record "service_1mib_cached.cpp.grpc.snappy" "$i" "$(ours_service service_1mib_cached grpc parallel_epochs snappy)"
  record "service_1mib_cached.cpp.grpc.auto" "$i" "$(ours_service service_1mib_cached grpc parallel_epochs auto)"
  record "service_1mib_cached.py.grpc.snappy" "$i" "$(ours_python service_1mib_cached grpc parallel_epochs snappy)"
  record "service_scalars.tf.dynamic" "$i" "$(tf_read service_scalars --service "$tf" --mode distributed_epoch)"
  record "service_scalars.cpp.grpc.dynamic" "$i" "$(ours_service service_scalars grpc distributed_epoch none)"
  record "service_scalars.cpp.shm.dynamic" "$i" "$(ours_service service_scalars shm distributed_epoch none)"
  record "service_scalars.py.grpc.dynamic" "$i" "$(ours_python service_scalars grpc distributed_epoch none)"
  for p in range_batch tfrecord_parse_p1 tfrecord_parse_p2 jpeg_resize_p1 jpeg_resize_p2; do
    record "$p.tf" "$i" "$(tf_read $p)"
    record "$p.ours" "$i" "$($bin bench "bench/pipelines/$p.pbtxt" --duration 3 --warmup 1 --json 2>/dev/null)"
  done
done

# Scaling: the same job over 1, 2, 4 and 8 workers of each system.
have=1
for n in 1 2 4 8; do
  tf_workers $n
  while [ $have -lt $n ]; do
    $bin worker --dispatcher "$addr" --port-file "$tmp/w$have" --heartbeat-interval 100ms --log-level warn >/dev/null &
    while [ ! -s "$tmp/w$have" ]; do sleep 0.05; done
    have=$((have + 1))
  done
  sleep 0.5
  for i in $(seq "$runs"); do
    record "sleep_2ms.w$n.tf" "$i" "$(tf_read sleep_2ms --service "$tf")"
    record "sleep_2ms.w$n.ours" "$i" "$(ours_service sleep_2ms grpc parallel_epochs none)"
  done
done
record_iperf 2
cp "$results" build/vs_tensorflow.tsv  # table.py can print the table again from it
echo
python3 bench/vs_tensorflow/table.py "$results"
