#include "lib/service/client/job_membership.h"

#include <algorithm>
#include <utility>

#include "lib/core/status_macros.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

bool IsTransportError(const absl::Status& st) { return absl::IsUnavailable(st) || absl::IsDeadlineExceeded(st); }

double StallFraction(const ReaderStats& stats) {
  return stats.elapsed_seconds() > 0 ? std::min(1.0, stats.wait_seconds() / stats.elapsed_seconds()) : 0.0;
}

ReaderStats JobMembership::Stats() const {
  absl::MutexLock lock(&mu_);
  return StatsLocked();
}

ReaderStats JobMembership::StatsLocked() const {
  ReaderStats s;
  s.set_elements(stats_.elements + unlocked_elements_.load(std::memory_order_relaxed));
  s.set_bytes(stats_.bytes + unlocked_bytes_.load(std::memory_order_relaxed));
  const absl::Time now = absl::Now();
  const absl::Duration waiting = waiting_since_ < now ? now - waiting_since_ : absl::ZeroDuration();
  s.set_wait_seconds(absl::ToDoubleSeconds(stats_.wait + waiting));
  s.set_elapsed_seconds(absl::ToDoubleSeconds(now - started_));
  return s;
}

JobMembership::JobMembership(std::unique_ptr<DispatcherClient> dispatcher, absl::Duration heartbeat_interval,
                             std::string heartbeat_failed)
    : dispatcher_(std::move(dispatcher)),
      heartbeat_interval_(heartbeat_interval),
      heartbeat_failed_(std::move(heartbeat_failed)) {}

absl::StatusOr<GetOrCreateJobResponse> JobMembership::Join(const GetOrCreateJobRequest& req) {
  GetOrCreateJobResponse resp;
  TFD_RETURN_IF_ERROR(dispatcher_->GetOrCreateJob(req, &resp));
  client_id_ = resp.client_id();
  return resp;
}

absl::Status JobMembership::Start(int num_fetchers) {
  if (auto st = HeartbeatOnce(); !st.ok()) {
    Leave();
    return st;
  }
  threads_.emplace_back([this] { HeartbeatLoop(); });
  for (int i = 0; i < num_fetchers; ++i) threads_.emplace_back([this] { FetchLoop(); });
  return absl::OkStatus();
}

void JobMembership::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
  }
  for (auto& t : threads_) t.join();
  threads_.clear();
  ReleaseClientQuietly(*dispatcher_, client_id_);
}

void JobMembership::HeartbeatLoop() {
  bool failing = false;
  absl::Time last = absl::Now();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || !error_.ok() || DoneLocked(); };
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !error_.ok() || DoneLocked() || heartbeat_soon_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&wake), heartbeat_interval_ - (absl::Now() - last));
      if (stop()) return;
      // Asked early: not sooner than kMinHeartbeatGap after the last one.
      if (const absl::Duration gap = absl::Now() - last; gap < kMinHeartbeatGap) {
        if (mu_.AwaitWithTimeout(absl::Condition(&stop), kMinHeartbeatGap - gap)) return;
      }
      heartbeat_soon_ = false;
    }
    last = absl::Now();
    absl::Status st = HeartbeatOnce();
    if (!st.ok() && !failing) spdlog::warn("{}: {}", heartbeat_failed_, st.ToString());
    failing = !st.ok();
  }
}

}  // namespace tfdata::service
