#include "lib/service/worker/task_buffer.h"

#include <algorithm>
#include <utility>

namespace tfdata::service {

std::optional<int64_t> TaskBuffer::AwaitRoom() {
  auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return cancelled_ || (static_cast<int64_t>(buffer_.size()) < max_elements_ && buffered_bytes_ < max_bytes_);
  };
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&has_room));
  if (cancelled_) return std::nullopt;
  return max_elements_ - static_cast<int64_t>(buffer_.size());
}

void TaskBuffer::Push(std::vector<Buffered>& batch) {
  if (batch.empty()) return;
  absl::MutexLock lock(&mu_);
  for (Buffered& b : batch) {
    buffered_bytes_ += b.bytes;
    buffer_.push_back(std::move(b));
  }
  batch.clear();
}

void TaskBuffer::Finish(absl::Status error) {
  absl::MutexLock lock(&mu_);
  if (!error.ok()) error_ = std::move(error);
  done_ = true;
}

void TaskBuffer::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
}

bool TaskBuffer::Await(size_t n, absl::Time deadline) {
  auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.size() >= n || done_ || cancelled_; };
  return mu_.AwaitWithDeadline(absl::Condition(&ready), deadline);
}

Element TaskBuffer::Pop() { return PopEntry().element; }

TaskBuffer::Buffered TaskBuffer::PopEntry() {
  Buffered b = std::move(buffer_.front());
  buffer_.pop_front();
  buffered_bytes_ -= b.bytes;
  max_popped_tag_ = std::max(max_popped_tag_, b.tag);
  if (!b.split_end) ++next_index_;
  return b;
}

}  // namespace tfdata::service
