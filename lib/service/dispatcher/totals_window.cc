#include "lib/service/dispatcher/totals_window.h"

namespace tfdata::service {

void TotalsWindow::Add(absl::Time at, const Values& totals) {
  if (!samples_.empty()) {
    const Values& last = samples_.back().second;
    for (int i = 0; i < kValues; ++i) {
      if (totals[i] < last[i]) {
        samples_.clear();
        break;
      }
    }
  }
  samples_.emplace_back(at, totals);
  // Keep one sample at or before the window's start, so the change spans the whole window.
  while (samples_.size() > 2 && samples_[1].first <= at - span_) samples_.pop_front();
  while (samples_.size() > kMaxSamples) samples_.pop_front();
}

std::optional<TotalsWindow::Change> TotalsWindow::Get(absl::Time now) const {
  if (samples_.size() < 2 || samples_.back().first < now - span_) return std::nullopt;
  Change c;
  for (int i = 0; i < kValues; ++i) c.values[i] = samples_.back().second[i] - samples_.front().second[i];
  c.over = samples_.back().first - samples_.front().first;
  return c;
}

}  // namespace tfdata::service
