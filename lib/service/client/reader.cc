#include "lib/service/client/reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/client/read_state.h"
#include "lib/service/common/host_util.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/common/names.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

// A worker that fails this many fetches in a row (connection refused, time-out) is given up.
constexpr int kMaxFailures = 3;

}  // namespace

bool IsLocalWorker(const std::string& address) { return FindLocalWorker(address) != nullptr || IsThisHost(address); }

TargetWorkers ResolveTargetWorkers(TargetWorkers target) {
  if (target != TARGET_WORKERS_AUTO) return target;
  return AnyLocalWorker() ? TARGET_WORKERS_LOCAL : TARGET_WORKERS_ANY;
}

bool TaskTargeted(const TaskInfo& task, TargetWorkers resolved, const std::string& worker_tag) {
  if (!worker_tag.empty() &&
      std::find(task.worker_tags().begin(), task.worker_tags().end(), worker_tag) == task.worker_tags().end()) {
    return false;
  }
  return resolved != TARGET_WORKERS_LOCAL || IsLocalWorker(task.worker_address());
}

Reader::Reader(ReaderOptions options, std::unique_ptr<DispatcherClient> dispatcher)
    : JobMembership(std::move(dispatcher), options.heartbeat_interval,
                    "reader: heartbeat failed (reading goes on from known workers)"),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Reader>> Reader::Create(ReaderOptions options,
                                                       std::unique_ptr<DispatcherClient> dispatcher) {
  if (options.max_outstanding_requests < 1) {
    return absl::InvalidArgumentError("--max-outstanding-requests must be at least 1");
  }
  if (options.cross_trainer_cache && options.trainer_id.empty()) {
    return absl::InvalidArgumentError("--cross-trainer-cache needs a --trainer-id naming this trainer");
  }
  if (!options.cross_trainer_cache && !options.trainer_id.empty()) {
    return absl::InvalidArgumentError("--trainer-id needs --cross-trainer-cache");
  }
  if (options.deterministic && (!options.exactly_once || !options.job_name.empty())) {
    return absl::InvalidArgumentError(
        "deterministic order needs exactly-once reads (--exactly-once, exactly_once=True) and a reader alone in "
        "its job (no job name): readers sharing a job each get some of its splits");
  }
  if (!options.resume.empty() && !options.exactly_once && !IsStaticSharding(options.mode)) {
    return absl::InvalidArgumentError(
        "resuming from a read state needs exactly-once reads (--exactly-once, exactly_once=True) in "
        "distributed_epoch, or static sharding");
  }
  std::optional<ResumePlan> resume;
  int64_t elements_before = 0;
  if (!options.resume.empty()) {
    TFD_ASSIGN_OR_RETURN(resume, MergeReadStates(options.resume, &elements_before));
  }
  std::unique_ptr<Reader> r(new Reader(std::move(options), std::move(dispatcher)));
  r->target_ = ResolveTargetWorkers(r->options_.target_workers);
  GetOrCreateJobRequest req;
  if (resume) *req.mutable_resume() = *resume;
  req.set_dataset_id(r->options_.dataset_id);
  req.set_mode(r->options_.mode);
  req.set_job_name(r->options_.job_name);
  req.set_cross_trainer_cache(r->options_.cross_trainer_cache);
  req.set_exactly_once(r->options_.exactly_once);
  TFD_ASSIGN_OR_RETURN(GetOrCreateJobResponse resp, r->Join(req));
  r->job_id_ = resp.job_id();
  r->warning_ = resp.warning();
  if (r->options_.exactly_once) {
    absl::MutexLock lock(&r->mu_);
    r->dataset_fingerprint_ = resp.dataset_fingerprint();
    r->plan_fingerprint_ = resp.plan_fingerprint();
    r->progress_ = ReadProgress(resp.num_splits());
    // The first split in order: a resumed read skips what it had done.
    if (resume) TFD_RETURN_IF_ERROR(r->SeedResumeLocked(*resume, resp.num_splits(), elements_before));
    if (r->options_.deterministic) {
      // Position on the first split of the order that is not done.
      --r->next_split_.second;
      r->AdvanceSplitLocked();
    }
  } else if (IsStaticSharding(r->options_.mode)) {
    absl::MutexLock lock(&r->mu_);
    r->dataset_fingerprint_ = resp.dataset_fingerprint();
    r->shard_progress_ = ShardReadProgress(resp.num_shards());
    if (resume) TFD_RETURN_IF_ERROR(r->SeedShardResumeLocked(*resume, elements_before));
  }
  TFD_RETURN_IF_ERROR(r->Start(r->options_.max_outstanding_requests));
  return r;
}

