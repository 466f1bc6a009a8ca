#include "lib/pipeline/splits.h"

#include <algorithm>
#include <functional>
#include <string>

#include "fmt/format.h"
#include "lib/core/status_macros.h"

namespace tfdata {
namespace {

using pipeline::Op;
using pipeline::Pipeline;
using service::Split;

absl::Status Unsplittable(const std::string& where, const std::string& why) {
  return absl::InvalidArgumentError(fmt::format("distributed_epoch cannot split {}: {}", where, why));
}

absl::StatusOr<DatasetPtr> BuildOne(const Op& op, const BuildOptions& options) {
  Pipeline p;
  *p.add_op() = op;
  return BuildDataset(p, options);
}

// The number of elements of a range or from_tensor_slices op.
absl::StatusOr<int64_t> ElementCount(const Op& op, const BuildOptions& options, const std::string& where) {
  TFD_ASSIGN_OR_RETURN(auto ds, BuildOne(op, options));
  int64_t n = ds->Cardinality();
  if (n < 0) {
    TFD_ASSIGN_OR_RETURN(auto all, Collect(*ds));
    n = static_cast<int64_t>(all.size());
  }
  (void)where;
  return n;
}

bool IsElementSource(const Op& op) { return op.has_range() || op.has_from_tensor_slices(); }

}  // namespace

absl::StatusOr<SplitPlan> SplitPlan::Create(const Pipeline& pipeline, const BuildOptions& options) {
  if (pipeline.op_size() == 0) return absl::InvalidArgumentError("the pipeline has no ops");
  return ForOp(pipeline.op(0), options, fmt::format("op 0 ({})", OpKindName(pipeline.op(0))));
}

absl::StatusOr<SplitPlan> SplitPlan::ForOp(const Op& op, const BuildOptions& options, const std::string& where) {
  SplitPlan plan;
  auto elements = [&](int64_t n) {
    plan.kind_ = Kind::kElements;
    plan.elements_ = n;
    plan.split_size_ = std::clamp<int64_t>((n + kTargetSplits - 1) / kTargetSplits, 1, kMaxSplitElements);
    return plan;
  };
  switch (op.kind_case()) {
    case Op::kRange:
    case Op::kFromTensorSlices: {
      TFD_ASSIGN_OR_RETURN(int64_t n, ElementCount(op, options, where));
      return elements(n);
    }
    case Op::kTfrecord:
    case Op::kTextLine: {
      const auto& files = op.has_tfrecord() ? op.tfrecord().file() : op.text_line().file();
      plan.kind_ = Kind::kFiles;
      plan.files_.assign(files.begin(), files.end());
      return plan;
    }
    case Op::kListFiles: {
      TFD_ASSIGN_OR_RETURN(auto ds, BuildOne(op, options));
      TFD_ASSIGN_OR_RETURN(auto names, Collect(*ds));
      plan.kind_ = Kind::kFiles;
      for (const Element& e : names) plan.files_.push_back(e.at(0).strings().at(0));
      return plan;
    }
    case Op::kZip: {
      int64_t n = -1;
      for (int i = 0; i < op.zip().input_size(); ++i) {
        const Pipeline& in = op.zip().input(i);
        if (in.op_size() != 1 || !IsElementSource(in.op(0))) {
          return Unsplittable(fmt::format("{} > input {}", where, i),
                              "zip is split by element index, so each input must be a bare range or "
                              "from_tensor_slices (move other ops after the zip)");
        }
        TFD_ASSIGN_OR_RETURN(int64_t m, ElementCount(in.op(0), options, where));
        n = n < 0 ? m : std::min(n, m);
      }
      return elements(std::max<int64_t>(n, 0));
    }
    case Op::kConcatenate: {
      plan.kind_ = Kind::kConcatenate;
      for (int i = 0; i < op.concatenate().input_size(); ++i) {
        const Pipeline& in = op.concatenate().input(i);
        if (in.op_size() == 0) return Unsplittable(fmt::format("{} > input {}", where, i), "the input has no ops");
        TFD_ASSIGN_OR_RETURN(auto sub, ForOp(in.op(0), options,
                                             fmt::format("{} > input {} > op 0 ({})", where, i, OpKindName(in.op(0)))));
        plan.inputs_.push_back(std::move(sub));
      }
      return plan;
    }
    default:
      return Unsplittable(where,
                          "it is not a splittable source (range, from_tensor_slices, list_files, tfrecord, "
                          "text_line, zip, concatenate)");
  }
}

service::SplitPlanRecord SplitPlan::ToRecord() const {
  service::SplitPlanRecord r;
  switch (kind_) {
    case Kind::kElements:
      r.set_kind(service::SplitPlanRecord::ELEMENTS);
      r.set_elements(elements_);
      r.set_split_size(split_size_);
      break;
    case Kind::kFiles:
      r.set_kind(service::SplitPlanRecord::FILES);
      for (const std::string& f : files_) r.add_files(f);
      break;
    case Kind::kConcatenate:
      r.set_kind(service::SplitPlanRecord::CONCATENATE);
      for (const SplitPlan& p : inputs_) *r.add_inputs() = p.ToRecord();
      break;
  }
  return r;
}

absl::StatusOr<SplitPlan> SplitPlan::FromRecord(const service::SplitPlanRecord& record) {
  // Pipelines nest at most kMaxPipelineDepth deep; a deeper record is corrupt.
  std::function<absl::StatusOr<SplitPlan>(const service::SplitPlanRecord&, int)> from =
      [&](const service::SplitPlanRecord& r, int depth) -> absl::StatusOr<SplitPlan> {
    if (depth > 64) return absl::DataLossError("split plan record: nested too deep");
    SplitPlan plan;
    switch (r.kind()) {
      case service::SplitPlanRecord::ELEMENTS:
        if (r.elements() < 0 || r.split_size() < 1) {
          return absl::DataLossError(
              fmt::format("split plan record: {} elements in splits of {}", r.elements(), r.split_size()));
        }
        plan.kind_ = Kind::kElements;
        plan.elements_ = r.elements();
        plan.split_size_ = r.split_size();
        return plan;
      case service::SplitPlanRecord::FILES:
        plan.kind_ = Kind::kFiles;
        plan.files_.assign(r.files().begin(), r.files().end());
        return plan;
      case service::SplitPlanRecord::CONCATENATE:
        plan.kind_ = Kind::kConcatenate;
        for (const service::SplitPlanRecord& input : r.inputs()) {
          TFD_ASSIGN_OR_RETURN(SplitPlan sub, from(input, depth + 1));
          plan.inputs_.push_back(std::move(sub));
        }
        return plan;
      default:
        return absl::DataLossError(fmt::format("split plan record: unknown kind {}", static_cast<int>(r.kind())));
    }
  };
  return from(record, 0);
}

int64_t SplitPlan::num_splits() const {
  switch (kind_) {
    case Kind::kElements: return (elements_ + split_size_ - 1) / split_size_;
    case Kind::kFiles: return static_cast<int64_t>(files_.size());
    case Kind::kConcatenate: {
      int64_t n = 0;
      for (const SplitPlan& p : inputs_) n += p.num_splits();
      return n;
    }
  }
  return 0;
}

Split SplitPlan::Get(int64_t index) const {
  Split s;
  s.set_index(index);
  switch (kind_) {
    case Kind::kElements:
      s.set_begin(index * split_size_);
      s.set_end(std::min(elements_, (index + 1) * split_size_));
      break;
    case Kind::kFiles: s.set_file(files_.at(static_cast<size_t>(index))); break;
    case Kind::kConcatenate: {
      int64_t offset = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        const int64_t n = inputs_[i].num_splits();
        if (index < offset + n) {
          s.set_input(static_cast<int32_t>(i));
          *s.mutable_inner() = inputs_[i].Get(index - offset);
          break;
        }
        offset += n;
      }
      break;
    }
  }
  return s;
}

