#include "lib/pipeline/split_isolation.h"

#include <algorithm>
#include <iterator>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/determinism.h"

namespace tfdata {
namespace {

using pipeline::Function;
using pipeline::Op;
using pipeline::Pipeline;

// A fixed, platform-independent mix (SplitMix64's finalizer): every worker must derive the same
// seed for a split, whatever its build.
uint64_t MixSeed(uint64_t seed, int64_t epoch, int64_t split) {
  uint64_t z = seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(epoch) + 1)) ^
               (0xd1b54a32d192ed03ULL * (static_cast<uint64_t>(split) + 1));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void MixFunctions(google::protobuf::RepeatedPtrField<Function>* fns, int64_t epoch, int64_t split) {
  for (Function& fn : *fns) {
    if (fn.has_random_crop() && fn.random_crop().has_seed()) {
      fn.mutable_random_crop()->set_seed(MixSeed(fn.random_crop().seed(), epoch, split));
    }
    if (fn.has_random_flip_left_right() && fn.random_flip_left_right().has_seed()) {
      fn.mutable_random_flip_left_right()->set_seed(MixSeed(fn.random_flip_left_right().seed(), epoch, split));
    }
  }
}

void MixSeeds(Pipeline* p, int64_t epoch, int64_t split) {
  for (Op& op : *p->mutable_op()) {
    switch (op.kind_case()) {
      case Op::kShuffle:
        if (op.shuffle().has_seed()) op.mutable_shuffle()->set_seed(MixSeed(op.shuffle().seed(), epoch, split));
        break;
      case Op::kListFiles:
        if (op.list_files().has_seed()) {
          op.mutable_list_files()->set_seed(MixSeed(op.list_files().seed(), epoch, split));
        }
        break;
      case Op::kMap: MixFunctions(op.mutable_map()->mutable_fn(), epoch, split); break;
      case Op::kFilter: MixFunctions(op.mutable_filter()->mutable_fn(), epoch, split); break;
      case Op::kInterleave: MixSeeds(op.mutable_interleave()->mutable_pipeline(), epoch, split); break;
      case Op::kZip:
        for (Pipeline& in : *op.mutable_zip()->mutable_input()) MixSeeds(&in, epoch, split);
        break;
      case Op::kConcatenate:
        for (Pipeline& in : *op.mutable_concatenate()->mutable_input()) MixSeeds(&in, epoch, split);
        break;
      default: break;
    }
  }
}

bool TrailingRepeat(const Pipeline& p) { return p.op_size() > 1 && p.op(p.op_size() - 1).has_repeat(); }

}  // namespace

