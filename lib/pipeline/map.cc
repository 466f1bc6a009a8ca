// map (sequential and parallel), filter and flat_map.
#include <algorithm>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "fmt/format.h"
#include "lib/core/memory_budget.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/map_window.h"
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

// Runs the functions on `parallel` threads, at most a window of elements ahead of the consumer
// (map_window.h: more for small elements, measured as they come). Deterministic mode hands out
// results in input order; otherwise in completion order.
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
        batches_(AnyBatches(*fns)),
        capacity_(static_cast<uint64_t>(MinMapWindow(parallel, batches_))) {}

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
      int64_t bytes = 0;
      for (const auto& o : outputs) bytes += o.ok() ? ElementMemoryBytes(*o) : 0;
      absl::MutexLock l(&mu_);
      for (size_t i = 0; i < outputs.size(); ++i) results_.emplace(first_seq + i, std::move(outputs[i]));
      output_bytes_ += bytes;
      outputs_ += static_cast<int64_t>(outputs.size());
      if (outputs_ > 0) {
        capacity_ =
            static_cast<uint64_t>(MapWindow(parallel_, batches_, std::max<int64_t>(1, output_bytes_ / outputs_)));
      }
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
  const bool batches_;

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
  uint64_t capacity_ ABSL_GUARDED_BY(mu_);         // the window (map_window.h)
  int64_t output_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of every output so far, for the window
  int64_t outputs_ ABSL_GUARDED_BY(mu_) = 0;
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

// Filter's and flat_map's iterator: inputs are read and handed to the functions in chunks when a
// function batches (a Python function: one round trip per chunk), else one at a time. Chunks
// start at one input and double up to kMaxChunk, so that a slow input is not held back waiting
// for a full chunk. An error (of the input or of a function) takes its place in the output order.
class ChunkedIt : public Iterator {
 public:
  static constexpr size_t kMaxChunk = 64;

  ChunkedIt(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, uint64_t iteration,
            CancellationPtr cancel)
      : keep_(std::move(keep)),
        input_(std::move(input)),
        fns_(fns),
        iteration_(iteration),
        cancel_(std::move(cancel)),
        batches_(AnyBatches(*fns)) {}

  absl::StatusOr<bool> Next(Element* out) override {
    // A chunk that yields nothing is followed by the next: bounded by the input.
    while (next_ >= pending_.size()) {
      if (ended_) return false;
      TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
      pending_.clear();
      next_ = 0;
      std::vector<Element> inputs;
      absl::Status error;
      const size_t want = batches_ ? chunk_ : 1;
      while (inputs.size() < want) {
        Element in;
        absl::StatusOr<bool> more = input_->Next(&in);
        if (!more.ok() || !*more) {
          ended_ = more.ok();
          error = more.status();
          break;
        }
        inputs.push_back(std::move(in));
      }
      chunk_ = std::min(2 * chunk_, kMaxChunk);
      const uint64_t first = index_;
      index_ += inputs.size();
      if (!inputs.empty()) Process(std::move(inputs), FunctionContext{first, iteration_}, &pending_);
      if (!error.ok()) pending_.push_back(error);  // the input's error, after the elements before it
    }
    absl::StatusOr<Element>& r = pending_[next_++];
    if (!r.ok()) return r.status();
    *out = *std::move(r);
    return true;
  }

 protected:
  // Appends the outputs of `inputs` (the first's context `first`) to `out`, in order.
  virtual void Process(std::vector<Element> inputs, const FunctionContext& first,
                       std::vector<absl::StatusOr<Element>>* out) = 0;
  const Fns& fns() const { return *fns_; }

 private:
  std::shared_ptr<const Dataset> keep_;  // owns *fns_
  std::unique_ptr<Iterator> input_;
  const Fns* fns_;
  const uint64_t iteration_;
  const CancellationPtr cancel_;
  const bool batches_;
  uint64_t index_ = 0;
  size_t chunk_ = 1;
  bool ended_ = false;
  std::vector<absl::StatusOr<Element>> pending_;
  size_t next_ = 0;
};

class FilterDataset : public Dataset {
 public:
  FilterDataset(DatasetPtr input, Fns fns)
      : Dataset("filter", input->spec()), input_(std::move(input)), fns_(std::move(fns)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(shared_from_this(), std::move(input), &fns_, NextIterationNumber(), ctx.cancellation);
  }

 private:
  class It : public ChunkedIt {
   public:
    using ChunkedIt::ChunkedIt;

   protected:
    void Process(std::vector<Element> inputs, const FunctionContext& first,
                 std::vector<absl::StatusOr<Element>>* out) override {
      std::vector<Element> copies = inputs;  // the predicate consumes its input; tensors are shared
      std::vector<absl::StatusOr<Element>> verdicts = ApplyChunk(fns(), copies, first);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const absl::StatusOr<Element>& v = verdicts[i];
        if (!v.ok()) {
          out->push_back(v.status());
        } else if (v->size() != 1 || (*v)[0].dtype() != DType::kBool || (*v)[0].rank() != 0) {
          out->push_back(absl::InvalidArgumentError(
              fmt::format("filter: predicate must produce one bool scalar, got {}", ElementTypeString(*v))));
        } else if ((*v)[0].data<bool>()[0]) {
          out->push_back(std::move(inputs[i]));
        }
      }
    }
  };
  DatasetPtr input_;
  Fns fns_;
};

// flat_map: each input becomes the list its last function returns.
class FlatMapDataset : public Dataset {
 public:
  FlatMapDataset(DatasetPtr input, Fns fns)
      : Dataset("flat_map", ElementSpec::Unknown()),
        input_(std::move(input)),
        fns_(std::move(fns)),
        before_last_(fns_.begin(), fns_.end() - 1) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(shared_from_this(), std::move(input), &fns_, NextIterationNumber(), ctx.cancellation,
                                &before_last_);
  }

 private:
  class It : public ChunkedIt {
   public:
    It(std::shared_ptr<const Dataset> keep, std::unique_ptr<Iterator> input, const Fns* fns, uint64_t iteration,
       CancellationPtr cancel, const Fns* before_last)
        : ChunkedIt(std::move(keep), std::move(input), fns, iteration, std::move(cancel)), before_last_(before_last) {}

   protected:
    void Process(std::vector<Element> inputs, const FunctionContext& first,
                 std::vector<absl::StatusOr<Element>>* out) override {
      std::vector<absl::StatusOr<Element>> mapped = ApplyChunk(*before_last_, inputs, first);
      // Runs of inputs without an error so far, each one ApplyMany.
      for (size_t i = 0; i < mapped.size();) {
        if (!mapped[i].ok()) {
          out->push_back(mapped[i++].status());
          continue;
        }
        size_t end = i;
        std::vector<Element> run;
        while (end < mapped.size() && mapped[end].ok()) run.push_back(*std::move(mapped[end++]));
        auto lists = fns().back()->ApplyMany(std::move(run), FunctionContext{first.element_index + i, first.iteration});
        for (auto& list : lists) {
          if (!list.ok()) {
            out->push_back(list.status());
            continue;
          }
          for (Element& e : *list) out->push_back(std::move(e));
        }
        i = end;
      }
    }

   private:
    const Fns* before_last_;
  };
  DatasetPtr input_;
  Fns fns_;
  Fns before_last_;  // all but the last
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
