// Ops that reorder or select elements without looking at them: shuffle, repeat, take, skip, shard.
#include <random>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

class ShuffleDataset : public Dataset {
 public:
  ShuffleDataset(DatasetPtr input, int64_t buffer, uint64_t seed, bool reshuffle, MemoryScope memory)
      : Dataset("shuffle", input->spec()),
        input_(std::move(input)),
        buffer_(buffer),
        seed_(seed),
        reshuffle_(reshuffle),
        memory_(std::move(memory)) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    const uint64_t pass = NextIterationNumber();
    // Each pass (epoch) gets its own, reproducible, order unless reshuffling is off.
    // The first pass uses the seed itself, so reshuffle on/off agree on the first epoch.
    const uint64_t seed = reshuffle_ ? seed_ ^ (0x9e3779b97f4a7c15ULL * pass) : seed_;
    return std::make_unique<It>(std::move(input), buffer_, seed, memory_, ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> input, int64_t buffer, uint64_t seed, MemoryScope memory, CancellationPtr cancel)
        : input_(std::move(input)),
          capacity_(buffer),
          rng_(seed),
          hold_(std::move(memory)),
          cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (!input_done_ && static_cast<int64_t>(buffer_.size()) < capacity_) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        Element e;
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&e));
        if (!more) {
          input_done_ = true;
          break;
        }
        // The buffer is what a shuffle keeps: each element is taken from the budget as it enters.
        TFD_RETURN_IF_ERROR(hold_.GrowLazy(Bytes(e), [&] {
          return fmt::format("the shuffle buffer (buffer_size {}), holding {} elements ({}), cannot take the next: it",
                             capacity_, buffer_.size(), FormatBytes(hold_.held()));
        }));
        buffer_.push_back(std::move(e));
      }
      if (buffer_.empty()) return false;
      // Multiply-shift instead of std::uniform_int_distribution, whose output differs between
      // standard libraries: a seeded order must be the same on every machine.
      const size_t i = static_cast<size_t>((static_cast<unsigned __int128>(rng_()) * buffer_.size()) >> 64);
      std::swap(buffer_[i], buffer_.back());
      *out = std::move(buffer_.back());
      buffer_.pop_back();
      hold_.Shrink(Bytes(*out));
      return true;
    }

   private:
    static int64_t Bytes(const Element& e) { return ElementMemoryBytes(e) + static_cast<int64_t>(sizeof(Element)); }

    std::unique_ptr<Iterator> input_;
    int64_t capacity_;
    std::mt19937_64 rng_;
    MemoryHold hold_;
    CancellationPtr cancel_;
    std::vector<Element> buffer_;
    bool input_done_ = false;
  };
  DatasetPtr input_;
  int64_t buffer_;
  uint64_t seed_;
  bool reshuffle_;
  MemoryScope memory_;
};

class RepeatDataset : public Dataset {
 public:
  RepeatDataset(DatasetPtr input, int64_t count)
      : Dataset("repeat", input->spec()), input_(std::move(input)), count_(count) {}
  int64_t Cardinality() const override {
    const int64_t n = input_->Cardinality();
    if (n == 0) return 0;
    if (count_ < 0) return n == kUnknown ? kUnknown : kInfinite;
    return n < 0 ? n : n * count_;
  }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    return std::make_unique<It>(std::static_pointer_cast<const RepeatDataset>(shared_from_this()), ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const RepeatDataset> ds, IteratorContext ctx) : ds_(std::move(ds)), ctx_(std::move(ctx)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (ds_->count_ < 0 || done_ < ds_->count_) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(ctx_.cancellation.get()));
        if (!current_) {
          TFD_ASSIGN_OR_RETURN(current_, ds_->input_->MakeIterator(ctx_));
          produced_this_pass_ = false;
        }
        TFD_ASSIGN_OR_RETURN(bool more, current_->Next(out));
        if (more) {
          produced_this_pass_ = true;
          return true;
        }
        current_.reset();
        ++done_;
        // A pass that produced nothing would make `repeat forever` spin: end instead (as tf.data).
        if (!produced_this_pass_) return false;
      }
      return false;
    }

   private:
    std::shared_ptr<const RepeatDataset> ds_;
    IteratorContext ctx_;
    std::unique_ptr<Iterator> current_;
    int64_t done_ = 0;
    bool produced_this_pass_ = false;
  };
  DatasetPtr input_;
  int64_t count_;
};

