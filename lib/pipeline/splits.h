// Splits: the pieces of a pipeline's source that distributed_epoch hands out (dynamic sharding).
//
// The dispatcher makes a SplitPlan from the pipeline's first op (the source) and hands out its
// splits by index, each once per epoch. A worker builds its pipeline with a SplitProvider: the
// source then becomes a split-fed source that, pass after pass (epoch after epoch, when a repeat
// restarts it), asks the provider for splits and produces each split's elements with the source
// rewritten for that split (SourcePipelineForSplit), while the rest of the pipeline runs unchanged
// over the stream.
//
// Splittable sources, and what a split is:
//   range, from_tensor_slices      elements [begin, end) (about kTargetSplits splits per epoch,
//                                  at most kMaxSplitElements elements each)
//   tfrecord / text_line (files)   one file
//   list_files                     one file name (the dispatcher expands the patterns, so workers
//                                  need not see the same directory listing)
//   zip                            elements [begin, end) of every input; each input must be a bare
//                                  range or from_tensor_slices
//   concatenate                    a split of one input (each input's first op must be splittable)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/pipeline/builder.h"
#include "proto/pipeline.pb.h"
#include "proto/service.pb.h"

namespace tfdata {

inline constexpr int64_t kTargetSplits = 64;
inline constexpr int64_t kMaxSplitElements = 65536;

// Immutable once made; thread-compatible.
class SplitPlan {
 public:
  // InvalidArgument naming the op (e.g. "op 0 (zip) > input 1: ...") when the source cannot be
  // split. `options` builds the source to learn its size (and expand list_files patterns).
  static absl::StatusOr<SplitPlan> Create(const pipeline::Pipeline& pipeline, const BuildOptions& options);

  int64_t num_splits() const;
  // The split at `index` (0 <= index < num_splits()), its `index` field set.
  service::Split Get(int64_t index) const;

  // The plan as a record (for the journal), and back. FromRecord checks the record (DataLoss
  // naming what is wrong): a journal is read back after a crash.
  service::SplitPlanRecord ToRecord() const;
  static absl::StatusOr<SplitPlan> FromRecord(const service::SplitPlanRecord& record);

 private:
  enum class Kind { kElements, kFiles, kConcatenate };
  static absl::StatusOr<SplitPlan> ForOp(const pipeline::Op& op, const BuildOptions& options, const std::string& where);

  Kind kind_ = Kind::kElements;
  int64_t elements_ = 0;            // kElements: source size
  int64_t split_size_ = 1;          // kElements: elements per split
  std::vector<std::string> files_;  // kFiles
  std::vector<SplitPlan> inputs_;   // kConcatenate
};

// The ops that replace `source` (a pipeline's first op) to produce exactly `split`'s elements.
absl::StatusOr<pipeline::Pipeline> SourcePipelineForSplit(const pipeline::Op& source, const service::Split& split);

// Where a split-fed source gets its splits: one per task on a worker. Thread-safe.
class SplitProvider {
 public:
  virtual ~SplitProvider() = default;
  // Called once per pass over the source: the epoch number of the new pass (0, 1, ...).
  virtual int64_t StartEpoch() = 0;
  // The next split of `epoch`, or nullopt once the epoch has none left.
  virtual absl::StatusOr<std::optional<service::Split>> Next(int64_t epoch) = 0;
};

// The source of a distributed_epoch pipeline: produces, split after split, the elements of
// `make(split)` (the source rewritten for the split). `spec` is the source's element spec.
DatasetPtr MakeSplitSourceDataset(ElementSpec spec, std::shared_ptr<SplitProvider> provider,
                                  std::function<absl::StatusOr<DatasetPtr>(const service::Split&)> make);

// Builds `pipeline` for a distributed_epoch task: its source fed by `provider`.
absl::StatusOr<DatasetPtr> BuildSplitFedDataset(const pipeline::Pipeline& pipeline, const BuildOptions& options,
                                                std::shared_ptr<SplitProvider> provider,
                                                const PipelineSource& source = {});

}  // namespace tfdata
