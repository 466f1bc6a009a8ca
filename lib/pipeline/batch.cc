// batch, padded_batch and unbatch.
#include <algorithm>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

ElementSpec BatchedSpec(const ElementSpec& in, int64_t dim0) {
  if (in.unknown) return in;
  ElementSpec out = in;
  for (auto& c : out.components) {
    if (!c.unknown_rank) c.shape.insert(c.shape.begin(), dim0);
  }
  return out;
}

int64_t BatchCardinality(int64_t n, int64_t batch, bool drop) {
  if (n < 0) return n;
  return drop ? n / batch : (n + batch - 1) / batch;
}

// Copies each element's components straight into preallocated batch tensors: no intermediate
// vector of tensors, so batching small elements stays cheap.
class BatchDataset : public Dataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch, bool drop)
      : Dataset("batch", BatchedSpec(input->spec(), drop ? batch : -1)), input_(std::move(input)), batch_(batch), drop_(drop) {}
  int64_t Cardinality() const override { return BatchCardinality(input_->Cardinality(), batch_, drop_); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::move(input), batch_, drop_);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> input, int64_t batch, bool drop) : input_(std::move(input)), batch_(batch), drop_(drop) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      std::vector<std::shared_ptr<Buffer>> buffers;
      std::vector<std::vector<std::string>> strings;
      Element first;
      int64_t count = 0;
      for (; count < batch_; ++count) {
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&e_));
        if (!more) {
          done_ = true;
          break;
        }
        if (count == 0) {
          first = e_;
          buffers.resize(e_.size());
          strings.resize(e_.size());
          for (size_t c = 0; c < e_.size(); ++c) {
            if (e_[c].is_string()) {
              strings[c].reserve(static_cast<size_t>(batch_ * e_[c].num_elements()));
            } else {
              buffers[c] = Buffer::Allocate(static_cast<size_t>(batch_) * e_[c].nbytes());
            }
          }
          // Fused fast path: a single numeric component whose producer can fill the batch in bulk.
          if (bulk_ && e_.size() == 1 && !e_[0].is_string() && e_[0].rank() == 0 && batch_ > 1) {
            const size_t size = e_[0].nbytes();
            std::memcpy(buffers[0]->mutable_data(), e_[0].raw(), size);
            TFD_ASSIGN_OR_RETURN(int64_t n, input_->NextBulk(batch_ - 1, buffers[0]->mutable_data() + size));
            if (n >= 0) {
              count = 1 + n;
              if (count < batch_) done_ = true;
              break;
            }
            bulk_ = false;
          }
        } else if (e_.size() != first.size()) {
          return absl::InvalidArgumentError(fmt::format("batch: element {} has {} components, the batch started with {}",
                                                        count, e_.size(), first.size()));
        }
        for (size_t c = 0; c < e_.size(); ++c) {
          const Tensor& t = e_[c];
          if (t.dtype() != first[c].dtype() || t.shape() != first[c].shape()) {
            return absl::InvalidArgumentError(
                fmt::format("batch: component {} of element {} is {} but the batch started with {} "
                            "(use padded_batch for varying shapes)",
                            c, count, t.TypeString(), first[c].TypeString()));
          }
          if (t.is_string()) {
            strings[c].insert(strings[c].end(), t.strings().begin(), t.strings().end());
          } else if (t.nbytes() > 0) {
            std::memcpy(buffers[c]->mutable_data() + static_cast<size_t>(count) * t.nbytes(), t.raw(), t.nbytes());
          }
        }
      }
      if (count == 0 || (drop_ && count < batch_)) return false;
      out->resize(first.size());
      for (size_t c = 0; c < first.size(); ++c) {
        Shape shape = first[c].shape();
        shape.insert(shape.begin(), count);
        if (first[c].is_string()) {
          (*out)[c] = Tensor::Strings(std::move(shape), std::move(strings[c]));
        } else {
          TFD_ASSIGN_OR_RETURN((*out)[c], Tensor::FromBuffer(first[c].dtype(), std::move(shape), buffers[c], 0,
                                                             static_cast<size_t>(count) * first[c].nbytes()));
        }
      }
      return true;
    }

   private:
    std::unique_ptr<Iterator> input_;
    int64_t batch_;
    bool drop_;
    bool done_ = false;
    bool bulk_ = true;  // until the input says it has no bulk path
    Element e_;  // reused between calls so sources can reuse its storage
  };
  DatasetPtr input_;
  int64_t batch_;
  bool drop_;
};

