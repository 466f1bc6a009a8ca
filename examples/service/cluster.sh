# Sourced by the examples in this directory: a dispatcher and workers on this machine, stopped
# when the example exits. Run the examples from the repository root, e.g.
#   bash examples/service/coordinated_reads.sh
# TFDATA names the binary (default: build/tfdata, made by scripts/build.sh).
set -euo pipefail
TFDATA="${TFDATA:-build/tfdata}"
[ -x "$TFDATA" ] || { echo "no $TFDATA: run scripts/build.sh first (or set TFDATA)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

wait_for() { for _ in $(seq 400); do [ -s "$1" ] && return 0; sleep 0.025; done; echo "timed out waiting for $1" >&2; exit 1; }

# start_dispatcher: sets DISPATCHER to its address.
start_dispatcher() {
  "$TFDATA" dispatcher --port 0 --port-file "$tmp/d.port" --host 127.0.0.1 --log-level warn "$@" >/dev/null &
  wait_for "$tmp/d.port"
  DISPATCHER="127.0.0.1:$(cat "$tmp/d.port")"
}

# start_worker NAME [FLAGS...]: a worker of $DISPATCHER; its log goes to $tmp/NAME.log.
start_worker() {
  local name=$1; shift
  "$TFDATA" worker --dispatcher "$DISPATCHER" --port-file "$tmp/$name.port" --worker-address "127.0.0.1:%port%" \
    --heartbeat-interval 100ms --log-level info "$@" >/dev/null 2>"$tmp/$name.log" &
  wait_for "$tmp/$name.port"
}