Reader::~Reader() { Close(); }

void Reader::Close() { Leave(); }

int64_t Reader::tasks_dropped() const {
  absl::MutexLock lock(&mu_);
  return tasks_dropped_;
}

int64_t Reader::splits_lost() const {
  absl::MutexLock lock(&mu_);
  // The dispatcher's count covers every task: a floor only for a reader that reads them all.
  const bool reads_every_task = target_ != TARGET_WORKERS_LOCAL && options_.worker_tag.empty();
  return reads_every_task ? std::max(splits_lost_, dispatcher_splits_lost_) : splits_lost_;
}

int64_t Reader::elements_skipped() const {
  absl::MutexLock lock(&mu_);
  return elements_skipped_;
}

int64_t Reader::duplicates_dropped() const {
  absl::MutexLock lock(&mu_);
  return ledger_.duplicates_dropped();
}

std::vector<std::string> Reader::dropped_workers() const {
  absl::MutexLock lock(&mu_);
  return {dropped_workers_.begin(), dropped_workers_.end()};
}

void Reader::DropLocked(TaskState& ts) {
  ts.ended = true;
  ts.dropped = true;
  ++tasks_dropped_;
  dropped_workers_.insert(ts.address);
  splits_lost_ += ts.splits_undelivered;
  DeliverLocked(ts, /*all=*/true);
}

int64_t Reader::num_tasks() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(tasks_.size());
}

