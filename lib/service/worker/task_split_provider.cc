#include "lib/service/worker/task_split_provider.h"

#include <algorithm>

#include "lib/core/status_macros.h"

namespace tfdata::service {

absl::StatusOr<std::optional<Split>> TaskSplitProvider::Next(int64_t epoch) {
  if (epoch != queue_epoch_) {
    queue_.clear();
    queue_epoch_ = epoch;
  }
  if (queue_.empty()) {
    GetSplitsRequest req;
    req.set_task_id(task_id_);
    req.set_epoch(epoch);
    const absl::Time now = absl::Now();
    if (last_fetch_ != absl::InfinitePast()) {
      if (now - last_fetch_ < absl::Milliseconds(50)) batch_ = std::min(batch_ * 2, 16);
      if (now - last_fetch_ > absl::Milliseconds(500)) batch_ = std::max(batch_ / 2, 2);
    }
    last_fetch_ = now;
    req.set_max_splits(batch_);
    req.set_splits_received(received_);
    GetSplitsResponse resp;
    while (true) {
      // The dispatcher may be briefly unreachable: retry for a while before failing the task.
      absl::Status st;
      const absl::Time give_up = absl::Now() + retry_;
      for (absl::Duration backoff = absl::Milliseconds(50); !cancelled_.HasBeenNotified();
           backoff = std::min(backoff * 2, absl::Seconds(1))) {
        resp.Clear();
        st = dispatcher_->GetSplits(req, &resp);
        // A partition times calls out rather than refusing them: both are the dispatcher out of
        // reach. A repeated request is safe: it says how many splits arrived, and the dispatcher
        // repeats an answer that was lost.
        const bool unreachable = absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st);
        if (st.ok() || !unreachable || absl::Now() >= give_up) break;
        cancelled_.WaitForNotificationWithTimeout(backoff);
      }
      if (cancelled_.HasBeenNotified()) return std::nullopt;
      TFD_RETURN_IF_ERROR(st);
      // Exactly once: the epoch is not settled yet (splits of it may come back to the pool); this
      // waits as long as the readers take to confirm them, which the task's Cancel() cuts short.
      if (resp.splits_size() > 0 || resp.end_of_splits() || resp.retry_after_ms() <= 0) break;
      cancelled_.WaitForNotificationWithTimeout(absl::Milliseconds(std::min(resp.retry_after_ms(), 1000)));
    }
    received_ += resp.splits_size();
    for (Split& s : *resp.mutable_splits()) queue_.push_back(std::move(s));
    if (queue_.empty()) return std::nullopt;  // end of the epoch's splits
  }
  Split s = std::move(queue_.front());
  queue_.pop_front();
  started_.fetch_add(1);
  return s;
}

}  // namespace tfdata::service
