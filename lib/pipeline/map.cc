// map (sequential and parallel) and filter.
#include <algorithm>
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

// Applies the functions to a chunk of consecutive inputs (the first at `first`): a function that
// batches (a Python function: one round trip to its helper) gets the chunk's survivors at once.
std::vector<absl::StatusOr<Element>> ApplyChunk(const Fns& fns, std::vector<Element>& inputs,
                                                const FunctionContext& first) {
  std::vector<absl::StatusOr<Element>> out;
  out.reserve(inputs.size());
  for (Element& e : inputs) out.push_back(std::move(e));
  for (const auto& fn : fns) {
    if (!fn->batches()) {
      for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].ok())
          out[i] = fn->Apply(*std::move(out[i]), FunctionContext{first.element_index + i, first.iteration});
      }
      continue;
    }
    // Runs of inputs without an error so far, each one call.
    for (size_t i = 0; i < out.size();) {
      if (!out[i].ok()) {
        ++i;
        continue;
      }
      size_t end = i;
      std::vector<Element> run;
      while (end < out.size() && out[end].ok()) run.push_back(*std::move(out[end++]));
      auto results = fn->ApplyBatch(std::move(run), FunctionContext{first.element_index + i, first.iteration});
      for (size_t j = 0; j < results.size() && i + j < end; ++j) out[i + j] = std::move(results[j]);
      i = end;
    }
  }
  return out;
}

bool AnyBatches(const Fns& fns) {
  for (const auto& fn : fns) {
    if (fn->batches()) return true;
  }
  return false;
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

// Runs the functions on `parallel` threads, at most max(4 * parallel, 16) elements ahead of the
// consumer (64 per thread when a function batches: its round trips are amortised over chunks).
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
        capacity_(static_cast<uint64_t>(AnyBatches(*fns) ? 64 * parallel : std::max(4 * parallel, 16))) {}

  ~ParallelMapIt() override {
    {
      absl::MutexLock l(&mu_);
      cancelled_ = true;
      worker_cv_.SignalAll();
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
        // Wake waiting workers once half the window is free, so they claim chunks rather than
        // single elements.
        if (workers_waiting_ > 0 && claimed_ - delivered_ <= capacity_ / 2) worker_cv_.SignalAll();
        if (!r.ok()) {
          failed_ = true;
          return r.status();
        }
        *out = std::move(r).value();
        return true;
      }
      consumer_waiting_ = true;
      consumer_cv_.Wait(&mu_);
      consumer_waiting_ = false;
    }
  }

 private:
  // Each worker claims a chunk of the free window, pulls that many inputs under one lock, applies
  // the functions and publishes the chunk under one lock. Per-element hand-offs between threads
  // (a wake-up each) would cost more than cheap functions themselves.
  void Work() {
    std::vector<Element> inputs;
    std::vector<absl::StatusOr<Element>> outputs;
    while (true) {
      uint64_t want;
      {
        absl::MutexLock l(&mu_);
        while (!cancelled_ && !input_done_ && claimed_ - delivered_ >= capacity_) {
          ++workers_waiting_;
          worker_cv_.Wait(&mu_);
          --workers_waiting_;
        }
        if (cancelled_ || input_done_) return;
        const uint64_t free = capacity_ - (claimed_ - delivered_);
        want = std::max<uint64_t>(1, free / static_cast<uint64_t>(parallel_));
        claimed_ += want;
      }
      inputs.clear();
      uint64_t first_seq;
      absl::Status error;
      bool ended = false;
      {
        absl::MutexLock l(&input_mu_);
        first_seq = next_seq_;
        while (inputs.size() < want && !input_exhausted_) {
          Element in;
          absl::StatusOr<bool> more = input_->Next(&in);
          if (!more.ok() || !*more) {
            input_exhausted_ = true;
            error = more.status();
            break;
          }
          inputs.push_back(std::move(in));
        }
        ended = input_exhausted_;
        // An error occupies a sequence number of its own, after the elements before it.
        next_seq_ = first_seq + inputs.size() + (error.ok() ? 0 : 1);
      }
      outputs = ApplyChunk(*fns_, inputs, FunctionContext{first_seq, iteration_});
      absl::MutexLock l(&mu_);
      for (size_t i = 0; i < outputs.size(); ++i) results_.emplace(first_seq + i, std::move(outputs[i]));
      if (ended) {
        uint64_t end = first_seq + outputs.size();
        if (!error.ok()) results_.emplace(end++, error);
        input_done_ = true;
        if (end_seq_ < 0 || static_cast<int64_t>(end) < end_seq_) end_seq_ = static_cast<int64_t>(end);
        worker_cv_.SignalAll();
      }
      if (consumer_waiting_ && (ended || !deterministic_ || results_.count(delivered_) > 0)) consumer_cv_.Signal();
      if (ended) return;
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
  absl::CondVar consumer_cv_;  // the consumer waits for a result
  absl::CondVar worker_cv_;    // workers wait for a free slot
  bool consumer_waiting_ ABSL_GUARDED_BY(mu_) = false;
  int workers_waiting_ ABSL_GUARDED_BY(mu_) = 0;
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
  // A function that batches is given chunks even without parallel calls (one thread reads ahead).
  if (parallel_ <= 1 && !AnyBatches(fns_)) {
    return std::make_unique<SequentialMapIt>(shared_from_this(), std::move(input), &fns_, iteration);
  }
  return std::make_unique<ParallelMapIt>(shared_from_this(), std::move(input), &fns_, std::max(parallel_, 1),
                                         deterministic_, iteration);
}

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, Fns fns)
      : Dataset("filter", input->spec()), input_(std::move(input)), fns_(std::move(fns)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(shared_from_this(), std::move(input), &fns_, NextIterationNumber(), ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, uint64_t iteration,
       CancellationPtr cancel)
        : keep_(std::move(keep)),
          input_(std::move(input)),
          fns_(fns),
          iteration_(iteration),
          cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (true) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
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
    CancellationPtr cancel_;
    uint64_t index_ = 0;
  };
  DatasetPtr input_;
  Fns fns_;
};

