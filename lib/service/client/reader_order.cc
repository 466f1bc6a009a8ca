// Reader's deterministic order (issue 22): entries wait in the reorder buffer until their split
// is next in the job's order; see reader.h.
#include <algorithm>

#include "lib/service/client/reader.h"

namespace tfdata::service {

void Reader::ReorderLocked(Ready r) {
  if (!r.split_end) r.bytes = static_cast<int64_t>(ElementByteSize(r.element));
  ++reorder_elements_;
  reorder_bytes_ += r.bytes;
  max_reorder_bytes_ = std::max(max_reorder_bytes_, reorder_bytes_);
  ++reorder_by_task_[r.task_id];
  reorder_[{r.epoch, r.split}].push_back(std::move(r));
}

void Reader::ReleaseInOrderLocked() {
  while (true) {
    auto it = reorder_.find(next_split_);
    if (it == reorder_.end()) {
      // Nothing of the next split yet; unless the read is over, when what is left goes in order.
      if (reorder_.empty() || !DoneLocked()) return;
      it = reorder_.begin();
    }
    bool ended = false;
    while (!it->second.empty() && !ended) {
      Ready& r = it->second.front();
      ended = r.split_end;
      --reorder_elements_;
      reorder_bytes_ -= r.bytes;
      if (--reorder_by_task_[r.task_id] == 0) reorder_by_task_.erase(r.task_id);
      ReadyLocked(std::move(r));
      it->second.pop_front();
    }
    if (!ended) return;  // the rest of the split is still to come
    reorder_.erase(it);
    AdvanceSplitLocked();
  }
}

void Reader::AdvanceSplitLocked() {
  const int64_t n = progress_.num_splits();
  if (n <= 0) return;
  while (true) {
    if (++next_split_.second >= n) next_split_ = {next_split_.first + 1, 0};
    if (!resumed_from_) return;
    // A split the resumed read had handed out in full does not come again.
    if (next_split_.first < resumed_from_->first_epoch()) continue;
    if (!resumed_from_->Done(next_split_.first, next_split_.second)) return;
  }
}

bool Reader::ReadyFullLocked() const {
  return static_cast<int64_t>(ready_.size()) + taken_elements_ >= options_.buffer_elements ||
         ready_bytes_ + taken_bytes_ >= options_.buffer_bytes;
}

bool Reader::MayOverfillLocked(int64_t task_id) const {
  // What is in order may fill the buffer once more; beyond that, wait for the consumer. The
  // splits waiting their turn are bounded by the buffer too, plus one response per task.
  if (ReadyFullLocked()) return false;
  if (!reorder_by_task_.contains(task_id)) return true;
  // Every live task has entries waiting: the next split is behind one of them (a split produced
  // again after its worker was lost comes after the task's later splits).
  for (const auto& [id, ts] : tasks_) {
    if (!ts.ended && !reorder_by_task_.contains(id)) return false;
  }
  return true;
}

int64_t Reader::max_reorder_bytes() const {
  absl::MutexLock lock(&mu_);
  return max_reorder_bytes_;
}

}  // namespace tfdata::service
