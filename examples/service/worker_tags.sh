#!/usr/bin/env bash
# Worker selection: workers carry tags (--tag); a reader can read only the workers with a tag
# (--worker-tag), or only workers in its process or on its host (--target-workers local).
source "$(dirname "$0")/cluster.sh"
start_dispatcher
start_worker fast --tag ssd
start_worker slow --tag hdd
ds=$("$TFDATA" register examples/range.pbtxt --dispatcher "$DISPATCHER")
echo "all workers (each runs the whole pipeline):"
"$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --format null
echo "only --worker-tag ssd:"
"$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --worker-tag ssd --format null
echo "only workers on this host (--target-workers local):"
"$TFDATA" read --dispatcher "$DISPATCHER" --dataset-id "$ds" --target-workers local --format null
