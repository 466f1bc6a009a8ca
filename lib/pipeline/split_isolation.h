// Split-isolated processing, the ground of exactly-once distributed_epoch reads (issue 19): each
// split of the source goes through the rest of the pipeline on its own, from fresh iterators, so
// that its output is a deterministic function of (pipeline, epoch, split). A batch never spans two
// splits; a shuffle shuffles within one split. Seeds are mixed with the epoch and the split's
// index, so splits and epochs get different (but reproducible) orders and augmentations. Any
// worker that processes split s of epoch e produces the same elements in the same order, and
// each carries its position (epoch, split, sequence number within the split): a reader can drop
// what it already has when a lost split is produced again elsewhere.
//
// What it changes compared to the plain split-fed pipeline (splits.h), where the ops after the
// source run over the whole stream: ops whose meaning is global (take, skip, shard, cache, a
// repeat that is not the last op, zip or concatenate after the source) would act per split, so
// they are refused; a trailing `repeat` is the number of epochs.
//
// Thread-compatible: one iterator per task, used by the task's producer thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/pipeline/builder.h"
#include "lib/pipeline/dataset.h"
#include "lib/pipeline/splits.h"
#include "proto/pipeline.pb.h"
#include "proto/service.pb.h"

namespace tfdata {

// OK when `pipeline` can be processed split by split with a deterministic output per split:
// CheckDeterministic (determinism.h) and no op with a global meaning after the source (see above).
// InvalidArgument naming the op otherwise; `what` names the requirement ("exactly-once reads").
absl::Status CheckSplitIsolation(const pipeline::Pipeline& pipeline, const std::string& what);

// The pipeline that produces split `split` of epoch `epoch` on its own: the source rewritten for
// the split, the ops after it (without a trailing repeat), and every seed (shuffle, list_files,
// random_crop, random_flip_left_right, nested pipelines included) mixed with (epoch, split index).
// Requires CheckSplitIsolation(pipeline).ok().
absl::StatusOr<pipeline::Pipeline> PipelineForSplit(const pipeline::Pipeline& pipeline, int64_t epoch,
                                                    const service::Split& split);

// Where an element lies: its split (by epoch and index) and its place in the split's output.
struct SplitPosition {
  int64_t epoch = 0;
  int64_t split = 0;
  int64_t seq = 0;
};

// What SplitIsolatedIterator::Step produced.
enum class SplitStep {
  kElement,   // an element, at the position given
  kSplitEnd,  // the split at the position given ended; its seq is the number of elements it produced
  kEnd,       // the last epoch ended
};

// A task's stream under split isolation: epoch after epoch (a trailing repeat's count; one
// without), split after split from `provider`, each split's elements in order with their position.
// A split with skip ranges (handed out again after its worker was lost) is produced whole, and the
// elements in the ranges are left out (their sequence numbers stay taken).
class SplitIsolatedIterator {
 public:
  // InvalidArgument when CheckSplitIsolation fails, or the pipeline does not build.
  static absl::StatusOr<std::unique_ptr<SplitIsolatedIterator>> Create(
      const pipeline::Pipeline& pipeline, const BuildOptions& options, std::shared_ptr<SplitProvider> provider,
      IteratorContext ctx, const PipelineSource& source = {}, int64_t first_epoch = 0);
  // The next element and its position; false at the end of the last epoch (or of an epoch that
  // produced nothing, when repeating forever). Errors name the split.
  absl::StatusOr<bool> Next(Element* out, SplitPosition* position);
  // `first_epoch` (a resumed read): the epochs before it count as done; the provider's
  // StartEpoch() numbers from it too.
  // Next(), and also the end of each split (empty ones included), so that readers can tell a
  // split they have in full: every split started yields kSplitEnd before the next one begins.
  absl::StatusOr<SplitStep> Step(Element* out, SplitPosition* position);

 private:
  SplitIsolatedIterator(pipeline::Pipeline pipeline, BuildOptions options, std::shared_ptr<SplitProvider> provider,
                        IteratorContext ctx, int64_t epochs, int64_t first_epoch)
      : pipeline_(std::move(pipeline)),
        options_(std::move(options)),
        provider_(std::move(provider)),
        ctx_(std::move(ctx)),
        epochs_(epochs),
        epochs_done_(first_epoch) {}

  const pipeline::Pipeline pipeline_;
  const BuildOptions options_;
  const std::shared_ptr<SplitProvider> provider_;
  const IteratorContext ctx_;
  // Whether the current split's skip ranges (Split.skip_begins/ends) hold `seq`.
  bool Skipped(int64_t seq) const;

  const int64_t epochs_;  // -1: forever
  int64_t epochs_done_ = 0;
  int64_t epochs_run_ = 0;  // by this iterator (a resumed one starts past epochs_done_ 0)
  bool in_epoch_ = false;
  bool epoch_produced_ = false;
  SplitPosition at_;
  DatasetPtr split_dataset_;
  std::unique_ptr<Iterator> current_;
  // The current split's elements that readers already have (a split handed out again), sorted.
  std::vector<std::pair<int64_t, int64_t>> skips_;
};

}  // namespace tfdata
