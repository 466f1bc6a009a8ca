// The `tfdata bench` impact estimate, after the tf.data service guide: measure the pipeline as
// it is, then with take(1).cache().repeat() appended (the first element replayed forever: what
// a consumer gets when input costs nothing), and compare both with how fast the model consumes.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/pipeline/dataset.h"
#include "proto/pipeline.pb.h"

namespace tfdata {

struct Throughput {
  int64_t elements = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double elements_per_s() const { return seconds > 0 ? static_cast<double>(elements) / seconds : 0; }
  double bytes_per_s() const { return seconds > 0 ? static_cast<double>(bytes) / seconds : 0; }
};

// Iterates `dataset` for `warmup_s` (not counted) and then `duration_s` seconds, starting a new
// pass whenever one ends (a finite pipeline is repeated). Stops early when *stop becomes true.
absl::StatusOr<Throughput> MeasureThroughput(const Dataset& dataset, double warmup_s, double duration_s,
                                             const std::atomic<bool>* stop = nullptr);

// Calls `next` (e.g. a service reader's Next) for `warmup_s` (not counted) and then `duration_s`
// seconds, or until it returns false (the end of the data) or *stop becomes true.
absl::StatusOr<Throughput> MeasureReads(const std::function<absl::StatusOr<bool>(Element*)>& next, double warmup_s,
                                        double duration_s, const std::atomic<bool>* stop = nullptr);

// `pipeline` followed by take(1), cache(), repeat().
pipeline::Pipeline WithReplayFirstElement(const pipeline::Pipeline& pipeline);
// `pipeline` followed by repeat(): endless, for measuring through the service.
pipeline::Pipeline WithRepeat(const pipeline::Pipeline& pipeline);

struct ImpactReport {
  Throughput pipeline;  // the pipeline in this process
  Throughput replay;    // with take(1).cache().repeat()
  // Measured through a live cluster (`--dispatcher`): the pipeline repeated, read by one reader.
  struct Service {
    Throughput throughput;
    int64_t workers = 0;
    std::string dispatcher;
  };
  std::optional<Service> service;
  std::optional<double> model_rate;  // elements/s the model consumes when input is free
  int cores = 1;
  // Filled when model_rate is known:
  bool input_bound = false;
  double training_rate_now = 0;      // min(model, pipeline)
  double training_rate_service = 0;  // min(model, replay): the rate with enough workers
  double speedup = 1;
  int64_t workers_needed = 1;
  std::vector<std::string> assumptions;
};

ImpactReport ComputeImpact(const Throughput& pipeline, const Throughput& replay, std::optional<double> model_rate,
                           int cores);
// A readable table; and one JSON object for scripts.
std::string FormatImpactTable(const ImpactReport& report);
std::string FormatImpactJson(const ImpactReport& report);

}  // namespace tfdata
