#!/usr/bin/env bash
# Compression is chosen per dataset at registration; readers need no flag. `snappy` compresses
# (responses it cannot shrink by an eighth travel plain); `auto` lets each task measure its elements (snappy's ratio and speed on them) against
# the link to the reader (--link-gbps on the worker) and compress only when that is faster. A
# reader on the worker's own host is never sent compressed elements by `auto`.
source "$(dirname "$0")/cluster.sh"
start_dispatcher
start_worker w1 --link-gbps 1
for c in none snappy auto; do
  ds=$("$TFDATA" register examples/service/bucketed_text.pbtxt --dispatcher "$DISPATCHER" --compression $c)
  echo "compression $c: dataset $ds"
  "$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --take 2 --log-level error
done
