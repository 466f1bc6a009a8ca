// interleave: one sub-pipeline per upstream element, cycled in blocks (tf.data's order).
#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"
#include "lib/pipeline/prefetch.h"

namespace tfdata {
namespace {

class InterleaveDataset : public Dataset {
 public:
  InterleaveDataset(DatasetPtr input, DatasetPtr body, int64_t cycle, int64_t block, bool parallel, bool deterministic)
      : Dataset("interleave", body->spec()),
        input_(std::move(input)),
        body_(std::move(body)),
        cycle_(cycle),
        block_(block),
        parallel_(parallel),
        deterministic_(deterministic) {}

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::static_pointer_cast<const InterleaveDataset>(shared_from_this()), std::move(input),
                                ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const InterleaveDataset> ds, std::unique_ptr<Iterator> input, IteratorContext ctx)
        : ds_(std::move(ds)),
          input_(std::move(input)),
          ctx_(std::move(ctx)),
          slots_(static_cast<size_t>(ds_->cycle_)) {}

    absl::StatusOr<bool> Next(Element* out) override {
      while (!input_done_ || open_ > 0) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(ctx_.cancellation.get()));
        auto& slot = slots_[index_];
        if (slot) {
          TFD_ASSIGN_OR_RETURN(bool got, NextFromSlot(out));
          if (got) return true;
        } else if (!input_done_) {
          TFD_RETURN_IF_ERROR(OpenSlot());
        } else {
          Advance();
        }
      }
      return false;
    }

   private:
    // Takes from the current slot; handles block counting and exhausted slots.
    absl::StatusOr<bool> NextFromSlot(Element* out) {
      if (ds_->parallel_ && !ds_->deterministic_) {
        // Look for a slot with data ready before blocking on the current one.
        for (size_t tries = 0; tries < slots_.size(); ++tries) {
          auto* p = static_cast<PrefetchIterator*>(slots_[index_].get());
          if (p) {
            bool ready = false;
            TFD_ASSIGN_OR_RETURN(bool got, p->TryNext(out, &ready));
            if (ready) return Took(got);
          }
          Advance();
        }
        while (!slots_[index_]) Advance();
      }
      TFD_ASSIGN_OR_RETURN(bool got, slots_[index_]->Next(out));
      return Took(got);
    }

    bool Took(bool got) {
      if (got) {
        if (++block_index_ >= ds_->block_) Advance();
        return true;
      }
      slots_[index_].reset();
      --open_;
      Advance();
      return false;
    }

    absl::Status OpenSlot() {
      auto element = std::make_shared<Element>();
      TFD_ASSIGN_OR_RETURN(bool more, input_->Next(element.get()));
      if (!more) {
        input_done_ = true;
        return absl::OkStatus();
      }
      IteratorContext sub = ctx_;
      sub.input_element = std::move(element);
      TFD_ASSIGN_OR_RETURN(auto it, ds_->body_->MakeIterator(sub));
      if (ds_->parallel_) it = std::make_unique<PrefetchIterator>(std::move(it), static_cast<size_t>(2 * ds_->block_));
      slots_[index_] = std::move(it);
      ++open_;
      return absl::OkStatus();
    }

    void Advance() {
      block_index_ = 0;
      index_ = (index_ + 1) % slots_.size();
    }

    std::shared_ptr<const InterleaveDataset> ds_;
    std::unique_ptr<Iterator> input_;
    IteratorContext ctx_;
    std::vector<std::unique_ptr<Iterator>> slots_;
    size_t index_ = 0;
    int64_t block_index_ = 0;
    int64_t open_ = 0;
    bool input_done_ = false;
  };

  DatasetPtr input_, body_;
  int64_t cycle_, block_;
  bool parallel_, deterministic_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeInterleaveDataset(DatasetPtr input, DatasetPtr body, int64_t cycle_length,
                                                 int64_t block_length, int num_parallel_calls, bool deterministic) {
  if (cycle_length == 0) cycle_length = 1;
  if (cycle_length == -1) cycle_length = NumCores();
  if (cycle_length < 0)
    return absl::InvalidArgumentError(fmt::format("cycle_length must be -1, 0 or positive, got {}", cycle_length));
  if (block_length == 0) block_length = 1;
  if (block_length < 0)
    return absl::InvalidArgumentError(fmt::format("block_length must be positive, got {}", block_length));
  if (num_parallel_calls < -1) {
    return absl::InvalidArgumentError(
        fmt::format("num_parallel_calls must be -1, 0 or positive, got {}", num_parallel_calls));
  }
  const bool parallel = num_parallel_calls == -1 || num_parallel_calls > 1;
  // Each open input costs a slot, and in parallel a thread.
  if (parallel && cycle_length > kMaxOpThreads) {
    return absl::InvalidArgumentError(
        fmt::format("cycle_length {} with parallel calls is more than the {} threads one op may start", cycle_length,
                    kMaxOpThreads));
  }
  if (cycle_length > kMaxCycleLength) {
    return absl::InvalidArgumentError(fmt::format(
        "cycle_length {} is more than the {} inputs one interleave may keep open", cycle_length, kMaxCycleLength));
  }
  return std::make_shared<InterleaveDataset>(std::move(input), std::move(body), cycle_length, block_length, parallel,
                                             deterministic);
}

}  // namespace tfdata
