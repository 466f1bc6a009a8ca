#include "lib/pipeline/builder.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/names.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

using google::protobuf::TextFormat;
using pipeline::Op;

const TextFormat::ParseInfoTree* Nested(const TextFormat::ParseInfoTree* tree, const google::protobuf::Message& msg,
                                        const char* field, int index) {
  if (!tree) return nullptr;
  const auto* fd = msg.GetDescriptor()->FindFieldByName(field);
  if (!fd) return nullptr;
  // ParseInfoTree indexes repeated fields only; singular fields use -1.
  return tree->GetTreeForNested(fd, fd->is_repeated() ? index : -1);
}

Compression FromProto(pipeline::Compression c) {
  switch (c) {
    case pipeline::GZIP: return Compression::kGzip;
    case pipeline::ZLIB: return Compression::kZlib;
    default: return Compression::kNone;
  }
}

class Builder {
 public:
  Builder(const BuildOptions& options, const PipelineSource& source) : options_(options), source_(source) {}

  // Builds `p` on top of `upstream` (null for a top-level pipeline). `tree` locates p's fields.
  absl::StatusOr<DatasetPtr> Chain(const pipeline::Pipeline& p, DatasetPtr upstream,
                                   const TextFormat::ParseInfoTree* tree, const std::string& path) {
    if (p.op_size() == 0) {
      nested_error_ = true;
      return absl::InvalidArgumentError(
          fmt::format("{}: {}: the pipeline has no ops", source_.name, path.empty() ? "pipeline" : path));
    }
    const bool upstream_given = upstream != nullptr;
    DatasetPtr current = std::move(upstream);
    const auto* op_field = pipeline::Pipeline::descriptor()->FindFieldByName("op");
    for (int i = 0; i < p.op_size(); ++i) {
      const Op& op = p.op(i);
      const std::string where = fmt::format("{}op {} ({})", path.empty() ? "" : path + " > ", i, OpKindName(op));
      // What a Python function receives is named by the pipeline before it (a top-level one).
      op_input_names_.reset();
      if (!upstream_given && UsesPython(op)) {
        pipeline::Pipeline before;
        for (int k = 0; k < i; ++k) *before.add_op() = p.op(k);
        op_input_names_ = NamesOf(before, std::nullopt);
      }
      auto built = BuildOp(op, current, Nested(tree, p, "op", i), where);
      if (!built.ok()) {
        if (nested_error_) return built.status();
        nested_error_ = true;
        std::string loc = source_.name + ":";
        if (tree) {
          const auto l = tree->GetLocation(op_field, i);
          if (l.line >= 0) loc += fmt::format("{}:{}:", l.line + 1, l.column + 1);
        }
        return absl::Status(built.status().code(),
                            fmt::format("{} {}: {}", loc, where, std::string(built.status().message())));
      }
      current = *std::move(built);
    }
    return current;
  }

 private:
  static bool UsesPython(const Op& op) {
    const auto* fns = op.has_map()        ? &op.map().fn()
                      : op.has_filter()   ? &op.filter().fn()
                      : op.has_flat_map() ? &op.flat_map().fn()
                                          : nullptr;
    if (fns == nullptr) return false;
    for (const auto& fn : *fns) {
      if (IsPythonFunction(fn)) return true;
    }
    return false;
  }

  MemoryScope Memory(const std::string& where) const { return MemoryScope{options_.memory, where}; }

  absl::StatusOr<std::vector<std::shared_ptr<const Function>>> Functions(
      const google::protobuf::RepeatedPtrField<pipeline::Function>& specs, const std::string& where,
      bool predicate = false, bool flat = false, ComponentNames names = std::nullopt) {
    if (flat && (specs.empty() || !IsPythonFunction(specs[specs.size() - 1]))) {
      return absl::InvalidArgumentError(
          "flat_map's last `fn` must be a python function that returns a list of elements");
    }
    std::vector<std::shared_ptr<const Function>> fns;
    for (int j = 0; j < specs.size(); ++j) {
      FunctionOptions fn_options = options_.functions;
      fn_options.memory = Memory(fmt::format("{} > fn {} ({})", where, j, FunctionKindName(specs[j])));
      fn_options.paths = options_.paths;
      fn_options.input_names = DistinctNames(names);
      names = NamesAfterFunction(names, specs[j]);
      // A filter's last function is its predicate: a Python one returns a bool.
      const bool last_python = j == specs.size() - 1 && IsPythonFunction(specs[j]);
      auto fn = last_python && (predicate || flat)
                    ? MakePython(specs[j].python(), fn_options,
                                 predicate ? PythonCallKind::kFilter : PythonCallKind::kFlatMap)
                    : CreateFunction(specs[j], fn_options);
      if (!fn.ok()) {
        return absl::Status(fn.status().code(), fmt::format("fn {} ({}): {}", j, FunctionKindName(specs[j]),
                                                            std::string(fn.status().message())));
      }
      fns.push_back(std::shared_ptr<const Function>(std::move(fn).value()));
    }
    return fns;
  }

