// batch, padded_batch and unbatch.
#include <algorithm>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/memory_budget.h"
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

// Bytes of `count` values of `size` bytes, or -1 on overflow.
int64_t TimesOrOverflow(int64_t count, int64_t size) {
  int64_t out = 0;
  return __builtin_mul_overflow(count, size, &out) ? -1 : out;
}

// Copies each element's components straight into preallocated batch tensors: no intermediate
// vector of tensors, so batching small elements stays cheap.
//
// Memory: the batch's buffers are taken from the task's budget before they are allocated. A batch
// is allocated whole when the input's known size bounds it, or when it is small (kEagerBytes) and
// fits; otherwise it starts smaller and doubles as elements arrive. So a batch_size far larger than the input
// costs what the input holds (one short batch, as in TF), and one that would really pass the
// budget fails when it gets there, with an error instead of an allocation that kills the process.
class BatchDataset : public Dataset {
 public:
  BatchDataset(DatasetPtr input, int64_t batch, bool drop, MemoryScope memory)
      : Dataset("batch", BatchedSpec(input->spec(), drop ? batch : -1)),
        input_(std::move(input)),
        batch_(batch),
        drop_(drop),
        memory_(std::move(memory)) {}
  int64_t Cardinality() const override { return BatchCardinality(input_->Cardinality(), batch_, drop_); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::move(input), batch_, drop_, input_->Cardinality(), memory_, ctx.cancellation);
  }

 private:
  static constexpr int64_t kEagerBytes = 64 << 20;

  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> input, int64_t batch, bool drop, int64_t input_cardinality, MemoryScope memory,
       CancellationPtr cancel)
        : input_(std::move(input)),
          batch_(batch),
          drop_(drop),
          input_cardinality_(input_cardinality),
          hold_(std::move(memory)),
          cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      hold_.Reset();  // the previous batch belongs to the consumer now
      buffers_.clear();
      strings_.clear();
      capacity_ = 0;
      Element first;
      int64_t count = 0;
      for (; count < batch_; ++count) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&e_));
        if (!more) {
          done_ = true;
          break;
        }
        if (count == 0) {
          first = e_;
          buffers_.resize(e_.size());
          strings_.resize(e_.size());
          row_bytes_ = 0;
          for (const Tensor& t : e_) row_bytes_ += t.is_string() ? 0 : static_cast<int64_t>(t.nbytes());
          TFD_RETURN_IF_ERROR(Grow(first, InitialCapacity()));
          // Fused fast path: a single numeric component whose producer can fill the batch in bulk.
          if (bulk_ && e_.size() == 1 && !e_[0].is_string() && e_[0].rank() == 0 && batch_ > 1) {
            const size_t size = e_[0].nbytes();
            std::memcpy(buffers_[0]->mutable_data(), e_[0].raw(), size);
            TFD_ASSIGN_OR_RETURN(bool bulk, FillBulk(first, size, &count));
            if (bulk) break;
            bulk_ = false;
          }
        } else if (e_.size() != first.size()) {
          return absl::InvalidArgumentError(fmt::format(
              "batch: element {} has {} components, the batch started with {}", count, e_.size(), first.size()));
        } else if (count == capacity_) {
          TFD_RETURN_IF_ERROR(Grow(first, std::min(batch_, capacity_ * 2)));
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
            TFD_RETURN_IF_ERROR(hold_.Grow(ElementMemoryBytes({t}), "the batch's strings"));
            strings_[c].insert(strings_[c].end(), t.strings().begin(), t.strings().end());
          } else if (t.nbytes() > 0) {
            std::memcpy(buffers_[c]->mutable_data() + static_cast<size_t>(count) * t.nbytes(), t.raw(), t.nbytes());
          }
        }
      }
      if (count == 0 || (drop_ && count < batch_)) return false;
      out->resize(first.size());
      for (size_t c = 0; c < first.size(); ++c) {
        Shape shape = first[c].shape();
        shape.insert(shape.begin(), count);
        if (first[c].is_string()) {
          (*out)[c] = Tensor::Strings(std::move(shape), std::move(strings_[c]));
        } else {
          TFD_ASSIGN_OR_RETURN((*out)[c], Tensor::FromBuffer(first[c].dtype(), std::move(shape), buffers_[c], 0,
                                                             static_cast<size_t>(count) * first[c].nbytes()));
        }
      }
      buffers_.clear();
      return true;
    }

   private:
    int64_t InitialCapacity() const {
      if (input_cardinality_ >= 0) return std::min(batch_, std::max<int64_t>(input_cardinality_, 1));
      // An infinite input fills every batch: asking for all of it at once gives the clearest error.
      if (input_cardinality_ == Dataset::kInfinite) return batch_;
      // Unknown size (files, filter): the whole batch when it is small enough to be likely, else
      // a part of what the budget has left, doubled as needed.
      const int64_t row = std::max<int64_t>(row_bytes_, 8);
      const int64_t full = TimesOrOverflow(batch_, row);
      const MemoryBudget& budget = hold_.budget();
      const int64_t left = budget.limit() - budget.held();
      if (full >= 0 && full <= kEagerBytes && full <= left) return batch_;
      return std::min(batch_, std::max<int64_t>(1, std::min(kEagerBytes, left / 2) / row));
    }

    // Makes room for `capacity` elements, keeping the `capacity_` already copied.
    absl::Status Grow(const Element& first, int64_t capacity) {
      const int64_t bytes = TimesOrOverflow(capacity, row_bytes_);
      const int64_t full = TimesOrOverflow(batch_, row_bytes_);
      auto types = [&] { return first.size() == 1 ? first[0].TypeString() : ElementTypeString(first); };
      if (bytes < 0 || full < 0) {
        return absl::ResourceExhaustedError(
            fmt::format("{}: a batch of {} {} elements needs more than 8 EiB", hold_.scope().where, batch_, types()));
      }
      const int64_t more = bytes - TimesOrOverflow(capacity_, row_bytes_);
      TFD_RETURN_IF_ERROR(hold_.GrowLazy(more, [&] {
        return capacity == batch_ ? fmt::format("a batch of {} {} elements", batch_, types())
                                  : fmt::format("a batch of up to {} {} elements ({} in all), grown to {} elements,",
                                                batch_, types(), FormatBytes(full), capacity);
      }));
      for (size_t c = 0; c < first.size(); ++c) {
        if (first[c].is_string()) {
          strings_[c].reserve(static_cast<size_t>(std::min<int64_t>(capacity * first[c].num_elements(), 1 << 20)));
          continue;
        }
        auto grown = Buffer::Allocate(static_cast<size_t>(capacity) * first[c].nbytes());
        if (buffers_[c] && capacity_ > 0) {
          std::memcpy(grown->mutable_data(), buffers_[c]->data(), static_cast<size_t>(capacity_) * first[c].nbytes());
        }
        buffers_[c] = std::move(grown);
      }
      capacity_ = capacity;
      return absl::OkStatus();
    }

    // The bulk path, after the first element: fills up to batch_ elements, growing as needed.
    // Returns false (nothing consumed) when the input has no bulk path.
    absl::StatusOr<bool> FillBulk(const Element& first, size_t size, int64_t* count) {
      int64_t have = 1;
      while (have < batch_) {
        if (have == capacity_) TFD_RETURN_IF_ERROR(Grow(first, std::min(batch_, capacity_ * 2)));
        const int64_t want = capacity_ - have;
        TFD_ASSIGN_OR_RETURN(int64_t n, input_->NextBulk(want, buffers_[0]->mutable_data() + have * size));
        if (n < 0) {
          if (have == 1) return false;
          return absl::InternalError("batch: the input stopped offering its bulk path mid-batch");
        }
        have += n;
        if (n < want) {
          done_ = true;
          break;
        }
      }
      *count = have;
      return true;
    }

    std::unique_ptr<Iterator> input_;
    int64_t batch_;
    bool drop_;
    int64_t input_cardinality_;
    MemoryHold hold_;
    CancellationPtr cancel_;
    bool done_ = false;
    bool bulk_ = true;  // until the input says it has no bulk path
    Element e_;         // reused between calls so sources can reuse its storage
    // The batch being filled.
    std::vector<std::shared_ptr<Buffer>> buffers_;
    std::vector<std::vector<std::string>> strings_;
    int64_t capacity_ = 0;
    int64_t row_bytes_ = 0;
  };
  DatasetPtr input_;
  int64_t batch_;
  bool drop_;
  MemoryScope memory_;
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
  PaddedBatchDataset(DatasetPtr input, int64_t batch, bool drop, std::vector<Shape> padded, double pad,
                     ElementSpec spec, MemoryScope memory)
      : Dataset("padded_batch", std::move(spec)),
        input_(std::move(input)),
        batch_(batch),
        drop_(drop),
        padded_(std::move(padded)),
        pad_(pad),
        memory_(std::move(memory)) {}
  int64_t Cardinality() const override { return BatchCardinality(input_->Cardinality(), batch_, drop_); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::static_pointer_cast<const PaddedBatchDataset>(shared_from_this()),
                                std::move(input), ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const PaddedBatchDataset> ds, std::unique_ptr<Iterator> input, CancellationPtr cancel)
        : ds_(std::move(ds)), input_(std::move(input)), hold_(ds_->memory_), cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (done_) return false;
      hold_.Reset();  // the previous batch belongs to the consumer now
      std::vector<Element> rows;
      Element e;
      while (static_cast<int64_t>(rows.size()) < ds_->batch_) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        TFD_ASSIGN_OR_RETURN(bool more, input_->Next(&e));
        if (!more) {
          done_ = true;
          break;
        }
        TFD_RETURN_IF_ERROR(hold_.GrowLazy(ElementMemoryBytes(e) + static_cast<int64_t>(sizeof(Element)), [&] {
          return fmt::format("a padded batch of {} elements, holding {} ({}), cannot take the next: it", ds_->batch_,
                             rows.size(), FormatBytes(hold_.held()));
        }));
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
        if (rows[r].size() != rows[0].size())
          return absl::InvalidArgumentError("padded_batch: elements differ in component count");
        const Tensor& t = rows[r][c];
        if (t.dtype() != first.dtype() || t.rank() != first.rank()) {
          return absl::InvalidArgumentError(
              fmt::format("padded_batch: component {} is {} in one element and {} in another", c, first.TypeString(),
                          t.TypeString()));
        }
        for (int d = 0; d < t.rank(); ++d) target[d] = std::max(target[d], t.shape()[d]);
      }
      if (c < ds_->padded_.size()) {
        const Shape& want = ds_->padded_[c];
        if (static_cast<int>(want.size()) != first.rank()) {
          return absl::InvalidArgumentError(
              fmt::format("padded_batch: padded_shape {} has rank {} but component {} is {}", ShapeString(want),
                          want.size(), c, first.TypeString()));
        }
        for (size_t d = 0; d < want.size(); ++d) {
          if (want[d] < 0) continue;
          if (target[d] > want[d]) {
            return absl::InvalidArgumentError(
                fmt::format("padded_batch: component {} has dimension {} of size {}, larger than padded_shape {}", c, d,
                            target[d], ShapeString(want)));
          }
          target[d] = want[d];
        }
      }
      Shape batch_shape = target;
      batch_shape.insert(batch_shape.begin(), static_cast<int64_t>(rows.size()));
      // The padded shapes come from the pipeline: check what they multiply to before allocating.
      int64_t values = 1;
      for (int64_t d : batch_shape) values = TimesOrOverflow(values, d);
      const int64_t bytes =
          TimesOrOverflow(values, first.is_string() ? 32 : static_cast<int64_t>(DTypeSize(first.dtype())));
      if (values < 0 || bytes < 0) {
        return absl::ResourceExhaustedError(fmt::format("{}: component {} padded to {} needs more than 8 EiB",
                                                        ds_->memory_.where, c, ShapeString(batch_shape)));
      }
      TFD_RETURN_IF_ERROR(hold_.Grow(
          bytes, fmt::format("component {} padded to {} {}", c, DTypeName(first.dtype()), ShapeString(batch_shape))));
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
#define TFD_PAD_CASE(D, T)                                                                                   \
  case D:                                                                                                    \
    PadCopy<T>(t, target, static_cast<T>(ds_->pad_), out.mutable_data<T>() + static_cast<int64_t>(r) * per); \
    break;
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
    MemoryHold hold_;
    CancellationPtr cancel_;
    bool done_ = false;
  };
  DatasetPtr input_;
  int64_t batch_;
  bool drop_;
  std::vector<Shape> padded_;
  double pad_;
  MemoryScope memory_;
};