absl::Status Reader::HeartbeatOnce() {
  ClientHeartbeatRequest req;
  req.set_client_id(client_id_);
  {
    // Reported once, whether or not this heartbeat gets through (the dispatcher may be the
    // unreachable one; the read must not wait on it).
    absl::MutexLock lock(&mu_);
    for (const std::string& w : unreported_) req.add_unreachable_workers(w);
    unreported_.clear();
    *req.mutable_stats() = StatsLocked();
    if (options_.exactly_once) {
      // Built under the same lock as the in-flight list: every answer not listed there is in the
      // receipts.
      for (SplitReceipt& r : ledger_.Receipts()) *req.add_split_receipts() = std::move(r);
      for (const auto& [id, ts] : tasks_) {
        if (!ts.in_flight.empty() || !ts.held.empty()) req.add_tasks_in_flight(id);
      }
    }
  }
  ClientHeartbeatResponse resp;
  absl::Status st = dispatcher_->ClientHeartbeat(req, &resp);
  absl::MutexLock lock(&mu_);
  if (!st.ok()) {
    if (absl::IsNotFound(st)) {
      error_ =
          absl::NotFoundError(absl::StrCat("the dispatcher no longer knows this reader's job (it restarted "
                                           "without --fault-tolerant, or released this reader): ",
                                           st.message()));
      return error_;
    }
    return st;
  }
  if (dispatcher_incarnation_ != 0 && resp.incarnation_id() != dispatcher_incarnation_) {
    spdlog::warn("reader: the dispatcher restarted and still knows this reader's job (fault-tolerant): carrying on");
  }
  dispatcher_incarnation_ = resp.incarnation_id();
  heard_ = true;
  for (const SplitId& s : resp.splits_confirmed()) ledger_.Forget(s.epoch(), s.split());
  dispatcher_splits_lost_ = std::max(dispatcher_splits_lost_, resp.splits_lost());
  listed_tasks_.clear();
  for (const TaskInfo& t : resp.tasks()) {
    if (!TaskTargeted(t, target_, options_.worker_tag)) continue;
    listed_tasks_.push_back(t.task_id());
    if (auto known = tasks_.find(t.task_id()); known != tasks_.end()) {
      TaskState& ts = known->second;
      if (!ts.ended) {
        ts.splits_undelivered = t.splits_undelivered();
      } else if (ts.dropped && t.splits_undelivered() > ts.splits_undelivered) {
        // Splits handed to the dead worker after the heartbeat the drop counted from (the
        // dispatcher was down meanwhile, say): they are lost too.
        splits_lost_ += t.splits_undelivered() - ts.splits_undelivered;
        ts.splits_undelivered = t.splits_undelivered();
      }
      continue;
    }
    TaskState ts;
    ts.id = t.task_id();
    ts.shard = t.shard_index();
    ts.address = t.worker_address();
    ts.splits_undelivered = t.splits_undelivered();
    auto client = MakeDataTransferClient(options_.protocol, t.worker_address());
    if (!client.ok()) {
      spdlog::warn("reader: skipping {} on worker {}: {}", TaskName(t.task_id()), t.worker_address(),
                   client.status().ToString());
      ts.ended = true;
      ts.dropped = true;
      ++tasks_dropped_;
      dropped_workers_.insert(ts.address);
      last_drop_error_ = std::string(client.status().message());
      splits_lost_ += ts.splits_undelivered;
    } else {
      ts.client = *std::move(client);
    }
    tasks_.emplace(t.task_id(), std::move(ts));
  }
  // A task the dispatcher dropped (its worker was lost) is not read any further.
  for (auto& [id, ts] : tasks_) {
    if (!ts.ended && std::find(listed_tasks_.begin(), listed_tasks_.end(), id) == listed_tasks_.end()) {
      spdlog::warn("reader: {} on worker {} was removed by the dispatcher", TaskName(id), ts.address);
      DropLocked(ts);
    }
  }
  iteration_finished_ = resp.iteration_finished();
  only_untargeted_ = resp.tasks_size() > 0 && listed_tasks_.empty() && tasks_.empty();
  if (only_untargeted_) {
    const absl::Time now = absl::Now();
    untargeted_since_ = std::min(untargeted_since_, now);
    if (now - untargeted_since_ > options_.untargeted_timeout) {
      std::string workers;
      for (const TaskInfo& t : resp.tasks()) absl::StrAppend(&workers, workers.empty() ? "" : ", ", t.worker_address());
      error_ = absl::FailedPreconditionError(
          absl::StrCat("none of the job's workers (", workers, ") is ",
                       target_ == TARGET_WORKERS_LOCAL ? "local (in this process or on this host)" : "a worker",
                       options_.worker_tag.empty() ? "" : absl::StrCat(" with tag \"", options_.worker_tag, "\""),
                       ": check --target-workers / --worker-tag"));
      return error_;
    }
  } else {
    untargeted_since_ = absl::InfiniteFuture();
  }
  return absl::OkStatus();
}

bool Reader::DoneLocked() const {
  if (!heard_ || only_untargeted_) return false;  // nothing to read yet: wait for a targeted worker (or the error)
  bool all_ended = true;
  for (int64_t id : listed_tasks_) all_ended = all_ended && tasks_.at(id).ended;
  // No tasks yet means no worker has joined: wait, unless the iteration has already finished.
  // Workers given up on are reported first (one more heartbeat), so that later reads skip them.
  return all_ended && (iteration_finished_ || !listed_tasks_.empty()) && unreported_.empty();
}

bool Reader::FullLocked() const {
  return static_cast<int64_t>(ready_.size()) + reorder_elements_ + taken_elements_ >= options_.buffer_elements ||
         ready_bytes_ + reorder_bytes_ + taken_bytes_ >= options_.buffer_bytes;
}

