#include "lib/service/client/coordinated_reader.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/core/tensor.h"
#include "lib/service/common/names.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

CoordinatedReader::CoordinatedReader(CoordinatedReadOptions options, std::unique_ptr<DispatcherClient> dispatcher)
    : JobMembership(std::move(dispatcher), options.heartbeat_interval, "coordinated reader: heartbeat failed"),
      options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<CoordinatedReader>> CoordinatedReader::Create(
    CoordinatedReadOptions options, std::unique_ptr<DispatcherClient> dispatcher) {
  if (options.num_consumers < 1)
    return absl::InvalidArgumentError("coordinated reads: --num-consumers must be at least 1");
  if (options.max_outstanding_rounds < 1) {
    return absl::InvalidArgumentError("coordinated reads: --max-outstanding-requests must be at least 1");
  }
  std::unique_ptr<CoordinatedReader> r(new CoordinatedReader(std::move(options), std::move(dispatcher)));
  GetOrCreateJobRequest req;
  req.set_dataset_id(r->options_.dataset_id);
  req.set_mode(r->options_.mode);
  req.set_job_name(r->options_.job_name);
  req.set_num_consumers(r->options_.num_consumers);
  req.set_consumer_index(r->options_.consumer_index);
  TFD_RETURN_IF_ERROR(r->Join(req).status());
  if (r->client_id_ == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("coordinated reads: job \"", r->options_.job_name, "\" has ended; pick a new job name"));
  }
  TFD_RETURN_IF_ERROR(r->Start(r->options_.max_outstanding_rounds));
  return r;
}

CoordinatedReader::~CoordinatedReader() { Close(); }

void CoordinatedReader::Close() { Leave(); }

int64_t CoordinatedReader::rounds_substituted() const {
  absl::MutexLock lock(&mu_);
  return substituted_;
}

absl::Status CoordinatedReader::HeartbeatOnce() {
  ClientHeartbeatRequest req;
  req.set_client_id(client_id_);
  req.set_consumer_index(options_.consumer_index);
  {
    absl::MutexLock lock(&mu_);
    req.set_current_round(next_issue_);
    req.set_round_limit(round_limit_);
    *req.mutable_stats() = StatsLocked();
    // Ask for a lease of about four heartbeats of rounds at the current pace.
    req.set_round_window(std::max<int64_t>(16, 4 * (next_issue_ - issued_at_last_heartbeat_)));
    issued_at_last_heartbeat_ = next_issue_;
  }
  ClientHeartbeatResponse resp;
  absl::Status st = dispatcher_->ClientHeartbeat(req, &resp);
  absl::MutexLock lock(&mu_);
  if (!st.ok()) {
    if (absl::IsNotFound(st)) error_ = st;
    return st;
  }
  for (const TaskInfo& t : resp.tasks()) {
    auto it = tasks_.find(t.task_id());
    if (it == tasks_.end()) {
      TaskState ts;
      ts.address = t.worker_address();
      ts.starting_round = t.starting_round();
      ts.ending_round = t.ending_round();
      auto client = MakeDataTransferClient(options_.protocol, t.worker_address());
      if (!client.ok()) {
        error_ = client.status();
        return error_;
      }
      ts.client = *std::move(client);
      it = tasks_.emplace(t.task_id(), std::move(ts)).first;
    } else if (t.ending_round() != 0 && it->second.ending_round == 0) {
      spdlog::warn("coordinated reader: {} on worker {} was lost; it leaves the rotation at round {}",
                   TaskName(t.task_id()), it->second.address, t.ending_round());
      it->second.ending_round = t.ending_round();
    }
  }
  // Applied after the task list, under the same lock: rounds the new limit allows are fetched
  // with the rotation that holds for them.
  round_limit_ = std::max(round_limit_, resp.round_limit());
  return absl::OkStatus();
}

