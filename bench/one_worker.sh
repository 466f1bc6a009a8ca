# Sourced by the service benchmarks: starts a dispatcher and one worker process of $bin on
# loopback, with their port files in $tmp, and sets addr to the dispatcher's address. The
# caller's EXIT trap kills them.
$bin dispatcher --port 0 --port-file "$tmp/d" --host 127.0.0.1 --log-level warn >/dev/null &
while [ ! -s "$tmp/d" ]; do sleep 0.05; done
addr="127.0.0.1:$(cat "$tmp/d")"
$bin worker --dispatcher "$addr" --port-file "$tmp/w" --heartbeat-interval 100ms --log-level warn >/dev/null &
while [ ! -s "$tmp/w" ]; do sleep 0.05; done
sleep 0.3