void Reader::FetchLoop() {
  while (true) {
    int64_t task_id = -1, request = 0;
    DataTransferClient* client = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto pick = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (closed_ || !error_.ok() || DoneLocked()) return true;
        const bool full = FullLocked();
        if (full && !options_.deterministic) return false;
        const absl::Time now = absl::Now();
        // Round robin over the tasks, starting after the one picked last.
        auto it = tasks_.upper_bound(next_task_cursor_);
        for (size_t n = 0; n < tasks_.size(); ++n, ++it) {
          if (it == tasks_.end()) it = tasks_.begin();
          TaskState& ts = it->second;
          if (!ts.ended && static_cast<int>(ts.in_flight.size()) < options_.max_requests_per_task &&
              ts.retry_after <= now && (!full || MayOverfillLocked(it->first))) {
            task_id = it->first;
            return true;
          }
        }
        return false;
      };
      // Re-check periodically: retry_after deadlines pass without a state change.
      while (!pick()) fetch_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(20));
      if (task_id < 0) return;
      TaskState& ts = tasks_.at(task_id);
      request = ts.next_request++;
      ts.in_flight.insert(request);
      next_task_cursor_ = task_id;
      client = ts.client.get();
    }
    GetElementsRequest req;
    req.set_task_id(task_id);
    req.set_client_id(client_id_);
    req.set_max_elements(options_.max_elements_per_request);
    req.set_max_bytes(options_.max_bytes_per_request);
    req.set_timeout_ms(200);  // short, so Close() is prompt
    req.set_trainer_id(options_.trainer_id);
    auto result = client->GetElements(req);

    absl::MutexLock lock(&mu_);
    CompleteLocked(task_id, request, std::move(result));
  }
}

namespace {

// A dead worker stays listed until the dispatcher's --worker-timeout: a process that reads again and
// again (a Python trainer, each epoch) would warn about it every time. Warn once per worker per
// process; later give-ups go to the debug log.
bool FirstGiveUp(const std::string& address) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* warned ABSL_GUARDED_BY(mu) = new std::set<std::string>();
  absl::MutexLock lock(&mu);
  return warned->insert(address).second;
}

}  // namespace

void Reader::CompleteLocked(int64_t task_id, int64_t request, absl::StatusOr<GetElementsResult> result) {
  TaskState& ts = tasks_.at(task_id);
  ts.in_flight.erase(request);
  for (HeldResponse& h : ts.held) h.waiting_for.erase(request);
  if (!result.ok()) {
    if (IsTransportError(result.status())) {
      if (++ts.failures >= kMaxFailures && !ts.ended && options_.exactly_once) {
        // Exactly once: what the task holds is reachable only through its worker, so the reader
        // keeps asking until the dispatcher removes the task (its splits then go to other
        // workers). The dispatcher hears of the failures, to suspect the worker.
        if (ts.failures == kMaxFailures) {
          spdlog::warn("reader: {} on worker {} is unreachable; retrying until the dispatcher declares it lost: {}",
                       TaskName(task_id), ts.address, result.status().ToString());
          unreported_.insert(ts.address);
        }
      } else if (ts.failures >= kMaxFailures && !ts.ended) {
        if (FirstGiveUp(ts.address)) {
          spdlog::warn("reader: giving up {} on worker {}: {}", TaskName(task_id), ts.address,
                       result.status().ToString());
        } else {
          spdlog::debug("reader: giving up {} on worker {} (unreachable, warned before): {}", TaskName(task_id),
                        ts.address, result.status().ToString());
        }
        last_drop_error_ = std::string(result.status().message());
        DropLocked(ts);
        unreported_.insert(ts.address);
      }
      ts.retry_after = absl::Now() + absl::Milliseconds(50 * std::min(ts.failures, 20));
    } else if (absl::IsNotFound(result.status())) {
      // The worker has not heard of the task yet (it learns of it at its next heartbeat).
      ts.retry_after = absl::Now() + absl::Milliseconds(20);
    } else if (error_.ok()) {
      error_ = result.status();
    }
  } else {
    ts.failures = 0;
    elements_skipped_ += result->elements_skipped;
    ts.held.push_back(HeldResponse{*std::move(result), ts.in_flight});
  }
  DeliverLocked(ts, /*all=*/ts.ended);
}