absl::StatusOr<Pipeline> SourcePipelineForSplit(const Op& source, const Split& split) {
  Pipeline out;
  const auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        fmt::format("split {} does not fit the {} source: {}", split.index(), OpKindName(source), why));
  };
  switch (source.kind_case()) {
    case Op::kRange: {
      if (split.begin() < 0 || split.end() < split.begin()) return bad("bad element range");
      const auto& r = source.range();
      const int64_t step = r.has_step() ? r.step() : 1;
      auto* range = out.add_op()->mutable_range();
      range->set_start(r.start() + split.begin() * step);
      range->set_stop(r.start() + split.end() * step);
      range->set_step(step);
      return out;
    }
    case Op::kFromTensorSlices:
      if (split.begin() < 0 || split.end() < split.begin()) return bad("bad element range");
      *out.add_op() = source;
      out.add_op()->mutable_skip()->set_count(split.begin());
      out.add_op()->mutable_take()->set_count(split.end() - split.begin());
      return out;
    case Op::kTfrecord:
    case Op::kTextLine: {
      if (split.file().empty()) return bad("no file");
      Op op = source;
      auto* files = op.has_tfrecord() ? op.mutable_tfrecord()->mutable_file() : op.mutable_text_line()->mutable_file();
      files->Clear();
      files->Add(std::string(split.file()));
      *out.add_op() = std::move(op);
      return out;
    }
    case Op::kListFiles: {
      if (split.file().empty()) return bad("no file");
      auto* t = out.add_op()->mutable_from_tensor_slices()->add_tensor();
      t->set_dtype(pipeline::STRING);
      t->add_shape(1);
      t->add_string_values(split.file());
      return out;
    }
    case Op::kZip: {
      Op op = source;
      for (auto& in : *op.mutable_zip()->mutable_input()) {
        if (in.op_size() != 1) return bad("zip input is not a bare source");
        TFD_ASSIGN_OR_RETURN(Pipeline sub, SourcePipelineForSplit(in.op(0), split));
        in = std::move(sub);
      }
      *out.add_op() = std::move(op);
      return out;
    }
    case Op::kConcatenate: {
      if (split.input() < 0 || split.input() >= source.concatenate().input_size()) return bad("no such input");
      const Pipeline& in = source.concatenate().input(split.input());
      if (in.op_size() == 0) return bad("empty input");
      TFD_ASSIGN_OR_RETURN(out, SourcePipelineForSplit(in.op(0), split.inner()));
      for (int i = 1; i < in.op_size(); ++i) *out.add_op() = in.op(i);
      return out;
    }
    default: return bad("not a splittable source");
  }
}

