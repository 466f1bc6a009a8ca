// Turns a Pipeline proto into a validated Dataset graph.
//
// Building is validation: every op checks its arguments and the element types flowing into it
// (dtypes, ranks, component counts) and errors name where the problem is: for text pipelines
// "FILE:LINE:COL: op 3 (batch): ...", otherwise "FILE: op 3 (batch): ...". Nested pipelines
// (zip/concatenate inputs, interleave bodies) are named by path: "op 2 > input 1 > op 0".
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/text_format.h"
#include "lib/functions/function.h"
#include "lib/pipeline/dataset.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

struct BuildOptions {
  FunctionOptions functions;
  // What the pipeline may hold (one budget per task; null: DefaultMemoryBudget()). Ops that keep
  // elements, and functions' outputs, are checked against it.
  std::shared_ptr<MemoryBudget> memory;
  // The files the pipeline may open (worker --allowed-path); null: any.
  std::shared_ptr<const PathPolicy> paths;
};

// Where a pipeline came from, for error messages. `locations` (text format only) may be null.
struct PipelineSource {
  std::string name;  // file path or "<inline>"
  const google::protobuf::TextFormat::ParseInfoTree* locations = nullptr;
};

absl::StatusOr<DatasetPtr> BuildDataset(const pipeline::Pipeline& pipeline, const BuildOptions& options,
                                        const PipelineSource& source = {});

// Builds `pipeline`'s ops on top of `input`, which stands in for whatever precedes them (an empty
// pipeline returns `input`).
absl::StatusOr<DatasetPtr> BuildDatasetOn(const pipeline::Pipeline& pipeline, DatasetPtr input,
                                          const BuildOptions& options, const PipelineSource& source = {});

// The op's kind as written in pipeline text ("range", "batch", ...).
std::string OpKindName(const pipeline::Op& op);
// The function's kind as written in pipeline text ("decode_jpeg", ...).
std::string FunctionKindName(const pipeline::Function& fn);

}  // namespace tfdata
