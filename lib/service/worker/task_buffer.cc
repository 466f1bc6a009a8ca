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

Element TaskBuffer::Pop() {
  buffered_bytes_ -= buffer_.front().bytes;
  max_popped_tag_ = std::max(max_popped_tag_, buffer_.front().tag);
  Element e = std::move(buffer_.front().element);
  buffer_.pop_front();
  ++next_index_;
  return e;
}

}  // namespace tfdata::service