void Reader::ReadyLocked(Ready r) {
  if (!r.split_end) r.bytes = static_cast<int64_t>(ElementByteSize(r.element));
  ready_bytes_ += r.bytes;
  ready_.push_back(std::move(r));
}

void Reader::DeliverLocked(TaskState& ts, bool all) {
  // Deliver, in stream order, every response that nothing in flight can precede.
  std::stable_sort(ts.held.begin(), ts.held.end(), [](const HeldResponse& a, const HeldResponse& b) {
    return a.result.first_index < b.result.first_index;
  });
  size_t released = 0;
  // A response that starts where the delivered stream ends cannot be preceded by anything in
  // flight either: it goes at once, without waiting for a long poll to time out.
  for (; released < ts.held.size() &&
         (all || ts.held[released].waiting_for.empty() || ts.held[released].result.first_index == ts.delivered_index);
       ++released) {
    GetElementsResult& r = ts.held[released].result;
    ts.delivered_index = r.first_index + static_cast<int64_t>(r.elements.size());
    if (r.split_runs.empty()) {
      const bool sharded = IsStaticSharding(options_.mode);
      for (size_t i = 0; i < r.elements.size(); ++i) {
        Ready entry{.element = std::move(r.elements[i])};
        if (sharded) {
          // Its place in the shard's stream (a resumed job's workers leave out what was read before).
          entry.seq = resumed_positions_.Position(ts.shard, r.first_index + static_cast<int64_t>(i));
          entry.shard = ts.shard;
        }
        ReadyLocked(std::move(entry));
      }
    } else {
      // Exactly-once: every element with its position; one this reader already has is dropped.
      size_t next = 0;
      for (const SplitRun& run : r.split_runs) {
        for (int64_t k = 0; k < run.count(); ++k, ++next) {
          if (ledger_.Receive(run.epoch(), run.split(), run.first_seq() + k)) {
            Ready entry{.element = std::move(r.elements[next]),
                        .epoch = run.epoch(),
                        .split = run.split(),
                        .seq = run.first_seq() + k,
                        .task_id = ts.id};
            if (options_.deterministic) {
              ReorderLocked(std::move(entry));
            } else {
              ReadyLocked(std::move(entry));
            }
          }
        }
        if (run.split_end()) {
          ledger_.End(run.epoch(), run.split(), run.first_seq() + run.count());
          // In stream order behind the split's elements: the split counts as handed out in full
          // once Next() has returned them.
          Ready marker{.epoch = run.epoch(),
                       .split = run.split(),
                       .seq = run.first_seq() + run.count(),
                       .split_end = true,
                       .task_id = ts.id};
          if (options_.deterministic) {
            ReorderLocked(std::move(marker));
          } else {
            ReadyLocked(std::move(marker));
          }
          heartbeat_soon_ = true;  // a worker may be waiting on this split's confirmation
        }
      }
    }
    if (r.end_of_sequence) ts.ended = true;
  }
  ts.held.erase(ts.held.begin(), ts.held.begin() + static_cast<std::ptrdiff_t>(released));
  if (options_.deterministic && released > 0) ReleaseInOrderLocked();
}

absl::StatusOr<bool> Reader::Next(Element* out) {
  TFD_ASSIGN_OR_RETURN(const std::optional<bool> more, NextWithin(out, absl::InfiniteDuration()));
  return *more;
}

