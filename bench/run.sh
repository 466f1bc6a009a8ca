#!/usr/bin/env bash
# Pipeline throughput benchmarks (in-process, no service). Prints a markdown table for
# docs/performance.md. Usage: bench/run.sh [SECONDS_PER_RUN] (default 5). Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-5}"
scripts/build.sh >/dev/null
[ -d build/bench-data ] || ./build/tfdata_make_data --out build/bench-data >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo
echo "| pipeline | elements/s | bytes/s |"
echo "|---|---:|---:|"
for p in range range_batch range_map_batch tfrecord_parse_p1 tfrecord_parse_p2 jpeg_resize_p1 jpeg_resize_p2; do
  json=$(./build/tfdata bench "bench/pipelines/$p.pbtxt" --duration "$secs" --warmup 1 --json)
  python3 - "$p" "$json" <<'PY'
import json, sys
name, j = sys.argv[1], json.loads(sys.argv[2])["pipeline"]
def h(x, unit):
    for s in ["", " k", " M", " G"]:
        if x < 1000: return f"{x:.3g}{s}{unit}"
        x /= 1000
    return f"{x:.3g} T{unit}"
print(f"| {name} | {h(j['elements_per_s'], '')} | {h(j['bytes_per_s'], 'B')} |")
PY
done
