#!/usr/bin/env bash
# Installs what tfdata needs to build and test, from Debian 12's packages. Needs root (or sudo).
# Does nothing when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libcli11-dev libfmt-dev libspdlog-dev catch2
  zlib1g-dev libsnappy-dev libjpeg62-turbo-dev libxxhash-dev
  libssl-dev openssl  # TLS: certificate checks (tfdata_grpc); the security tests make certificates
  prometheus-cpp-dev libcivetweb-dev  # metrics: the registry and text format; the HTTP server of --metrics-port
  python3 python3-dev python3-venv python3-pip
  iproute2  # ip netns, veth, bridge, tc: the tests across network hosts (tests/python/netns_hosts.py)
)
# The optional checks (clang -Wthread-safety build, sanitizers, libFuzzer) also need clang.
if [[ "${TFDATA_WITH_CLANG:-0}" == 1 ]]; then
  PACKAGES+=(clang libclang-rt-14-dev)
fi
# The status page's test loads it in a real browser (scripts/test.sh asks for it).
if [[ "${TFDATA_WITH_BROWSER:-0}" == 1 ]]; then
  PACKAGES+=(chromium)
fi
# The benchmarks under bench/ compare against raw loopback TCP (iperf3).
if [[ "${TFDATA_WITH_BENCH:-0}" == 1 ]]; then
  PACKAGES+=(iperf3)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) != 0 ]]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
