#!/usr/bin/env bash
# Coordinated reads: two consumers (say, two trainers in a synchronous step) read one job in
# rounds. In round r, consumer i gets element i of the round, and both get their round-r element
# from the same worker, so a step's batches come from one worker's stream (with a pipeline that
# buckets by length, batches of similar length: no trainer waits for another's long batch).
# The pipeline must never end (repeat): consumers read as many rounds as they like.
source "$(dirname "$0")/cluster.sh"
start_dispatcher
start_worker w1
start_worker w2
ds=$("$TFDATA" register examples/service/bucketed_text.pbtxt --dispatcher "$DISPATCHER")
for i in 0 1; do
  echo "consumer $i, rounds 0-3 (rounds alternate between the two workers):"
  "$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --job-name steps \
    --num-consumers 2 --consumer-index $i --take 4 --log-level error
done