std::pair<int64_t, bool> CoordinatedReader::PickTaskLocked(int64_t round) const {
  std::vector<int64_t> active;  // ordered by task id: the same order for every consumer
  for (const auto& [id, ts] : tasks_) {
    if (ts.starting_round <= round && (ts.ending_round == 0 || round < ts.ending_round)) active.push_back(id);
  }
  if (active.empty()) return {0, false};
  const size_t at = static_cast<size_t>(round % static_cast<int64_t>(active.size()));
  if (tasks_.at(active[at]).ending_round == 0) return {active[at], false};
  for (size_t k = 1; k < active.size(); ++k) {
    const int64_t id = active[(at + k) % active.size()];
    if (tasks_.at(id).ending_round == 0) return {id, true};
  }
  return {0, false};
}

void CoordinatedReader::FetchLoop() {
  while (true) {
    int64_t round = 0;
    {
      absl::MutexLock lock(&mu_);
      auto can_issue = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !error_.ok() ||
               (next_issue_ < round_limit_ && next_issue_ - next_deliver_ < options_.max_outstanding_rounds);
      };
      mu_.Await(absl::Condition(&can_issue));
      if (closed_ || !error_.ok()) return;
      round = next_issue_++;
    }
    int failures = 0;
    while (true) {
      int64_t task_id = 0;
      bool substituted = false;
      DataTransferClient* client = nullptr;
      std::string address;
      {
        absl::MutexLock lock(&mu_);
        if (closed_ || !error_.ok()) return;
        std::tie(task_id, substituted) = PickTaskLocked(round);
        if (task_id != 0) {
          client = tasks_.at(task_id).client.get();
          address = tasks_.at(task_id).address;
        }
      }
      if (client == nullptr) {  // no worker yet (or every one lost): wait for the dispatcher
        absl::SleepFor(absl::Milliseconds(20));
        continue;
      }
      GetElementsRequest req;
      req.set_task_id(task_id);
      req.set_client_id(client_id_);
      req.set_round_index(round);
      req.set_consumer_index(options_.consumer_index);
      req.set_max_elements(1);
      req.set_timeout_ms(200);  // short, so Close() is prompt
      auto result = client->GetElements(req);
      if (result.ok() && !result->elements.empty()) {
        absl::MutexLock lock(&mu_);
        if (substituted) ++substituted_;
        fetched_[round] = Fetched{std::move(result->elements.front()), RoundInfo{round, task_id, address, substituted}};
        break;
      }
      if (result.ok() && result->end_of_sequence) {
        result = absl::FailedPreconditionError(
            absl::StrCat(TaskName(task_id), " on worker ", address,
                         " ended its stream: coordinated reads need an infinite pipeline"));
      }
      if (result.ok()) continue;  // the worker had nothing within the time-out: ask again
      if (absl::IsNotFound(result.status())) {
        absl::SleepFor(absl::Milliseconds(20));  // the worker has not heard of the task yet
        continue;
      }
      if (IsTransportError(result.status())) {
        // Retried until the dispatcher declares the worker lost; the round then moves on.
        if (failures++ == 0) {
          spdlog::warn("coordinated reader: round {} on worker {}: {}", round, address, result.status().ToString());
        }
        absl::SleepFor(std::min(absl::Milliseconds(50) * failures, absl::Milliseconds(500)));
        continue;
      }
      absl::MutexLock lock(&mu_);
      if (error_.ok()) error_ = result.status();
      return;
    }
  }
}

absl::StatusOr<bool> CoordinatedReader::Next(Element* out, RoundInfo* info) {
  TFD_ASSIGN_OR_RETURN(const std::optional<bool> more, NextWithin(out, absl::InfiniteDuration(), info));
  return *more;
}

absl::StatusOr<std::optional<bool>> CoordinatedReader::NextWithin(Element* out, absl::Duration timeout,
                                                                  RoundInfo* info) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return fetched_.contains(next_deliver_) || !error_.ok() || closed_;
  };
  const bool must_wait = !ready();
  if (must_wait) BeginWaitLocked();
  const bool came = mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (must_wait) EndWaitLocked();
  if (!came) return std::nullopt;
  auto it = fetched_.find(next_deliver_);
  if (it == fetched_.end()) {
    TFD_RETURN_IF_ERROR(error_);
    return false;
  }
  *out = std::move(it->second.element);
  CountHandedOutLocked(static_cast<int64_t>(ElementByteSize(*out)));
  if (info != nullptr) *info = std::move(it->second.info);
  fetched_.erase(it);
  ++next_deliver_;
  return true;
}

}  // namespace tfdata::service