// flat_map: each input becomes the list its last function returns.
class FlatMapDataset : public Dataset {
 public:
  FlatMapDataset(DatasetPtr input, Fns fns)
      : Dataset("flat_map", ElementSpec::Unknown()), input_(std::move(input)), fns_(std::move(fns)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(shared_from_this(), std::move(input), &fns_, NextIterationNumber(), ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, uint64_t iteration,
       CancellationPtr cancel)
        : keep_(std::move(keep)),
          input_(std::move(input)),
          fns_(fns),
          iteration_(iteration),
          cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      // An input that becomes nothing is followed by the next: bounded by the input.
      while (next_ >= pending_.size()) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        Element in;
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&in));
        if (!more) return false;
        const FunctionContext ctx{index_++, iteration_};
        for (size_t i = 0; i + 1 < fns_->size(); ++i) {
          TFD_ASSIGN_OR_RETURN(in, (*fns_)[i]->Apply(std::move(in), ctx));
        }
        TFD_ASSIGN_OR_RETURN(pending_, fns_->back()->ApplyMany(std::move(in), ctx));
        next_ = 0;
      }
      *out = std::move(pending_[next_++]);
      return true;
    }

   private:
    std::shared_ptr<const Dataset> keep_;
    std::unique_ptr<Iterator> input_;
    const Fns* fns_;
    uint64_t iteration_;
    CancellationPtr cancel_;
    uint64_t index_ = 0;
    std::vector<Element> pending_;
    size_t next_ = 0;
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
    return absl::InvalidArgumentError(
        fmt::format("num_parallel_calls must be -1, 0 or positive, got {}", num_parallel_calls));
  }
  TFD_ASSIGN_OR_RETURN(ElementSpec spec, ChainSpec(input->spec(), fns));
  if (num_parallel_calls > kMaxOpThreads) {
    return absl::InvalidArgumentError(
        fmt::format("num_parallel_calls {} is more than the {} threads one op may start (-1: one per core)",
                    num_parallel_calls, kMaxOpThreads));
  }
  const int parallel = num_parallel_calls == -1 ? NumCores() : num_parallel_calls;
  return std::make_shared<MapDataset>(std::move(input), std::move(fns), parallel, deterministic, std::move(spec));
}

absl::StatusOr<DatasetPtr> MakeFlatMapDataset(DatasetPtr input, Fns fns) {
  if (fns.empty()) return absl::InvalidArgumentError("flat_map needs at least one `fn`, the last a python function");
  TFD_RETURN_IF_ERROR(ChainSpec(input->spec(), fns).status());
  return std::make_shared<FlatMapDataset>(std::move(input), std::move(fns));
}

absl::StatusOr<DatasetPtr> MakeFilterDataset(DatasetPtr input, Fns fns) {
  if (fns.empty()) return absl::InvalidArgumentError("filter needs at least one `fn` (a predicate such as compare)");
  TFD_ASSIGN_OR_RETURN(ElementSpec spec, ChainSpec(input->spec(), fns));
  if (!spec.unknown && !(spec.components.size() == 1 && spec.components[0].dtype == DType::kBool &&
                         !spec.components[0].unknown_rank && spec.components[0].shape.empty())) {
    return absl::InvalidArgumentError(
        fmt::format("the predicate must end in one bool scalar (e.g. `compare`), but the functions produce {}",
                    spec.DebugString()));
  }
  return std::make_shared<FilterDataset>(std::move(input), std::move(fns));
}

}  // namespace tfdata
