#include "lib/service/dispatcher/worker_estimate.h"

#include <algorithm>
#include <cmath>

namespace tfdata::service {

JobEstimate EstimateWorkers(int32_t current_workers, const std::vector<ReaderWindow>& readers) {
  JobEstimate e;
  const int32_t keep = std::max<int32_t>(1, current_workers);
  e.workers_recommended = keep;
  double wait = 0, elapsed = 0, demand = 0;
  for (const ReaderWindow& r : readers) {
    if (r.elapsed_seconds <= 0) continue;
    const double waited = std::clamp(r.wait_seconds, 0.0, r.elapsed_seconds);
    e.elements_per_second += r.elements / r.elapsed_seconds;
    e.bytes_per_second += r.bytes / r.elapsed_seconds;
    wait += waited;
    elapsed += r.elapsed_seconds;
    // The consumer's own time: at least 1% of the window, so a reader that only reads asks for a
    // large but finite number.
    demand += r.elements / std::max(r.elapsed_seconds - waited, 0.01 * r.elapsed_seconds);
  }
  if (elapsed <= 0) return e;
  e.stall_fraction = wait / elapsed;
  if (*e.stall_fraction < kStallThreshold || e.elements_per_second <= 0) return e;
  if (current_workers <= 0) return e;  // no worker serves the job: one is the first step
  const double needed = std::ceil(current_workers * demand / e.elements_per_second - 1e-9);
  // Never below the current number, and above the ceiling only when the job already has more.
  const double ceiling = std::max<double>(keep, kMaxWorkersRecommended);
  e.workers_recommended = static_cast<int32_t>(std::clamp<double>(needed, keep, ceiling));
  return e;
}

}  // namespace tfdata::service
