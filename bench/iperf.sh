# Sourced by the data-plane benchmarks: iperf, which prints iperf3's loopback TCP rate (3 s), the
# ceiling of any TCP data plane on this host, for the same run's figures.
iperf() {
  iperf3 -s -1 -p 5201 >/dev/null 2>&1 & sleep 0.3
  echo "iperf3 loopback TCP: $(iperf3 -c 127.0.0.1 -p 5201 -t 3 -f g | grep receiver | awk '{print $7, $8}')"
  wait $! 2>/dev/null || true
}