template <typename T>
void PadCopy(const Tensor& src, const Shape& target, T pad, T* dst) {
  const int64_t n = NumElements(target);
  std::fill(dst, dst + n, pad);
  const Shape& s = src.shape();
  const int rank = static_cast<int>(s.size());
  if (NumElements(s) == 0) return;
  if (rank == 0) {
    dst[0] = src.data<T>()[0];
    return;
  }
  // Copy row by row (last dimension contiguous), mapping source indices to target offsets.
  const int64_t rows = NumElements(s) / s[rank - 1];
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  const T* in = src.data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    for (int d = 0; d < rank; ++d) off = off * target[d] + idx[static_cast<size_t>(d)];
    std::copy(in + r * s[rank - 1], in + (r + 1) * s[rank - 1], dst + off);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < s[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

class PaddedBatchDataset : public Dataset {
 public:
  PaddedBatchDataset(DatasetPtr input, int64_t batch, bool drop, std::vector<Shape> padded, double pad, ElementSpec spec)
      : Dataset("padded_batch", std::move(spec)), input_(std::move(input)), batch_(batch), drop_(drop),
        padded_(std::move(padded)), pad_(pad) {}
  int64_t Cardinality() const override { return BatchCardinality(input_->Cardinality(), batch_, drop_); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::static_pointer_cast<const PaddedBatchDataset>(shared_from_this()), std::move(input));
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const PaddedBatchDataset> ds, std::unique_ptr<Iterator> input) : ds_(std::move(ds)), input_(std::move(input)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      std::vector<Element> rows;
      Element e;
      while (static_cast<int64_t>(rows.size()) < ds_->batch_) {
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&e));
        if (!more) {
          done_ = true;
          break;
        }
        rows.push_back(std::move(e));
        e = Element();
      }
      if (rows.empty() || (ds_->drop_ && static_cast<int64_t>(rows.size()) < ds_->batch_)) return false;
      out->clear();
      for (size_t c = 0; c < rows[0].size(); ++c) {
        TFD_ASSIGN_OR_RETURN(Tensor t, PadComponent(rows, c));
        out->push_back(std::move(t));
      }
      return true;
    }

   private:
    absl::StatusOr<Tensor> PadComponent(const std::vector<Element>& rows, size_t c) {
      const Tensor& first = rows[0][c];
      Shape target = first.shape();
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].size() != rows[0].size()) return absl::InvalidArgumentError("padded_batch: elements differ in component count");
        const Tensor& t = rows[r][c];
        if (t.dtype() != first.dtype() || t.rank() != first.rank()) {
          return absl::InvalidArgumentError(fmt::format("padded_batch: component {} is {} in one element and {} in another",
                                                        c, first.TypeString(), t.TypeString()));
        }
        for (int d = 0; d < t.rank(); ++d) target[d] = std::max(target[d], t.shape()[d]);
      }
      if (c < ds_->padded_.size()) {
        const Shape& want = ds_->padded_[c];
        if (static_cast<int>(want.size()) != first.rank()) {
          return absl::InvalidArgumentError(fmt::format("padded_batch: padded_shape {} has rank {} but component {} is {}",
                                                        ShapeString(want), want.size(), c, first.TypeString()));
        }
        for (size_t d = 0; d < want.size(); ++d) {
          if (want[d] < 0) continue;
          if (target[d] > want[d]) {
            return absl::InvalidArgumentError(fmt::format(
                "padded_batch: component {} has dimension {} of size {}, larger than padded_shape {}", c, d, target[d],
                ShapeString(want)));
          }
          target[d] = want[d];
        }
      }
      Shape batch_shape = target;
      batch_shape.insert(batch_shape.begin(), static_cast<int64_t>(rows.size()));
      Tensor out = Tensor::Zeros(first.dtype(), batch_shape);
      const int64_t per = NumElements(target);
      if (first.is_string()) {
        auto& dst = out.mutable_strings();
        for (size_t r = 0; r < rows.size(); ++r) {
          std::vector<std::string> tmp(static_cast<size_t>(per));
          // Reuse the numeric path's index mapping through a uint32 index tensor would cost more
          // than this direct loop for the small string tensors padded in practice.
          const Tensor& t = rows[r][c];
          const Shape& s = t.shape();
          for (int64_t i = 0; i < t.num_elements(); ++i) {
            int64_t rem = i, off = 0, stride = 1;
            for (int d = t.rank() - 1; d >= 0; --d) {
              off += (rem % s[d]) * stride;
              rem /= s[d];
              stride *= target[d];
            }
            tmp[static_cast<size_t>(off)] = t.strings()[static_cast<size_t>(i)];
          }
          std::move(tmp.begin(), tmp.end(), dst.begin() + static_cast<int64_t>(r) * per);
        }
        return out;
      }
      for (size_t r = 0; r < rows.size(); ++r) {
        const Tensor& t = rows[r][c];
        switch (first.dtype()) {
#define TFD_PAD_CASE(D, T) \
  case D: PadCopy<T>(t, target, static_cast<T>(ds_->pad_), out.mutable_data<T>() + static_cast<int64_t>(r) * per); break;
          TFD_PAD_CASE(DType::kBool, bool)
          TFD_PAD_CASE(DType::kInt8, int8_t)
          TFD_PAD_CASE(DType::kInt16, int16_t)
          TFD_PAD_CASE(DType::kInt32, int32_t)
          TFD_PAD_CASE(DType::kInt64, int64_t)
          TFD_PAD_CASE(DType::kUInt8, uint8_t)
          TFD_PAD_CASE(DType::kUInt16, uint16_t)
          TFD_PAD_CASE(DType::kUInt32, uint32_t)
          TFD_PAD_CASE(DType::kUInt64, uint64_t)
          TFD_PAD_CASE(DType::kFloat32, float)
          TFD_PAD_CASE(DType::kFloat64, double)
#undef TFD_PAD_CASE
          case DType::kString: break;
        }
      }
      return out;
    }

    std::shared_ptr<const PaddedBatchDataset> ds_;
    std::unique_ptr<Iterator> input_;
    bool done_ = false;
  };
  DatasetPtr input_;
  int64_t batch_;
  bool drop_;
  std::vector<Shape> padded_;
  double pad_;
};

