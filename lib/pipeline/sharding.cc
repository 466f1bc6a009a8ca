#include "lib/pipeline/sharding.h"

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/splits.h"

namespace tfdata {
namespace {

using pipeline::Op;
using pipeline::Pipeline;
using service::ProcessingMode;

bool IsFileSource(const Op& op) { return op.has_tfrecord() || op.has_text_line() || op.has_list_files(); }

// file_or_data resolved against the pipeline.
ProcessingMode Resolve(const Pipeline& p, ProcessingMode mode) {
  if (mode != service::SHARD_FILE_OR_DATA) return mode;
  return p.op_size() > 0 && IsFileSource(p.op(0)) ? service::SHARD_FILE : service::SHARD_DATA;
}

void SetHints(Pipeline* p, int64_t n, int64_t index) {
  for (Op& op : *p->mutable_op()) {
    if (op.has_shard() && op.shard().hint()) {
      op.mutable_shard()->set_num_shards(n);
      op.mutable_shard()->set_index(index);
    }
    if (op.has_zip()) {
      for (Pipeline& in : *op.mutable_zip()->mutable_input()) SetHints(&in, n, index);
    }
    if (op.has_concatenate()) {
      for (Pipeline& in : *op.mutable_concatenate()->mutable_input()) SetHints(&in, n, index);
    }
    if (op.has_interleave()) SetHints(op.mutable_interleave()->mutable_pipeline(), n, index);
  }
}

}  // namespace

bool IsStaticSharding(ProcessingMode mode) {
  return mode == service::SHARD_FILE || mode == service::SHARD_DATA || mode == service::SHARD_FILE_OR_DATA ||
         mode == service::SHARD_HINT;
}

absl::Status CheckStaticSharding(const Pipeline& p, ProcessingMode mode, int64_t n, const BuildOptions& options) {
  if (p.op_size() == 0) return absl::InvalidArgumentError("the pipeline has no ops");
  if (n <= 0) return absl::InvalidArgumentError("static sharding needs at least one worker");
  if (Resolve(p, mode) != service::SHARD_FILE) return absl::OkStatus();
  const Op& source = p.op(0);
  if (!IsFileSource(source)) {
    return absl::InvalidArgumentError(fmt::format(
        "file sharding needs a file source (tfrecord, text_line or list_files) as op 0, not {}", OpKindName(source)));
  }
  if (source.has_list_files() && source.list_files().shuffle() && !source.list_files().has_seed()) {
    return absl::InvalidArgumentError(
        "file sharding: op 0 (list_files) shuffles without a seed, so the workers would see different orders "
        "and overlapping shards; give it a seed");
  }
  TFD_ASSIGN_OR_RETURN(auto plan, SplitPlan::Create(p, options));
  if (plan.num_splits() < n) {
    return absl::InvalidArgumentError(
        fmt::format("file sharding: op 0 ({}) has {} file(s) for {} workers; every worker needs at least one file",
                    OpKindName(source), plan.num_splits(), n));
  }
  return absl::OkStatus();
}

absl::StatusOr<Pipeline> ApplyStaticSharding(const Pipeline& p, ProcessingMode mode, int64_t n, int64_t index) {
  if (n <= 0 || index < 0 || index >= n) {
    return absl::InvalidArgumentError(fmt::format("static sharding: worker index {} of {} workers", index, n));
  }
  if (p.op_size() == 0) return absl::InvalidArgumentError("the pipeline has no ops");
  Pipeline out = p;
  switch (Resolve(p, mode)) {
    case service::SHARD_FILE: {
      Op& source = *out.mutable_op(0);
      if (source.has_list_files()) {
        Op shard;
        shard.mutable_shard()->set_num_shards(n);
        shard.mutable_shard()->set_index(index);
        out.mutable_op()->Add(std::move(shard));
        // Move the new op from the end to position 1, right after list_files.
        for (int i = out.op_size() - 1; i > 1; --i) out.mutable_op()->SwapElements(i, i - 1);
        return out;
      }
      if (!source.has_tfrecord() && !source.has_text_line()) {
        return absl::InvalidArgumentError(fmt::format("file sharding needs a file source, not {}", OpKindName(source)));
      }
      auto* files = source.has_tfrecord() ? source.mutable_tfrecord()->mutable_file()
                                          : source.mutable_text_line()->mutable_file();
      google::protobuf::RepeatedPtrField<std::string> mine;
      for (int i = 0; i < files->size(); ++i) {
        if (i % n == index) *mine.Add() = files->Get(i);
      }
      files->Swap(&mine);
      return out;
    }
    case service::SHARD_DATA: {
      auto* shard = out.add_op()->mutable_shard();
      shard->set_num_shards(n);
      shard->set_index(index);
      return out;
    }
    case service::SHARD_HINT: SetHints(&out, n, index); return out;
    default:
      return absl::InvalidArgumentError(
          fmt::format("static sharding: {} is not a static sharding mode", service::ProcessingMode_Name(mode)));
  }
}

}  // namespace tfdata