namespace {

class SplitSourceDataset : public Dataset {
 public:
  SplitSourceDataset(ElementSpec spec, std::shared_ptr<SplitProvider> provider,
                     std::function<absl::StatusOr<DatasetPtr>(const Split&)> make)
      : Dataset("split_source", std::move(spec)), provider_(std::move(provider)), make_(std::move(make)) {}

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    return std::make_unique<It>(this, ctx, provider_->StartEpoch());
  }

 private:
  class It : public Iterator {
   public:
    It(const SplitSourceDataset* ds, IteratorContext ctx, int64_t epoch)
        : ds_(ds), ctx_(std::move(ctx)), epoch_(epoch) {
      const ElementSpec& spec = ds->spec();
      if (!spec.unknown && spec.components.size() == 1 && spec.components[0].dtype != DType::kString) {
        const TensorSpec& c = spec.components[0];
        bool known = true;
        for (int64_t d : c.shape) known = known && d >= 0;
        if (known) element_bytes_ = static_cast<int64_t>(DTypeSize(c.dtype)) * NumElements(c.shape);
      }
    }

    absl::StatusOr<bool> Next(Element* out) override {
      while (true) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(ctx_.cancellation.get()));
        TFD_ASSIGN_OR_RETURN(bool have, EnsureSplit());
        if (!have) return false;
        TFD_ASSIGN_OR_RETURN(bool more, current_->Next(out));
        if (more) return true;
        current_.reset();
      }
    }

    absl::StatusOr<int64_t> NextBulk(int64_t max, uint8_t* dst) override {
      if (element_bytes_ <= 0) return -1;
      int64_t total = 0;
      while (total < max) {
        TFD_ASSIGN_OR_RETURN(bool have, EnsureSplit());
        if (!have) break;
        TFD_ASSIGN_OR_RETURN(int64_t n, current_->NextBulk(max - total, dst + total * element_bytes_));
        if (n < 0) {
          if (total == 0) return -1;  // this source has no bulk path; nothing consumed
          break;
        }
        total += n;
        if (total < max) current_.reset();  // fewer than asked: the split is exhausted
      }
      return total;
    }

   private:
    absl::StatusOr<bool> EnsureSplit() {
      if (current_) return true;
      if (done_) return false;
      TFD_ASSIGN_OR_RETURN(auto split, ds_->provider_->Next(epoch_));
      if (!split) {
        done_ = true;
        return false;
      }
      TFD_ASSIGN_OR_RETURN(split_dataset_, ds_->make_(*split));
      TFD_ASSIGN_OR_RETURN(current_, split_dataset_->MakeIterator(ctx_));
      return true;
    }

    const SplitSourceDataset* ds_;
    const IteratorContext ctx_;
    const int64_t epoch_;
    int64_t element_bytes_ = 0;
    DatasetPtr split_dataset_;
    std::unique_ptr<Iterator> current_;
    bool done_ = false;
  };

  std::shared_ptr<SplitProvider> provider_;
  std::function<absl::StatusOr<DatasetPtr>(const Split&)> make_;
};

}  // namespace

DatasetPtr MakeSplitSourceDataset(ElementSpec spec, std::shared_ptr<SplitProvider> provider,
                                  std::function<absl::StatusOr<DatasetPtr>(const Split&)> make) {
  return std::make_shared<SplitSourceDataset>(std::move(spec), std::move(provider), std::move(make));
}

absl::StatusOr<DatasetPtr> BuildSplitFedDataset(const Pipeline& pipeline, const BuildOptions& options,
                                                std::shared_ptr<SplitProvider> provider, const PipelineSource& source) {
  // The whole pipeline first: validation, with errors that point into it.
  TFD_RETURN_IF_ERROR(BuildDataset(pipeline, options, source).status());
  const Op& first = pipeline.op(0);
  TFD_ASSIGN_OR_RETURN(auto source_dataset, BuildOne(first, options));
  auto make = [first, options](const Split& split) -> absl::StatusOr<DatasetPtr> {
    TFD_ASSIGN_OR_RETURN(Pipeline p, SourcePipelineForSplit(first, split));
    return BuildDataset(p, options);
  };
  DatasetPtr fed = MakeSplitSourceDataset(source_dataset->spec(), std::move(provider), std::move(make));
  Pipeline rest;
  for (int i = 1; i < pipeline.op_size(); ++i) *rest.add_op() = pipeline.op(i);
  return BuildDatasetOn(rest, std::move(fed), options, source);
}

}  // namespace tfdata