class UnbatchDataset : public Dataset {
 public:
  UnbatchDataset(DatasetPtr input, ElementSpec spec) : Dataset("unbatch", std::move(spec)), input_(std::move(input)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::move(input));
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::unique_ptr<Iterator> input) : input_(std::move(input)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (index_ >= rows_) {
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&batch_));
        if (!more) return false;
        index_ = 0;
        rows_ = -1;
        for (size_t c = 0; c < batch_.size(); ++c) {
          const Tensor& t = batch_[c];
          if (t.rank() == 0) {
            return absl::InvalidArgumentError(fmt::format("unbatch: component {} is a scalar ({})", c, t.TypeString()));
          }
          if (rows_ >= 0 && t.shape()[0] != rows_) {
            return absl::InvalidArgumentError(
                fmt::format("unbatch: components have different first dimensions ({} and {})", rows_, t.shape()[0]));
          }
          rows_ = t.shape()[0];
        }
        if (rows_ < 0) rows_ = 0;
      }
      out->resize(batch_.size());
      for (size_t c = 0; c < batch_.size(); ++c) {
        TFD_ASSIGN_OR_RETURN((*out)[c], batch_[c].Slice(index_));
      }
      ++index_;
      return true;
    }

   private:
    std::unique_ptr<Iterator> input_;
    Element batch_;
    int64_t index_ = 0;
    int64_t rows_ = 0;
  };
  DatasetPtr input_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder) {
  if (batch_size <= 0) return absl::InvalidArgumentError(fmt::format("batch_size must be positive, got {}", batch_size));
  return std::make_shared<BatchDataset>(std::move(input), batch_size, drop_remainder);
}

absl::StatusOr<DatasetPtr> MakePaddedBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
                                                  std::vector<Shape> padded_shapes, double padding_value) {
  if (batch_size <= 0) return absl::InvalidArgumentError(fmt::format("batch_size must be positive, got {}", batch_size));
  const ElementSpec& in = input->spec();
  ElementSpec spec = in;
  if (!in.unknown) {
    if (!padded_shapes.empty() && padded_shapes.size() != in.components.size()) {
      return absl::InvalidArgumentError(fmt::format("padded_shape has {} entries but elements have {} components",
                                                    padded_shapes.size(), in.components.size()));
    }
    for (size_t c = 0; c < spec.components.size(); ++c) {
      TensorSpec& ts = spec.components[c];
      if (ts.unknown_rank) continue;
      if (c < padded_shapes.size()) {
        if (padded_shapes[c].size() != ts.shape.size()) {
          return absl::InvalidArgumentError(fmt::format("padded_shape {} for component {} has rank {}, the component is {}",
                                                        ShapeString(padded_shapes[c]), c, padded_shapes[c].size(), ts.DebugString()));
        }
        ts.shape = padded_shapes[c];
      } else {
        for (auto& d : ts.shape) d = -1;
      }
    }
  }
  spec = BatchedSpec(spec, drop_remainder ? batch_size : -1);
  return std::make_shared<PaddedBatchDataset>(std::move(input), batch_size, drop_remainder, std::move(padded_shapes),
                                              padding_value, std::move(spec));
}

absl::StatusOr<DatasetPtr> MakeUnbatchDataset(DatasetPtr input) {
  ElementSpec spec = input->spec();
  if (!spec.unknown) {
    for (size_t c = 0; c < spec.components.size(); ++c) {
      TensorSpec& ts = spec.components[c];
      if (ts.unknown_rank) continue;
      if (ts.shape.empty()) {
        return absl::InvalidArgumentError(fmt::format("component {} is a scalar ({}); unbatch needs rank >= 1", c, ts.DebugString()));
      }
      ts.shape.erase(ts.shape.begin());
    }
  }
  return std::make_shared<UnbatchDataset>(std::move(input), std::move(spec));
}

}  // namespace tfdata
