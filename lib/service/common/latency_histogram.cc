#include "lib/service/common/latency_histogram.h"

#include <algorithm>

namespace tfdata::service {

void LatencyHistogram::Record(absl::Duration d) {
  const double s = absl::ToDoubleSeconds(d);
  const size_t bucket = static_cast<size_t>(std::lower_bound(kBounds.begin(), kBounds.end(), s) - kBounds.begin());
  buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Get() const {
  Snapshot s;
  uint64_t running = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    running += buckets_[i].load(std::memory_order_relaxed);
    if (i < kBounds.size()) s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum_seconds = static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) * 1e-9;
  return s;
}

}  // namespace tfdata::service
