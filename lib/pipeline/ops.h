// Constructors of every op's Dataset. Each validates its arguments and the input's spec and
// returns an error saying what was expected; BuildDataset (builder.h) prefixes the op's place.
// Ops that keep elements (batch, padded_batch, shuffle, cache, prefetch) take them from `memory`'s
// budget (the process default when none is given), and their run-time errors name memory.where.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/memory_budget.h"
#include "lib/functions/function.h"
#include "lib/io/compression.h"
#include "lib/io/path_policy.h"
#include "lib/pipeline/dataset.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

// Sources.
absl::StatusOr<DatasetPtr> MakeRangeDataset(int64_t start, int64_t stop, int64_t step);
absl::StatusOr<DatasetPtr> MakeFromTensorSlicesDataset(std::vector<Tensor> tensors);
// Ops that open files (list_files, tfrecord, text_line, a cache file) check each path against
// `paths` (null: every path allowed).
absl::StatusOr<DatasetPtr> MakeListFilesDataset(const std::vector<std::string>& patterns, bool shuffle, bool has_seed,
                                                uint64_t seed, std::shared_ptr<const PathPolicy> paths = nullptr);
// The element an interleave body starts from (see IteratorContext::input_element).
DatasetPtr MakeInputElementDataset(ElementSpec spec);

enum class FileFormat { kTFRecord, kTextLine };
// With `input` null, reads `files`; otherwise reads the files named by the input's string scalars.
absl::StatusOr<DatasetPtr> MakeFileRecordsDataset(FileFormat format, DatasetPtr input, std::vector<std::string> files,
                                                  Compression compression,
                                                  std::shared_ptr<const PathPolicy> paths = nullptr);
absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs);
absl::StatusOr<DatasetPtr> MakeConcatenateDataset(std::vector<DatasetPtr> inputs);

// Transformations.
absl::StatusOr<DatasetPtr> MakeMapDataset(DatasetPtr input, std::vector<std::shared_ptr<const Function>> fns,
                                          int num_parallel_calls, bool deterministic);
absl::StatusOr<DatasetPtr> MakeFilterDataset(DatasetPtr input, std::vector<std::shared_ptr<const Function>> fns);
// The last function's ApplyMany gives each input's elements (a python function made for flat_map).
// Inputs are handed to a batching function in chunks (map.cc).
absl::StatusOr<DatasetPtr> MakeFlatMapDataset(DatasetPtr input, std::vector<std::shared_ptr<const Function>> fns);
absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
                                            MemoryScope memory = {});
absl::StatusOr<DatasetPtr> MakePaddedBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
                                                  std::vector<Shape> padded_shapes, double padding_value,
                                                  MemoryScope memory = {});
absl::StatusOr<DatasetPtr> MakeUnbatchDataset(DatasetPtr input);
absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, int64_t buffer_size, bool has_seed, uint64_t seed,
                                              bool reshuffle_each_iteration, MemoryScope memory = {});
absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, int64_t count);
absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, int64_t count);
absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, int64_t count);
absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, std::string filename, MemoryScope memory = {},
                                            std::shared_ptr<const PathPolicy> paths = nullptr);
absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, int64_t buffer_size, MemoryScope memory = {});
absl::StatusOr<DatasetPtr> MakeInterleaveDataset(DatasetPtr input, DatasetPtr body, int64_t cycle_length,
                                                 int64_t block_length, int num_parallel_calls, bool deterministic);
absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, int64_t num_shards, int64_t index);

// Inline tensors (TensorValue) to tensors, with errors naming what is inconsistent.
absl::StatusOr<Tensor> TensorFromProto(const pipeline::TensorValue& value);

}  // namespace tfdata
