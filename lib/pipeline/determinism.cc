#include "lib/pipeline/determinism.h"

#include <string>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/builder.h"

namespace tfdata {
namespace {

using pipeline::Function;
using pipeline::Op;

class Checker {
 public:
  explicit Checker(const std::string& what) : what_(what) {}

  absl::Status Pipeline(const pipeline::Pipeline& p, const std::string& path) {
    for (int i = 0; i < p.op_size(); ++i) {
      const Op& op = p.op(i);
      TFD_RETURN_IF_ERROR(OneOp(op, fmt::format("{}op {} ({})", path.empty() ? "" : path + " > ", i, OpKindName(op))));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Refuse(const std::string& where, const std::string& why) const {
    return absl::InvalidArgumentError(fmt::format("{}: {} need a deterministic pipeline: {}", where, what_, why));
  }

  absl::Status Inputs(const google::protobuf::RepeatedPtrField<pipeline::Pipeline>& inputs, const std::string& where) {
    for (int j = 0; j < inputs.size(); ++j)
      TFD_RETURN_IF_ERROR(Pipeline(inputs[j], fmt::format("{} > input {}", where, j)));
    return absl::OkStatus();
  }

  absl::Status Functions(const google::protobuf::RepeatedPtrField<Function>& fns, const std::string& where) {
    for (int k = 0; k < fns.size(); ++k) {
      const Function& fn = fns[k];
      const std::string at = fmt::format("{} > fn {} ({})", where, k, FunctionKindName(fn));
      switch (fn.kind_case()) {
        case Function::kRandomCrop:
          if (!fn.random_crop().has_seed()) return Refuse(at, "give it a `seed`");
          break;
        case Function::kRandomFlipLeftRight:
          if (!fn.random_flip_left_right().has_seed()) return Refuse(at, "give it a `seed`");
          break;
        case Function::kPlugin: return Refuse(at, "a plugin's output cannot be known to be deterministic");
        case Function::kPython: return Refuse(at, "a Python function's output cannot be known to be deterministic");
        default: break;
      }
    }
    return absl::OkStatus();
  }

  static bool Parallel(int64_t calls) { return calls < 0 || calls > 1; }

  absl::Status OneOp(const Op& op, const std::string& where) {
    switch (op.kind_case()) {
      case Op::kListFiles:
        if (op.list_files().shuffle() && !op.list_files().has_seed()) {
          return Refuse(where, "shuffle without a `seed` lists the files in a new order on every run");
        }
        break;
      case Op::kShuffle:
        if (!op.shuffle().has_seed()) return Refuse(where, "a shuffle without a `seed` has a new order on every run");
        break;
      case Op::kMap:
        if (Parallel(op.map().num_parallel_calls()) && op.map().has_deterministic() && !op.map().deterministic()) {
          return Refuse(where, "parallel calls with `deterministic: false` let elements overtake each other");
        }
        return Functions(op.map().fn(), where);
      case Op::kFilter: return Functions(op.filter().fn(), where);
      case Op::kFlatMap: return Functions(op.flat_map().fn(), where);
      case Op::kInterleave:
        if (Parallel(op.interleave().num_parallel_calls()) && op.interleave().has_deterministic() &&
            !op.interleave().deterministic()) {
          return Refuse(where, "parallel calls with `deterministic: false` let inputs overtake each other");
        }
        return Pipeline(op.interleave().pipeline(), where);
      case Op::kZip: return Inputs(op.zip().input(), where);
      case Op::kConcatenate: return Inputs(op.concatenate().input(), where);
      default: break;
    }
    return absl::OkStatus();
  }

  const std::string& what_;
};

}  // namespace

absl::Status CheckDeterministic(const pipeline::Pipeline& pipeline, const std::string& what) {
  return Checker(what).Pipeline(pipeline, "");
}

}  // namespace tfdata
