// A latency histogram that the cores keep for operators (lib/service/metrics exports it as a
// Prometheus histogram): fixed buckets from 50 µs to 10 s, lock-free. Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/time/time.h"

namespace tfdata::service {

class LatencyHistogram {
 public:
  // Upper bounds of the buckets, in seconds (the last bucket, +Inf, is implicit).
  static constexpr std::array<double, 14> kBounds = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,    0.025,  0.05,    0.1,    0.25,  1.0,    10.0};

  void Record(absl::Duration d);

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound of kBounds: observations <= it
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  Snapshot Get() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<int64_t> sum_nanos_{0};
};

}  // namespace tfdata::service