  absl::StatusOr<std::vector<DatasetPtr>> Inputs(const google::protobuf::RepeatedPtrField<pipeline::Pipeline>& inputs,
                                                 const google::protobuf::Message& parent,
                                                 const TextFormat::ParseInfoTree* parent_tree,
                                                 const std::string& where) {
    std::vector<DatasetPtr> out;
    for (int j = 0; j < inputs.size(); ++j) {
      TFD_ASSIGN_OR_RETURN(auto d, Chain(inputs[j], nullptr, Nested(parent_tree, parent, "input", j),
                                         fmt::format("{} > input {}", where, j)));
      out.push_back(std::move(d));
    }
    return out;
  }

  static absl::Status NeedsUpstream(const DatasetPtr& in, const char* kind) {
    if (!in) {
      return absl::InvalidArgumentError(
          fmt::format("a pipeline must start with a source (range, from_tensor_slices, list_files, tfrecord, "
                      "text_line, zip, concatenate), not {}",
                      kind));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<DatasetPtr> BuildOp(const Op& op, const DatasetPtr& in, const TextFormat::ParseInfoTree* tree,
                                     const std::string& where) {
    const std::string kind = OpKindName(op);
    const bool source_only = op.has_range() || op.has_from_tensor_slices() || op.has_list_files();
    if (source_only && in) {
      return absl::InvalidArgumentError(fmt::format("{} is a source; it can only be the first op of a pipeline", kind));
    }
    switch (op.kind_case()) {
      case Op::kRange:
        return MakeRangeDataset(op.range().start(), op.range().stop(), op.range().has_step() ? op.range().step() : 1);
      case Op::kFromTensorSlices: {
        std::vector<Tensor> tensors;
        for (int j = 0; j < op.from_tensor_slices().tensor_size(); ++j) {
          auto t = TensorFromProto(op.from_tensor_slices().tensor(j));
          if (!t.ok())
            return absl::InvalidArgumentError(fmt::format("tensor {}: {}", j, std::string(t.status().message())));
          tensors.push_back(*std::move(t));
        }
        return MakeFromTensorSlicesDataset(std::move(tensors));
      }
      case Op::kListFiles: {
        const auto& lf = op.list_files();
        return MakeListFilesDataset({lf.pattern().begin(), lf.pattern().end()}, lf.shuffle(), lf.has_seed(), lf.seed(),
                                    options_.paths);
      }
      case Op::kTfrecord:
        return MakeFileRecordsDataset(FileFormat::kTFRecord, in,
                                      {op.tfrecord().file().begin(), op.tfrecord().file().end()},
                                      FromProto(op.tfrecord().compression()), options_.paths);
      case Op::kTextLine:
        return MakeFileRecordsDataset(FileFormat::kTextLine, in,
                                      {op.text_line().file().begin(), op.text_line().file().end()},
                                      FromProto(op.text_line().compression()), options_.paths);
      case Op::kZip:
      case Op::kConcatenate: {
        const bool zip = op.has_zip();
        const auto& msg = zip ? static_cast<const google::protobuf::Message&>(op.zip()) : op.concatenate();
        TFD_ASSIGN_OR_RETURN(auto inputs, Inputs(zip ? op.zip().input() : op.concatenate().input(), msg,
                                                 Nested(tree, op, zip ? "zip" : "concatenate", 0), where));
        if (in) inputs.insert(inputs.begin(), in);
        return zip ? MakeZipDataset(std::move(inputs)) : MakeConcatenateDataset(std::move(inputs));
      }
      case Op::kMap: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "map"));
        TFD_ASSIGN_OR_RETURN(auto fns, Functions(op.map().fn(), where, false, false, op_input_names_));
        return MakeMapDataset(in, std::move(fns), op.map().num_parallel_calls(),
                              op.map().has_deterministic() ? op.map().deterministic() : true);
      }
      case Op::kFilter: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "filter"));
        TFD_ASSIGN_OR_RETURN(auto fns, Functions(op.filter().fn(), where, /*predicate=*/true, false, op_input_names_));
        return MakeFilterDataset(in, std::move(fns));
      }
      case Op::kFlatMap: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "flat_map"));
        TFD_ASSIGN_OR_RETURN(auto fns,
                             Functions(op.flat_map().fn(), where, /*predicate=*/false, /*flat=*/true, op_input_names_));
        return MakeFlatMapDataset(in, std::move(fns));
      }
      case Op::kBatch:
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "batch"));
        return MakeBatchDataset(in, op.batch().batch_size(), op.batch().drop_remainder(), Memory(where));
      case Op::kPaddedBatch: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "padded_batch"));
        std::vector<Shape> shapes;
        for (const auto& dims : op.padded_batch().padded_shape())
          shapes.emplace_back(dims.dim().begin(), dims.dim().end());
        return MakePaddedBatchDataset(in, op.padded_batch().batch_size(), op.padded_batch().drop_remainder(),
                                      std::move(shapes), op.padded_batch().padding_value(), Memory(where));
      }
      case Op::kUnbatch: TFD_RETURN_IF_ERROR(NeedsUpstream(in, "unbatch")); return MakeUnbatchDataset(in);
      case Op::kShuffle: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "shuffle"));
        const auto& s = op.shuffle();
        return MakeShuffleDataset(in, s.buffer_size(), s.has_seed(), s.seed(),
                                  s.has_reshuffle_each_iteration() ? s.reshuffle_each_iteration() : true,
                                  Memory(where));
      }
      case Op::kRepeat:
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "repeat"));
        return MakeRepeatDataset(in, op.repeat().has_count() ? op.repeat().count() : -1);
      case Op::kTake: TFD_RETURN_IF_ERROR(NeedsUpstream(in, "take")); return MakeTakeDataset(in, op.take().count());
      case Op::kSkip: TFD_RETURN_IF_ERROR(NeedsUpstream(in, "skip")); return MakeSkipDataset(in, op.skip().count());
      case Op::kCache:
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "cache"));
        return MakeCacheDataset(in, op.cache().filename(), Memory(where), options_.paths);
      case Op::kPrefetch:
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "prefetch"));
        return MakePrefetchDataset(in, op.prefetch().buffer_size(), Memory(where));
      case Op::kInterleave: {
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "interleave"));
        const auto& il = op.interleave();
        const auto* il_tree = Nested(tree, op, "interleave", 0);
        TFD_ASSIGN_OR_RETURN(auto body, Chain(il.pipeline(), MakeInputElementDataset(in->spec()),
                                              Nested(il_tree, il, "pipeline", 0), where + " > pipeline"));
        return MakeInterleaveDataset(in, std::move(body), il.cycle_length(), il.block_length(), il.num_parallel_calls(),
                                     il.has_deterministic() ? il.deterministic() : true);
      }
      case Op::kShard:
        TFD_RETURN_IF_ERROR(NeedsUpstream(in, "shard"));
        return MakeShardDataset(in, op.shard().num_shards(), op.shard().index());
      case Op::KIND_NOT_SET: break;
    }
    return absl::InvalidArgumentError("op has no kind (expected e.g. `op { range { stop: 10 } }`)");
  }

  const BuildOptions& options_;
  const PipelineSource& source_;
  ComponentNames op_input_names_;  // of the op being built, when it has a Python function
  bool nested_error_ = false;      // an inner Chain already formatted the error with its location
};

}  // namespace

std::string OpKindName(const pipeline::Op& op) {
  const auto* fd = pipeline::Op::descriptor()->FindFieldByNumber(op.kind_case());
  return fd ? fd->name() : "unset";
}

std::string FunctionKindName(const pipeline::Function& fn) {
  const auto* fd = pipeline::Function::descriptor()->FindFieldByNumber(fn.kind_case());
  return fd ? fd->name() : "unset";
}

absl::StatusOr<DatasetPtr> BuildDataset(const pipeline::Pipeline& pipeline, const BuildOptions& options,
                                        const PipelineSource& source) {
  PipelineSource src = source;
  if (src.name.empty()) src.name = "<pipeline>";
  Builder builder(options, src);
  return builder.Chain(pipeline, nullptr, src.locations, "");
}

absl::StatusOr<DatasetPtr> BuildDatasetOn(const pipeline::Pipeline& pipeline, DatasetPtr input,
                                          const BuildOptions& options, const PipelineSource& source) {
  if (pipeline.op_size() == 0) return input;
  PipelineSource src = source;
  if (src.name.empty()) src.name = "<pipeline>";
  Builder builder(options, src);
  return builder.Chain(pipeline, std::move(input), nullptr, "");
}

}  // namespace tfdata
