#!/usr/bin/env bash
# The cross-trainer cache: two trainers (e.g. a hyper-parameter sweep) share one job. The worker
# runs the pipeline once and keeps a sliding window of recent elements (--cross-trainer-cache-size
# bytes); each trainer reads the whole stream from its own cursor. A trainer that falls out of the
# window skips ahead, and `tfdata read` reports how many elements it skipped.
source "$(dirname "$0")/cluster.sh"
start_dispatcher
start_worker w1 --cross-trainer-cache-size 64MiB
ds=$("$TFDATA" register examples/service/bucketed_text.pbtxt --dispatcher "$DISPATCHER")
for trainer in a b; do
  echo "trainer $trainer:"
  "$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --job-name sweep \
    --cross-trainer-cache --trainer-id $trainer --take 3 --log-level error
done
