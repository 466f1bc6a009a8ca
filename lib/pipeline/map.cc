// map (sequential and parallel) and filter.
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

using Fns = std::vector<std::shared_ptr<const Function>>;

absl::StatusOr<Element> ApplyAll(const Fns& fns, Element e, const FunctionContext& ctx) {
  for (const auto& fn : fns) {
    TFD_ASSIGN_OR_RETURN(e, fn->Apply(std::move(e), ctx));
  }
  return e;
}

class MapDataset : public Dataset {
 public:
  MapDataset(DatasetPtr input, Fns fns, int parallel, bool deterministic, ElementSpec spec)
      : Dataset("map", std::move(spec)),
        input_(std::move(input)),
        fns_(std::move(fns)),
        parallel_(parallel),
        deterministic_(deterministic) {}

  int64_t Cardinality() const override { return input_->Cardinality(); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override;

 private:
  DatasetPtr input_;
  Fns fns_;
  int parallel_;
  bool deterministic_;
};

class SequentialMapIt : public Iterator {
 public:
  SequentialMapIt(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns,
                  uint64_t iteration)
      : keep_(std::move(keep)), input_(std::move(input)), fns_(fns), iteration_(iteration) {}
  absl::StatusOr<bool> Next(Element* out) override {
    Element in;
    TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&in));
    if (!more) return false;
    TFD_ASSIGN_OR_RETURN(*out, ApplyAll(*fns_, std::move(in), FunctionContext{index_++, iteration_}));
    return true;
  }

 private:
  std::shared_ptr<const Dataset> keep_;  // owns *fns_
  std::unique_ptr<Iterator> input_;
  const Fns* fns_;
  uint64_t iteration_;
  uint64_t index_ = 0;
};

// Runs the functions on `parallel` threads, at most 2 * parallel elements ahead of the consumer.
// Deterministic mode hands out results in input order; otherwise in completion order.
class ParallelMapIt : public Iterator {
 public:
  ParallelMapIt(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, int parallel,
                bool deterministic, uint64_t iteration)
      : keep_(std::move(keep)),
        input_(std::move(input)),
        fns_(fns),
        parallel_(parallel),
        deterministic_(deterministic),
        iteration_(iteration),
        capacity_(static_cast<uint64_t>(2 * parallel)) {}

  ~ParallelMapIt() override {
    {
      absl::MutexLock l(&mu_);
      cancelled_ = true;
      cv_.SignalAll();
    }
    for (auto& t : threads_) t.join();
  }

  absl::StatusOr<bool> Next(Element* out) override {
    if (threads_.empty()) {
      for (int i = 0; i < parallel_; ++i) threads_.emplace_back([this] { Work(); });
    }
    absl::MutexLock l(&mu_);
    while (true) {
      if (failed_) return false;
      if (end_seq_ >= 0 && delivered_ >= static_cast<uint64_t>(end_seq_)) return false;
      auto it = deterministic_ ? results_.find(delivered_) : results_.begin();
      if (it != results_.end()) {
        absl::StatusOr<Element> r = std::move(it->second);
        results_.erase(it);
        ++delivered_;
        cv_.SignalAll();
        if (!r.ok()) {
          failed_ = true;
          return r.status();
        }
        *out = std::move(r).value();
        return true;
      }
      cv_.Wait(&mu_);
    }
  }

 private:
  void Work() {
    while (true) {
      {
        absl::MutexLock l(&mu_);
        while (!cancelled_ && !input_done_ && claimed_ - delivered_ >= capacity_) cv_.Wait(&mu_);
        if (cancelled_ || input_done_) return;
        ++claimed_;
      }
      Element in;
      uint64_t seq;
      absl::StatusOr<bool> more;
      {
        absl::MutexLock l(&input_mu_);
        seq = next_seq_++;
        more = input_exhausted_ ? absl::StatusOr<bool>(false) : input_->Next(&in);
        if (!more.ok() || !*more) input_exhausted_ = true;
      }
      if (!more.ok() || !*more) {
        absl::MutexLock l(&mu_);
        input_done_ = true;
        if (!more.ok()) {
          results_.emplace(seq, more.status());
          seq += 1;
        }
        if (end_seq_ < 0 || static_cast<int64_t>(seq) < end_seq_) end_seq_ = static_cast<int64_t>(seq);
        cv_.SignalAll();
        return;
      }
      absl::StatusOr<Element> r = ApplyAll(*fns_, std::move(in), FunctionContext{seq, iteration_});
      absl::MutexLock l(&mu_);
      results_.emplace(seq, std::move(r));
      cv_.SignalAll();
    }
  }

