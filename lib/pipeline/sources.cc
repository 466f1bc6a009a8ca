// Source ops that need no files: range, from_tensor_slices, zip, concatenate, and the input
// element of an interleave body.
#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

class RangeDataset : public Dataset {
 public:
  RangeDataset(int64_t start, int64_t stop, int64_t step)
      : Dataset("range", ElementSpec{{TensorSpec{DType::kInt64, {}}}}), start_(start), stop_(stop), step_(step) {}

  int64_t Cardinality() const override {
    if (step_ > 0) return stop_ > start_ ? (stop_ - start_ - 1) / step_ + 1 : 0;
    return start_ > stop_ ? (start_ - stop_ - 1) / -step_ + 1 : 0;
  }

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext&) const override {
    return std::make_unique<It>(start_, Cardinality(), step_);
  }

 private:
  class It : public Iterator {
   public:
    It(int64_t next, int64_t remaining, int64_t step) : next_(next), remaining_(remaining), step_(step) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (remaining_ <= 0) return false;
      out->resize(1);
      (*out)[0] = Tensor::Scalar<int64_t>(next_);
      next_ += step_;
      --remaining_;
      return true;
    }
    absl::StatusOr<int64_t> NextBulk(int64_t max, uint8_t* dst) override {
      const int64_t n = std::min(max, remaining_);
      auto* out = reinterpret_cast<int64_t*>(dst);
      for (int64_t i = 0; i < n; ++i) out[i] = next_ + i * step_;
      next_ += n * step_;
      remaining_ -= n;
      return n;
    }

   private:
    int64_t next_, remaining_, step_;
  };
  int64_t start_, stop_, step_;
};

class TensorSlicesDataset : public Dataset {
 public:
  TensorSlicesDataset(std::vector<Tensor> tensors, ElementSpec spec)
      : Dataset("from_tensor_slices", std::move(spec)), tensors_(std::move(tensors)) {}
  int64_t Cardinality() const override { return tensors_[0].shape()[0]; }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext&) const override {
    return std::make_unique<It>(std::static_pointer_cast<const TensorSlicesDataset>(shared_from_this()));
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::shared_ptr<const TensorSlicesDataset> ds) : ds_(std::move(ds)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (index_ >= ds_->Cardinality()) return false;
      out->clear();
      for (const auto& t : ds_->tensors_) {
        TFD_ASSIGN_OR_RETURN(Tensor slice, t.Slice(index_));
        out->push_back(std::move(slice));
      }
      ++index_;
      return true;
    }

   private:
    std::shared_ptr<const TensorSlicesDataset> ds_;
    int64_t index_ = 0;
  };
  std::vector<Tensor> tensors_;
};

class InputElementDataset : public Dataset {
 public:
  explicit InputElementDataset(ElementSpec spec) : Dataset("input_element", std::move(spec)) {}
  int64_t Cardinality() const override { return 1; }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    if (!ctx.input_element) return absl::InternalError("interleave body started without an input element");
    return std::make_unique<It>(ctx.input_element);
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::shared_ptr<const Element> e) : element_(std::move(e)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      *out = *element_;
      done_ = true;
      return true;
    }

   private:
    std::shared_ptr<const Element> element_;
    bool done_ = false;
  };
};

class ZipDataset : public Dataset {
 public:
  ZipDataset(std::vector<DatasetPtr> inputs, ElementSpec spec)
      : Dataset("zip", std::move(spec)), inputs_(std::move(inputs)) {}
  int64_t Cardinality() const override {
    int64_t n = kInfinite;
    for (const auto& in : inputs_) {
      const int64_t c = in->Cardinality();
      if (c == kUnknown) return kUnknown;
      if (c != kInfinite && (n == kInfinite || c < n)) n = c;
    }
    return n;
  }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    std::vector<std::unique_ptr<Iterator>> its;
    for (const auto& in : inputs_) {
      TFD_ASSIGN_OR_RETURN(auto it, in->MakeIterator(ctx));
      its.push_back(std::move(it));
    }
    return std::make_unique<It>(std::move(its));
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::vector<std::unique_ptr<Iterator>> its) : its_(std::move(its)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      out->clear();
      Element part;
      for (auto& it : its_) {
        TFD_ASSIGN_OR_RETURN(bool more, it->Next(&part));
        if (!more) {
          done_ = true;
          return false;
        }
        for (auto& t : part) out->push_back(std::move(t));
      }
      return true;
    }

   private:
    std::vector<std::unique_ptr<Iterator>> its_;
    bool done_ = false;
  };
  std::vector<DatasetPtr> inputs_;
};

