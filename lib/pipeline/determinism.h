// Whether a pipeline's output is a deterministic function of its input: the same elements in the
// same order on every run, on any worker. distributed_epoch's exactly-once mode regenerates a
// lost split on another worker and drops the elements a reader already has by their position in
// the split, which is only right when both runs produce the same sequence.
//
// Stateless and thread-safe.
#pragma once

#include "absl/status/status.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

// OK when every op and function of `pipeline` (nested pipelines included) is deterministic;
// otherwise InvalidArgument naming the first one that is not and what would make it so:
//   shuffle, list_files with shuffle, random_crop, random_flip_left_right  without a seed
//   map, interleave                with parallel calls and `deterministic: false`
//   plugin functions               a library's output cannot be known to be deterministic
// `what` names the requirement in the error ("exactly-once reads").
absl::Status CheckDeterministic(const pipeline::Pipeline& pipeline, const std::string& what);

}  // namespace tfdata
