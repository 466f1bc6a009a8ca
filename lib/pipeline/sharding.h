// Static sharding: the pipeline a worker runs when it is worker `index` of `n` in the
// dispatcher's fixed worker list (modes SHARD_FILE, SHARD_DATA, SHARD_FILE_OR_DATA, SHARD_HINT).
//
//   file          the source's files i, i+n, ... (a tfrecord/text_line file list is cut; after
//                 list_files a shard(n, i) is inserted); fewer files than workers is an error
//   data          shard(n, i) appended: the worker keeps output elements i, i+n, ...
//   file_or_data  file when the first op is a file source, data otherwise
//   hint          every `shard` op marked `hint: true` (nested pipelines included) gets (n, i)
//
// Stateless and thread-safe.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "lib/pipeline/builder.h"
#include "proto/pipeline.pb.h"
#include "proto/service.pb.h"

namespace tfdata {

bool IsStaticSharding(service::ProcessingMode mode);

// Checks at job creation that `pipeline` can be sharded over `n` workers under `mode`
// (InvalidArgument naming the problem: no file source, fewer files than workers, an unseeded
// shuffling list_files). `options` builds the source to count list_files matches.
absl::Status CheckStaticSharding(const pipeline::Pipeline& pipeline, service::ProcessingMode mode, int64_t n,
                                 const BuildOptions& options);

// The pipeline worker `index` of `n` runs.
absl::StatusOr<pipeline::Pipeline> ApplyStaticSharding(const pipeline::Pipeline& pipeline, service::ProcessingMode mode,
                                                       int64_t n, int64_t index);

}  // namespace tfdata
