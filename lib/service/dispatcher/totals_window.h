// Rates from heartbeats: each heartbeat brings a sender's totals since it started (elements,
// bytes, seconds); a window keeps the samples of the last few seconds and gives the change
// between its oldest and newest. Soft state of the dispatcher (like liveness): the status page's
// rates and the worker estimate.
//
// Not thread-safe: the dispatcher keeps windows under its lock.
#pragma once

#include <array>
#include <deque>
#include <optional>
#include <utility>

#include "absl/time/time.h"

namespace tfdata::service {

class TotalsWindow {
 public:
  static constexpr int kValues = 4;
  using Values = std::array<double, kValues>;

  explicit TotalsWindow(absl::Duration span = absl::Seconds(10)) : span_(span) {}

  // A sample taken at `at`. Totals that went down (the sender restarted) start the window again.
  void Add(absl::Time at, const Values& totals);

  struct Change {
    Values values{};
    absl::Duration over;
  };
  // Newest minus oldest sample and the time between them; nullopt before two samples, or when
  // the newest is older than the window as of `now` (a silent sender has no current rate).
  std::optional<Change> Get(absl::Time now) const;

 private:
  // Heartbeats may come every few milliseconds (an exactly-once reader's split ends): the oldest
  // go first past this many, which only shortens the window.
  static constexpr size_t kMaxSamples = 256;
  const absl::Duration span_;
  std::deque<std::pair<absl::Time, Values>> samples_;
};

}  // namespace tfdata::service