  const std::shared_ptr<const Dataset> keep_;
  absl::Mutex input_mu_;
  std::unique_ptr<Iterator> input_ ABSL_GUARDED_BY(input_mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(input_mu_) = 0;
  bool input_exhausted_ ABSL_GUARDED_BY(input_mu_) = false;

  const Fns* fns_;
  const int parallel_;
  const bool deterministic_;
  const uint64_t iteration_;
  const uint64_t capacity_;

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint64_t, absl::StatusOr<Element>> results_ ABSL_GUARDED_BY(mu_);
  uint64_t claimed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t delivered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t end_seq_ ABSL_GUARDED_BY(mu_) = -1;  // number of elements, once known
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;  // touched only by the consumer thread and the destructor
};

absl::StatusOr<std::unique_ptr<Iterator>> MapDataset::MakeIterator(const IteratorContext& ctx) const {
  TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
  const uint64_t iteration = NextIterationNumber();
  if (parallel_ <= 1) return std::make_unique<SequentialMapIt>(shared_from_this(), std::move(input), &fns_, iteration);
  return std::make_unique<ParallelMapIt>(shared_from_this(), std::move(input), &fns_, parallel_, deterministic_,
                                         iteration);
}

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, Fns fns) : Dataset("filter", input->spec()), input_(std::move(input)), fns_(std::move(fns)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(shared_from_this(), std::move(input), &fns_, NextIterationNumber());
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, uint64_t iteration)
        : keep_(std::move(keep)), input_(std::move(input)), fns_(fns), iteration_(iteration) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (true) {
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(out));
        if (!more) return false;
        TFD_ASSIGN_OR_RETURN(Element verdict, ApplyAll(*fns_, *out, FunctionContext{index_++, iteration_}));
        if (verdict.size() != 1 || verdict[0].dtype() != DType::kBool || verdict[0].rank() != 0) {
          return absl::InvalidArgumentError(
              fmt::format("filter: predicate must produce one bool scalar, got {}", ElementTypeString(verdict)));
        }
        if (verdict[0].data<bool>()[0]) return true;
      }
    }

   private:
    std::shared_ptr<const Dataset> keep_;
    std::unique_ptr<Iterator> input_;
    const Fns* fns_;
    uint64_t iteration_;
    uint64_t index_ = 0;
  };
  DatasetPtr input_;
  Fns fns_;
};

absl::StatusOr<ElementSpec> ChainSpec(const ElementSpec& in, const Fns& fns) {
  ElementSpec spec = in;
  for (size_t i = 0; i < fns.size(); ++i) {
    auto next = fns[i]->OutputSpec(spec);
    if (!next.ok()) {
      return absl::Status(next.status().code(),
                          fmt::format("fn {} ({}): {}", i, fns[i]->name(), std::string(next.status().message())));
    }
    spec = *std::move(next);
  }
  return spec;
}

}  // namespace

absl::StatusOr<DatasetPtr> MakeMapDataset(DatasetPtr input, Fns fns, int num_parallel_calls, bool deterministic) {
  if (fns.empty()) return absl::InvalidArgumentError("map needs at least one `fn`");
  if (num_parallel_calls < -1) {
    return absl::InvalidArgumentError(fmt::format("num_parallel_calls must be -1, 0 or positive, got {}", num_parallel_calls));
  }
  TFD_ASSIGN_OR_RETURN(ElementSpec spec, ChainSpec(input->spec(), fns));
  const int parallel = num_parallel_calls == -1 ? NumCores() : num_parallel_calls;
  return std::make_shared<MapDataset>(std::move(input), std::move(fns), parallel, deterministic, std::move(spec));
}

absl::StatusOr<DatasetPtr> MakeFilterDataset(DatasetPtr input, Fns fns) {
  if (fns.empty()) return absl::InvalidArgumentError("filter needs at least one `fn` (a predicate such as compare)");
  TFD_ASSIGN_OR_RETURN(ElementSpec spec, ChainSpec(input->spec(), fns));
  if (!spec.unknown && !(spec.components.size() == 1 && spec.components[0].dtype == DType::kBool &&
                         !spec.components[0].unknown_rank && spec.components[0].shape.empty())) {
    return absl::InvalidArgumentError(fmt::format(
        "the predicate must end in one bool scalar (e.g. `compare`), but the functions produce {}", spec.DebugString()));
  }
  return std::make_shared<FilterDataset>(std::move(input), std::move(fns));
}

}  // namespace tfdata