class ConcatenateDataset : public Dataset {
 public:
  ConcatenateDataset(std::vector<DatasetPtr> inputs, ElementSpec spec)
      : Dataset("concatenate", std::move(spec)), inputs_(std::move(inputs)) {}
  int64_t Cardinality() const override {
    int64_t n = 0;
    for (const auto& in : inputs_) {
      const int64_t c = in->Cardinality();
      if (c < 0) return c;
      n += c;
    }
    return n;
  }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    return std::make_unique<It>(std::static_pointer_cast<const ConcatenateDataset>(shared_from_this()), ctx);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const ConcatenateDataset> ds, IteratorContext ctx) : ds_(std::move(ds)), ctx_(std::move(ctx)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (index_ < ds_->inputs_.size()) {
        if (!current_) {
          TFD_ASSIGN_OR_RETURN(current_, ds_->inputs_[index_]->MakeIterator(ctx_));
        }
        TFD_ASSIGN_OR_RETURN(bool more, current_->Next(out));
        if (more) return true;
        current_.reset();
        ++index_;
      }
      return false;
    }

   private:
    std::shared_ptr<const ConcatenateDataset> ds_;
    IteratorContext ctx_;
    size_t index_ = 0;
    std::unique_ptr<Iterator> current_;
  };
  std::vector<DatasetPtr> inputs_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeRangeDataset(int64_t start, int64_t stop, int64_t step) {
  if (step == 0) return absl::InvalidArgumentError("step must not be 0");
  // Guard the cardinality arithmetic against overflow on extreme bounds.
  const __int128 span = static_cast<__int128>(stop) - start;
  if (span > std::numeric_limits<int64_t>::max() || span < -std::numeric_limits<int64_t>::max()) {
    return absl::InvalidArgumentError("range too large (stop - start overflows int64)");
  }
  return std::make_shared<RangeDataset>(start, stop, step);
}

absl::StatusOr<DatasetPtr> MakeFromTensorSlicesDataset(std::vector<Tensor> tensors) {
  if (tensors.empty()) return absl::InvalidArgumentError("needs at least one tensor");
  ElementSpec spec;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.rank() == 0) {
      return absl::InvalidArgumentError(fmt::format("tensor {} is a scalar; slicing needs rank >= 1", i));
    }
    if (t.shape()[0] != tensors[0].shape()[0]) {
      return absl::InvalidArgumentError(
          fmt::format("tensor {} has first dimension {} but tensor 0 has {}", i, t.shape()[0], tensors[0].shape()[0]));
    }
    spec.components.push_back(TensorSpec{t.dtype(), Shape(t.shape().begin() + 1, t.shape().end())});
  }
  return std::make_shared<TensorSlicesDataset>(std::move(tensors), std::move(spec));
}

DatasetPtr MakeInputElementDataset(ElementSpec spec) { return std::make_shared<InputElementDataset>(std::move(spec)); }

absl::StatusOr<DatasetPtr> MakeZipDataset(std::vector<DatasetPtr> inputs) {
  if (inputs.size() < 2) return absl::InvalidArgumentError("zip needs at least 2 inputs");
  ElementSpec spec;
  for (const auto& in : inputs) {
    if (in->spec().unknown) {
      spec = ElementSpec::Unknown();
      break;
    }
    for (const auto& c : in->spec().components) spec.components.push_back(c);
  }
  return std::make_shared<ZipDataset>(std::move(inputs), std::move(spec));
}

absl::StatusOr<DatasetPtr> MakeConcatenateDataset(std::vector<DatasetPtr> inputs) {
  if (inputs.size() < 2) return absl::InvalidArgumentError("concatenate needs at least 2 inputs");
  ElementSpec spec = inputs[0]->spec();
  for (size_t i = 1; i < inputs.size(); ++i) {
    auto merged = MergeSpecs(spec, inputs[i]->spec());
    if (!merged.ok()) {
      return absl::InvalidArgumentError(fmt::format("input {} has elements {} but input 0 has {}", i,
                                                    inputs[i]->spec().DebugString(), inputs[0]->spec().DebugString()));
    }
    spec = *merged;
  }
  return std::make_shared<ConcatenateDataset>(std::move(inputs), std::move(spec));
}

}  // namespace tfdata
