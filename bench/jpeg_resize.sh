#!/usr/bin/env bash
# The JPEG path: 1080p JPEGs to 224x224, decoded at full size then resized (decode_jpeg + resize)
# against decoded at a reduced DCT scale and resized (decode_jpeg with resize_height/width), side
# by side with farm-bench (whole `tfdata run` processes, paired A/B), for smooth images at quality
# 75 (~47 KB) and 90 (~130 KB) and noisy ones at 90 (~500 KB, where entropy decoding dominates).
# Usage: bench/jpeg_resize.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
scripts/build.sh >/dev/null
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for case in "75 2" "90 2" "90 12"; do
  read -r quality noise <<<"$case"
  dir="build/bench-data/jpeg1080"
  rm -rf "$dir" && mkdir -p "$dir"
  ./build/tfdata_make_data --out "$dir" --files 1 --records 100 --width 1920 --height 1080 \
    --quality "$quality" --noise "$noise"
  echo "== 100 JPEGs 1920x1080, --quality $quality --noise $noise: fused (A) vs decode + resize (B)"
  farm-bench -n "$runs" --timeout 600 \
    --vs "./build/tfdata run bench/pipelines/jpeg1080_resize.pbtxt --format null --quiet" \
    -- ./build/tfdata run bench/pipelines/jpeg1080_decode_resize.pbtxt --format null --quiet
done