absl::Status CheckSplitIsolation(const Pipeline& pipeline, const std::string& what) {
  TFD_RETURN_IF_ERROR(CheckDeterministic(pipeline, what));
  for (int i = 1; i < pipeline.op_size(); ++i) {
    const Op& op = pipeline.op(i);
    const bool last = i == pipeline.op_size() - 1;
    if (op.has_take() || op.has_skip() || op.has_shard() || op.has_cache() || op.has_zip() || op.has_concatenate() ||
        (op.has_repeat() && !last)) {
      return absl::InvalidArgumentError(fmt::format(
          "op {} ({}): {} process each split of the source on its own, and this op would then act on each split, "
          "not on the whole stream (a `repeat` is allowed as the last op: the number of epochs)",
          i, OpKindName(op), what));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Pipeline> PipelineForSplit(const Pipeline& pipeline, int64_t epoch, const service::Split& split) {
  if (pipeline.op_size() == 0) return absl::InvalidArgumentError("the pipeline has no ops");
  TFD_ASSIGN_OR_RETURN(Pipeline out, SourcePipelineForSplit(pipeline.op(0), split));
  const int end = pipeline.op_size() - (TrailingRepeat(pipeline) ? 1 : 0);
  for (int i = 1; i < end; ++i) *out.add_op() = pipeline.op(i);
  MixSeeds(&out, epoch, split.index());
  return out;
}

absl::StatusOr<std::unique_ptr<SplitIsolatedIterator>> SplitIsolatedIterator::Create(
    const Pipeline& pipeline, const BuildOptions& options, std::shared_ptr<SplitProvider> provider, IteratorContext ctx,
    const PipelineSource& source, int64_t first_epoch) {
  // The whole pipeline first: validation, with errors that point into it.
  TFD_RETURN_IF_ERROR(BuildDataset(pipeline, options, source).status());
  TFD_RETURN_IF_ERROR(CheckSplitIsolation(pipeline, "exactly-once reads"));
  int64_t epochs = 1;
  if (TrailingRepeat(pipeline)) {
    const pipeline::Repeat& r = pipeline.op(pipeline.op_size() - 1).repeat();
    epochs = r.has_count() && r.count() >= 0 ? r.count() : -1;
  }
  return std::unique_ptr<SplitIsolatedIterator>(
      new SplitIsolatedIterator(pipeline, options, std::move(provider), std::move(ctx), epochs, first_epoch));
}

absl::StatusOr<bool> SplitIsolatedIterator::Next(Element* out, SplitPosition* position) {
  while (true) {
    TFD_ASSIGN_OR_RETURN(const SplitStep step, Step(out, position));
    if (step != SplitStep::kSplitEnd) return step == SplitStep::kElement;
  }
}

absl::StatusOr<SplitStep> SplitIsolatedIterator::Step(Element* out, SplitPosition* position) {
  while (true) {
    TFD_RETURN_IF_ERROR(CheckNotCancelled(ctx_.cancellation.get()));
    if (current_) {
      auto more = current_->Next(out);
      if (!more.ok()) {
        return absl::Status(more.status().code(), fmt::format("split {} of epoch {}: {}", at_.split, at_.epoch,
                                                              std::string(more.status().message())));
      }
      *position = at_;
      if (*more) {
        ++at_.seq;
        epoch_produced_ = true;
        if (Skipped(position->seq)) continue;
        return SplitStep::kElement;
      }
      current_.reset();
      split_dataset_.reset();
      return SplitStep::kSplitEnd;
    }
    if (!in_epoch_) {
      if (epochs_ >= 0 && epochs_done_ >= epochs_) return SplitStep::kEnd;
      // An epoch that produced nothing would make `repeat` forever spin: end instead (as tf.data).
      // A finite count does not spin: its epochs all run (a resumed job can have an epoch with
      // nothing left in it before one that has).
      if (epochs_ < 0 && epochs_run_ > 0 && !epoch_produced_) return SplitStep::kEnd;
      at_.epoch = provider_->StartEpoch();
      in_epoch_ = true;
      epoch_produced_ = false;
    }
    TFD_ASSIGN_OR_RETURN(std::optional<service::Split> split, provider_->Next(at_.epoch));
    if (!split) {
      in_epoch_ = false;
      ++epochs_done_;
      ++epochs_run_;
      continue;
    }
    TFD_ASSIGN_OR_RETURN(Pipeline p, PipelineForSplit(pipeline_, at_.epoch, *split));
    auto built = BuildDataset(p, options_);
    if (!built.ok()) {
      return absl::Status(built.status().code(), fmt::format("split {} of epoch {}: {}", split->index(), at_.epoch,
                                                             std::string(built.status().message())));
    }
    split_dataset_ = *std::move(built);
    TFD_ASSIGN_OR_RETURN(current_, split_dataset_->MakeIterator(ctx_));
    at_.split = split->index();
    at_.seq = 0;
    skips_.clear();
    for (int i = 0; i < std::min(split->skip_begins_size(), split->skip_ends_size()); ++i) {
      skips_.emplace_back(split->skip_begins(i), split->skip_ends(i));
    }
    std::sort(skips_.begin(), skips_.end());
  }
}

bool SplitIsolatedIterator::Skipped(int64_t seq) const {
  // The ranges are few (a split read in order is one): the first that ends after seq decides.
  auto it = std::upper_bound(skips_.begin(), skips_.end(), seq,
                             [](int64_t s, const std::pair<int64_t, int64_t>& r) { return s < r.first; });
  return it != skips_.begin() && seq < std::prev(it)->second;
}

}  // namespace tfdata