// take, skip and shard: keep element i when Keep(i) holds; stop when Done(i).
class SelectDataset : public Dataset {
 public:
  enum class Kind { kTake, kSkip, kShard };
  SelectDataset(Kind kind, DatasetPtr input, int64_t a, int64_t b)
      : Dataset(kind == Kind::kTake   ? "take"
                : kind == Kind::kSkip ? "skip"
                                      : "shard",
                input->spec()),
        kind_(kind),
        input_(std::move(input)),
        a_(a),
        b_(b) {}

  int64_t Cardinality() const override {
    const int64_t n = input_->Cardinality();
    switch (kind_) {
      case Kind::kTake:
        if (a_ < 0) return n;
        return n == kInfinite ? a_ : (n < 0 ? kUnknown : std::min(n, a_));
      case Kind::kSkip:
        if (n < 0) return n;
        return a_ < 0 ? 0 : std::max<int64_t>(0, n - a_);
      case Kind::kShard:
        if (n < 0) return n;
        return n / a_ + (b_ < n % a_ ? 1 : 0);
    }
    return kUnknown;
  }

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(kind_, std::move(input), a_, b_, ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(Kind kind, std::unique_ptr<Iterator> input, int64_t a, int64_t b, CancellationPtr cancel)
        : kind_(kind), input_(std::move(input)), a_(a), b_(b), cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (true) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        if (kind_ == Kind::kTake && a_ >= 0 && index_ >= a_) {
          input_.reset();  // release upstream resources (files, threads) early
          return false;
        }
        if (!input_) return false;
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(out));
        if (!more) return false;
        const int64_t i = index_++;
        switch (kind_) {
          case Kind::kTake: return true;
          case Kind::kSkip:
            if (a_ >= 0 && i >= a_) return true;
            break;
          case Kind::kShard:
            if (i % a_ == b_) return true;
            break;
        }
      }
    }

   private:
    Kind kind_;
    std::unique_ptr<Iterator> input_;
    int64_t a_, b_;
    CancellationPtr cancel_;
    int64_t index_ = 0;
  };
  Kind kind_;
  DatasetPtr input_;
  int64_t a_, b_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeShuffleDataset(DatasetPtr input, int64_t buffer_size, bool has_seed, uint64_t seed,
                                              bool reshuffle_each_iteration, MemoryScope memory) {
  if (memory.where.empty()) memory.where = "shuffle";
  if (buffer_size <= 0)
    return absl::InvalidArgumentError(fmt::format("buffer_size must be positive, got {}", buffer_size));
  if (!has_seed) seed = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  return std::make_shared<ShuffleDataset>(std::move(input), buffer_size, seed, reshuffle_each_iteration,
                                          std::move(memory));
}

absl::StatusOr<DatasetPtr> MakeRepeatDataset(DatasetPtr input, int64_t count) {
  if (count < -1) return absl::InvalidArgumentError(fmt::format("count must be -1 (forever) or >= 0, got {}", count));
  return std::make_shared<RepeatDataset>(std::move(input), count);
}

absl::StatusOr<DatasetPtr> MakeTakeDataset(DatasetPtr input, int64_t count) {
  if (count < -1) return absl::InvalidArgumentError(fmt::format("count must be -1 (all) or >= 0, got {}", count));
  return std::make_shared<SelectDataset>(SelectDataset::Kind::kTake, std::move(input), count, 0);
}

absl::StatusOr<DatasetPtr> MakeSkipDataset(DatasetPtr input, int64_t count) {
  if (count < -1) return absl::InvalidArgumentError(fmt::format("count must be -1 (all) or >= 0, got {}", count));
  return std::make_shared<SelectDataset>(SelectDataset::Kind::kSkip, std::move(input), count, 0);
}

absl::StatusOr<DatasetPtr> MakeShardDataset(DatasetPtr input, int64_t num_shards, int64_t index) {
  if (num_shards <= 0)
    return absl::InvalidArgumentError(fmt::format("num_shards must be positive, got {}", num_shards));
  if (index < 0 || index >= num_shards) {
    return absl::InvalidArgumentError(fmt::format("index must be in [0, {}), got {}", num_shards, index));
  }
  return std::make_shared<SelectDataset>(SelectDataset::Kind::kShard, std::move(input), num_shards, index);
}

}  // namespace tfdata
