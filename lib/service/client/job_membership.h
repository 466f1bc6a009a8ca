// JobMembership: what Reader and CoordinatedReader share, a client's membership in a job at the
// dispatcher: joining the job (GetOrCreateJob), the first heartbeat, the heartbeat thread and the
// fetch threads, and on Leave() stopping those threads and releasing the client at the dispatcher.
//
// A reader derives from it privately and supplies HeartbeatOnce() and FetchLoop() (and, when its
// read can end, DoneLocked()). Its own state is guarded by mu_, the lock the heartbeat thread
// waits on; closed_ and error_ are the stop signals every thread checks under it.
//
// Ownership and lifetime: it owns the dispatcher client and the threads. The threads call the
// derived class's methods, so the derived destructor must call Leave() (which joins them) before
// its members are destroyed. Thread safety: Join() and Start() are for the creating thread before
// the object is shared; Leave() is thread-safe and idempotent.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/service/common/dispatcher_client.h"

namespace tfdata::service {

// The share of the consumer's time spent waiting in Next() (0 before any time has passed).
double StallFraction(const ReaderStats& stats);

// A fetch that failed for the transport (the worker unreachable, or too slow), not for the data.
bool IsTransportError(const absl::Status& st);

class JobMembership {
 public:
  JobMembership(const JobMembership&) = delete;
  JobMembership& operator=(const JobMembership&) = delete;

  // What the reader's consumer has taken since the reader was made: elements and bytes Next()
  // returned, the time Next() spent waiting for them and the time elapsed (StallFraction). Sent
  // with every heartbeat, for the dispatcher's status and worker estimate. Thread-safe.
  ReaderStats Stats() const;

 protected:
  // `heartbeat_failed` begins the warning logged when heartbeats start failing.
  JobMembership(std::unique_ptr<DispatcherClient> dispatcher, absl::Duration heartbeat_interval,
                std::string heartbeat_failed);
  virtual ~JobMembership() = default;

  // Joins the job: one GetOrCreateJob call (bounded by the client's deadline). Sets client_id_.
  absl::StatusOr<GetOrCreateJobResponse> Join(const GetOrCreateJobRequest& req);
  // Sends the first heartbeat, then starts the heartbeat thread and `num_fetchers` threads running
  // FetchLoop(). When the first heartbeat fails, leaves the job and returns its error.
  absl::Status Start(int num_fetchers);
  // Stops the threads (they see closed_), joins them and releases the client. Idempotent.
  void Leave();

  // One heartbeat: sends it and applies the answer. Called by Start() and the heartbeat thread.
  virtual absl::Status HeartbeatOnce() = 0;
  // A fetch thread's body: returns once closed_ is set or error_ is not OK (or the read is done).
  virtual void FetchLoop() = 0;
  // Whether the read has ended: the heartbeat thread stops then too.
  virtual bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return false; }

  // Next() counts what it hands out and the time it waits for it (only when it has to wait, so
  // that a full buffer costs no clock reads).
  void CountHandedOutLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++stats_.elements;
    stats_.bytes += bytes;
  }
  // The same, for an element handed out without mu_ (the reader's consumer-side batch). Only the
  // consumer thread calls it; Stats() adds these counts from any thread.
  void CountHandedOutUnlocked(int64_t bytes) {
    unlocked_elements_.store(unlocked_elements_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    unlocked_bytes_.store(unlocked_bytes_.load(std::memory_order_relaxed) + bytes, std::memory_order_relaxed);
  }
  // Around a wait in Next(). A wait in progress counts in StatsLocked() already, so a reader
  // blocked through a heartbeat reports it.
  void BeginWaitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { waiting_since_ = absl::Now(); }
  void EndWaitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    stats_.wait += absl::Now() - waiting_since_;
    waiting_since_ = absl::InfiniteFuture();
  }
  ReaderStats StatsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<DispatcherClient> dispatcher_;
  int64_t client_id_ = 0;  // set by Join(), before any thread starts

  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // ends the read
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the reader for a heartbeat before the interval is up (at most one per
  // kMinHeartbeatGap): an exactly-once reader reports a split's end at once, since a worker waits
  // on it to end the epoch.
  bool heartbeat_soon_ ABSL_GUARDED_BY(mu_) = false;
  static constexpr absl::Duration kMinHeartbeatGap = absl::Milliseconds(10);

 private:
  void HeartbeatLoop();

  struct Consumed {
    int64_t elements = 0, bytes = 0;
    absl::Duration wait;
  };
  Consumed stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> unlocked_elements_{0}, unlocked_bytes_{0};
  absl::Time waiting_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // not waiting
  const absl::Time started_ = absl::Now();
  const absl::Duration heartbeat_interval_;
  const std::string heartbeat_failed_;
  std::vector<std::thread> threads_;
};

}  // namespace tfdata::service