absl::StatusOr<std::optional<bool>> Reader::NextWithin(Element* out, absl::Duration timeout) {
  if (taken_next_ < taken_.size()) {
    Taken& t = taken_[taken_next_++];
    *out = std::move(t.element);
    CountHandedOutUnlocked(t.bytes);
    return true;
  }
  taken_.clear();
  taken_next_ = 0;
  absl::MutexLock lock(&mu_);
  if (taken_elements_ > 0) {
    // The last batch has been handed out: its room in the buffer is free again.
    const bool was_full = FullLocked();
    taken_elements_ = 0;
    taken_bytes_ = 0;
    if (was_full && !FullLocked()) fetch_cv_.SignalAll();
  }
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !ready_.empty() || !error_.ok() || closed_ || DoneLocked();
  };
  // Read the clock only for a wait: a call that finds an element does not need it.
  std::optional<absl::Time> deadline;
  while (true) {
    const bool must_wait = !ready();
    if (must_wait && !deadline) deadline = absl::Now() + timeout;
    if (must_wait) BeginWaitLocked();
    const bool came = !must_wait || mu_.AwaitWithDeadline(absl::Condition(&ready), *deadline);
    if (must_wait) EndWaitLocked();
    if (!came) return std::nullopt;
    const bool was_full = FullLocked();
    if (options_.deterministic && ready_.empty() && DoneLocked()) ReleaseInOrderLocked();
    TakeMarkersLocked();
    if (was_full && !FullLocked()) fetch_cv_.SignalAll();
    // Only split-end markers were there: wait on.
    if (!ready_.empty() || !error_.ok() || closed_ || DoneLocked()) break;
  }
  if (!ready_.empty()) {
    const bool was_full = FullLocked();
    const bool was_ready_full = ReadyFullLocked();
    Ready& front = ready_.front();
    *out = std::move(front.element);
    if (front.epoch >= 0) progress_.Handed(front.epoch, front.split, front.seq);
    if (front.shard >= 0) shard_progress_.Handed(front.shard, front.seq);
    ready_bytes_ -= front.bytes;
    CountHandedOutLocked(front.bytes);
    // Positions go to progress_ and SaveState; an element without one may wait in taken_.
    auto positionless = [](const Ready& r) { return r.epoch < 0 && r.shard < 0 && !r.split_end; };
    const bool plain = positionless(front);
    ready_.pop_front();
    ++elements_delivered_;
    // A split whose last element this was is handed out in full now, not at the next call.
    TakeMarkersLocked();
    // Elements without a position (progress_ and SaveState need none) are handed out from taken_
    // by the next calls: counted delivered now, their stats as each goes, and in the buffer's
    // bounds until the consumer comes back.
    // (taken_bytes_ is this batch's alone: it was reset on the way in, the last batch all handed out.)
    while (plain && !ready_.empty() && positionless(ready_.front()) && taken_.size() < kMaxTaken &&
           taken_bytes_ < kMaxTakenBytes) {
      Ready& r = ready_.front();
      ready_bytes_ -= r.bytes;
      taken_bytes_ += r.bytes;
      ++taken_elements_;
      taken_.push_back(Taken{std::move(r.element), r.bytes});
      ready_.pop_front();
      ++elements_delivered_;
    }
    // Fetchers blocked on a full buffer resume as soon as there is room (in order: as soon as
    // what is in order leaves room, though later splits still fill the rest).
    if ((was_full && !FullLocked()) || (options_.deterministic && was_ready_full && !ReadyFullLocked())) {
      fetch_cv_.SignalAll();
    }
    return true;
  }
  TFD_RETURN_IF_ERROR(error_);
  if (!closed_ && elements_delivered_ == 0 && tasks_dropped_ > 0 &&
      tasks_dropped_ == static_cast<int64_t>(tasks_.size())) {
    return absl::UnavailableError(absl::StrCat("no element was read: all ", tasks_dropped_,
                                               " task(s) were dropped because their workers could not be "
                                               "reached (",
                                               absl::StrJoin(dropped_workers_, ", "), ")",
                                               last_drop_error_.empty() ? "" : ": ", last_drop_error_,
                                               "; the workers are down, or still registered after "
                                               "dying (the dispatcher forgets them after its --worker-timeout)"));
  }
  return false;
}

void Reader::TakeMarkersLocked() {
  while (!ready_.empty() && ready_.front().split_end) {
    const Ready& m = ready_.front();
    progress_.SplitEnd(m.epoch, m.split, m.seq);
    ready_.pop_front();
  }
}

}  // namespace tfdata::service
