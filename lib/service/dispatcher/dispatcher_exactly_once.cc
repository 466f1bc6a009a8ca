// Exactly-once jobs: readers' receipts confirm delivery split by split, and a lost worker's splits
// are handed out again once the readers' receipts are complete (split_receipts.h).
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/service/common/names.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

std::map<std::pair<int64_t, int64_t>, int64_t> Dispatcher::HoldersLocked(int64_t iteration_id) const {
  std::map<std::pair<int64_t, int64_t>, int64_t> holder;
  for (int64_t t : state_.FindIteration(iteration_id)->tasks) {
    const auto* task = state_.FindTask(t);
    for (size_t k = 0; k < task->outstanding_indices.size(); ++k) {
      holder[{task->outstanding_epochs[k], task->outstanding_indices[k]}] = t;
    }
  }
  return holder;
}

bool Dispatcher::ExactlyOnceLocked(int64_t iteration_id) const {
  const auto* iteration = state_.FindIteration(iteration_id);
  if (iteration == nullptr) return false;
  const auto* job = state_.FindJob(iteration->job_id);
  return job != nullptr && job->exactly_once;
}

absl::Status Dispatcher::ConfirmReceiptsLocked(const ClientHeartbeatRequest& req, int64_t iteration_id,
                                               ClientHeartbeatResponse* resp) {
  const auto* iteration = state_.FindIteration(iteration_id);
  // Where each split in flight is: held by a live task, or pooled for re-issue. Any other split a
  // reader names is settled (delivered, or never handed out): the reader may forget it.
  const std::map<std::pair<int64_t, int64_t>, int64_t> holder = HoldersLocked(iteration_id);
  std::set<std::pair<int64_t, int64_t>> pooled;
  for (const auto& [epoch, indices] : iteration->returned_splits) {
    for (int64_t i : indices) pooled.insert({epoch, i});
  }
  auto confirm = [&](int64_t epoch, int64_t split) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    SplitId* id = resp->add_splits_confirmed();
    id->set_epoch(epoch);
    id->set_split(split);
    receipts_.Forget(iteration_id, epoch, split);
  };
  std::map<std::pair<int64_t, int64_t>, std::set<int64_t>> complete;  // (task, epoch) -> splits
  for (const SplitReceipt& r : req.split_receipts()) {
    const std::pair<int64_t, int64_t> key{r.epoch(), r.split()};
    auto h = holder.find(key);
    if (h == holder.end() && !pooled.contains(key)) {
      confirm(r.epoch(), r.split());
      continue;
    }
    // A pooled split stays pooled even when complete: it goes out again with everything skipped,
    // and its new task's end marker then confirms it.
    if (receipts_.Add(iteration_id, r) && h != holder.end()) complete[{h->second, r.epoch()}].insert(r.split());
  }
  for (const auto& [task_epoch, splits] : complete) {
    Update u;
    auto* d = u.mutable_deliver_splits();
    d->set_task_id(task_epoch.first);
    d->set_epoch(task_epoch.second);
    for (int64_t s : splits) d->add_indices(s);
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
    for (int64_t s : splits) confirm(task_epoch.second, s);
  }
  bool clean = true;
  for (int64_t t : req.tasks_in_flight()) clean = clean && iteration->tasks.contains(t);
  receipts_.ClientReported(iteration_id, req.client_id(), clean);
  receipts_.ClientHeard(iteration_id, req.client_id(), iteration->clients);
  return RequeueStalledLocked(iteration_id);
}

void Dispatcher::NoteServedEndsLocked(const TaskProgress& progress, const std::string& worker) {
  const auto* task = state_.FindTask(progress.task_id());
  if (task == nullptr || task->worker_address != worker || !ExactlyOnceLocked(task->iteration_id)) return;
  const absl::Time now = absl::Now();
  for (const SplitReceipt& end : progress.served_ends()) {
    // Only splits the task still holds: a confirmed one is settled, a requeued one is not its own.
    if (task->FindOutstanding(end.epoch(), end.split())) {
      receipts_.Served(task->iteration_id, end.epoch(), end.split(), end.count(), now);
    }
  }
}

absl::Status Dispatcher::RequeueStalledLocked(int64_t iteration_id) {
  const std::vector<std::pair<int64_t, int64_t>> stalled = receipts_.Stalled(iteration_id, absl::Now(), kStallGrace);
  if (stalled.empty()) return absl::OkStatus();
  const std::map<std::pair<int64_t, int64_t>, int64_t> holder = HoldersLocked(iteration_id);
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> by_task;  // (task, epoch) -> splits
  for (const auto& [epoch, split] : stalled) {
    if (auto h = holder.find({epoch, split}); h != holder.end()) by_task[{h->second, epoch}].push_back(split);
    receipts_.Unserve(iteration_id, epoch, split);
  }
  for (const auto& [task_epoch, splits] : by_task) {
    Update u;
    auto* r = u.mutable_requeue_splits();
    r->set_task_id(task_epoch.first);
    r->set_epoch(task_epoch.second);
    for (int64_t s : splits) r->add_indices(s);
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
    spdlog::warn(
        "dispatcher: {} of {}: {} split(s) of epoch {} were served to their end but never received in full "
        "(a response lost in flight, or a reader that died); they will be produced again",
        TaskName(task_epoch.first), IterationName(iteration_id), splits.size(), task_epoch.second);
  }
  if (!by_task.empty()) StartReissueBarrierLocked(iteration_id);
  return absl::OkStatus();
}

void Dispatcher::StartReissueBarrierLocked(int64_t iteration_id) {
  const auto* iteration = state_.FindIteration(iteration_id);
  if (iteration == nullptr) return;
  receipts_.StartBarrier(iteration_id, iteration->clients);
}

bool Dispatcher::EpochSettledLocked(int64_t iteration_id, int64_t epoch) const {
  const auto* iteration = state_.FindIteration(iteration_id);
  if (iteration == nullptr) return true;
  if (auto pool = iteration->returned_splits.find(epoch); pool != iteration->returned_splits.end()) return false;
  for (int64_t t : iteration->tasks) {
    const auto* task = state_.FindTask(t);
    for (int64_t e : task->outstanding_epochs) {
      if (e == epoch) return false;
    }
  }
  return true;
}

}  // namespace tfdata::service