class UnbatchDataset : public Dataset {
 public:
  UnbatchDataset(DatasetPtr input, ElementSpec spec) : Dataset("unbatch", std::move(spec)), input_(std::move(input)) {}
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<It>(std::move(input), ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::unique_ptr<Iterator> input, CancellationPtr cancel)
        : input_(std::move(input)), cancel_(std::move(cancel)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      while (index_ >= rows_) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
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
    CancellationPtr cancel_;
    Element batch_;
    int64_t index_ = 0;
    int64_t rows_ = 0;
  };
  DatasetPtr input_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
                                            MemoryScope memory) {
  if (batch_size <= 0)
    return absl::InvalidArgumentError(fmt::format("batch_size must be positive, got {}", batch_size));
  if (memory.where.empty()) memory.where = "batch";
  return std::make_shared<BatchDataset>(std::move(input), batch_size, drop_remainder, std::move(memory));
}

absl::StatusOr<DatasetPtr> MakePaddedBatchDataset(DatasetPtr input, int64_t batch_size, bool drop_remainder,
                                                  std::vector<Shape> padded_shapes, double padding_value,
                                                  MemoryScope memory) {
  if (batch_size <= 0)
    return absl::InvalidArgumentError(fmt::format("batch_size must be positive, got {}", batch_size));
  if (memory.where.empty()) memory.where = "padded_batch";
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
          return absl::InvalidArgumentError(
              fmt::format("padded_shape {} for component {} has rank {}, the component is {}",
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
                                              padding_value, std::move(spec), std::move(memory));
}

absl::StatusOr<DatasetPtr> MakeUnbatchDataset(DatasetPtr input) {
  ElementSpec spec = input->spec();
  if (!spec.unknown) {
    for (size_t c = 0; c < spec.components.size(); ++c) {
      TensorSpec& ts = spec.components[c];
      if (ts.unknown_rank) continue;
      if (ts.shape.empty()) {
        return absl::InvalidArgumentError(
            fmt::format("component {} is a scalar ({}); unbatch needs rank >= 1", c, ts.DebugString()));
      }
      ts.shape.erase(ts.shape.begin());
    }
  }
  return std::make_shared<UnbatchDataset>(std::move(input), std::move(spec));
}

}  // namespace tfdata
