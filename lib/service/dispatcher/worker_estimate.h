// The live worker estimate: from what a job's readers consumed and waited over the last seconds,
// how many workers would make them stop waiting. `tfdata bench` estimates the same offline; this
// is it made continuously from real traffic (tfdata_job_workers_recommended, the status page),
// for an autoscaler to act on. docs/operations.md, "The worker estimate", explains the model.
//
// Pure functions and a plain value type: no locks, no clocks.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace tfdata::service {

// What one reader did over a window: the changes of its ReaderStats totals.
struct ReaderWindow {
  double elements = 0, bytes = 0;
  double wait_seconds = 0;     // inside Next(), waiting for an element
  double elapsed_seconds = 0;  // the window's length as the reader measured it
};

struct JobEstimate {
  double elements_per_second = 0, bytes_per_second = 0;  // all readers together
  std::optional<double> stall_fraction;                  // unset without a reader window
  int32_t workers_recommended = 1;
};

// Readers waiting less than this share of their time are not input-bound: the estimate keeps the
// current number (noise in a well-fed job must not make an autoscaler add workers).
inline constexpr double kStallThreshold = 0.1;
// The estimate's ceiling: a reader that does nothing but read wants as many workers as it can get.
inline constexpr int32_t kMaxWorkersRecommended = 1024;

// The model: the workers deliver what the readers receive, D = sum(elements / elapsed), at a rate
// per worker of D / n. Reader i would consume elements / (elapsed - wait) if it never waited (its
// own time per element). The job needs n * demand / D workers, rounded up: n / (1 - stall) for a
// single reader. At least 1; the current number when the readers do not wait (or nothing arrived
// to measure from).
JobEstimate EstimateWorkers(int32_t current_workers, const std::vector<ReaderWindow>& readers);

}  // namespace tfdata::service
