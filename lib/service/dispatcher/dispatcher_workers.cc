// The worker's side of the dispatcher: WorkerHeartbeat (registration, tasks, leaving), tasks,
// suspicion of unreachable workers and removal of lost ones.
#include "lib/service/dispatcher/dispatcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/sharding.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

absl::Status Dispatcher::CreateTaskLocked(int64_t iteration_id, const std::string& worker) {
  std::optional<int64_t> starting_round = 0;
  if (state_.FindJob(state_.FindIteration(iteration_id)->job_id)->num_consumers > 0) {
    starting_round = RotationChangeRoundLocked(iteration_id);
    if (!starting_round) return absl::OkStatus();  // asked again at the worker's next heartbeat
  }
  Update u;
  auto* c = u.mutable_create_task();
  c->set_task_id(state_.NextTaskId());
  c->set_iteration_id(iteration_id);
  c->set_worker_address(worker);
  c->set_starting_round(*starting_round);
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  spdlog::info("dispatcher: created {} of {} on worker {}{}", TaskName(c->task_id()), IterationName(iteration_id),
               worker, *starting_round > 0 ? absl::StrCat(" (in the rotation from round ", *starting_round, ")") : "");
  return absl::OkStatus();
}

absl::Status Dispatcher::AssignTasksLocked(const std::string& worker) {
  for (int64_t iteration_id : state_.ActiveIterations()) {
    if (!state_.HasTaskOnWorker(iteration_id, worker)) {
      TFD_RETURN_IF_ERROR(CreateTaskLocked(iteration_id, worker));
    }
  }
  return absl::OkStatus();
}

void Dispatcher::FillTaskDef(int64_t task_id, TaskDef* def) const {
  const auto* task = state_.FindTask(task_id);
  const auto* iteration = state_.FindIteration(task->iteration_id);
  const auto* job = state_.FindJob(iteration->job_id);
  def->set_task_id(task_id);
  def->set_iteration_id(iteration->id);
  def->set_job_id(job->id);
  def->set_dataset_id(job->dataset_id);
  def->set_mode(job->mode);
  const auto* dataset = state_.FindDataset(job->dataset_id);
  *def->mutable_pipeline() = dataset->pipeline;
  def->set_compression(dataset->compression);
  def->set_num_consumers(job->num_consumers);
  def->set_cross_trainer_cache(job->cross_trainer_cache);
  def->set_exactly_once(job->exactly_once);
  if (const ReadProgress* resumed = state_.ResumeOf(*iteration)) def->set_first_epoch(resumed->first_epoch());
  if (IsStaticSharding(job->mode)) {
    const auto& list = config_.worker_addresses;
    def->set_num_workers(static_cast<int32_t>(list.size()));
    def->set_worker_index(
        static_cast<int32_t>(std::find(list.begin(), list.end(), task->worker_address) - list.begin()));
    if (job->resume && iteration->repetition == 0) {
      // A resumed read: what was handed out of this shard is left out.
      for (const ShardResume& s : job->resume->shards()) {
        if (s.shard() != def->worker_index()) continue;
        def->mutable_skip_begins()->Assign(s.begins().begin(), s.begins().end());
        def->mutable_skip_ends()->Assign(s.ends().begin(), s.ends().end());
      }
    }
  }
}

absl::Status Dispatcher::WorkerHeartbeat(const WorkerHeartbeatRequest& req, WorkerHeartbeatResponse* resp) {
  const std::string& worker = req.worker_address();
  if (worker.empty()) return absl::InvalidArgumentError("worker heartbeat: empty worker address");
  absl::MutexLock lock(&mu_);
  const auto& list = config_.worker_addresses;
  if (!list.empty() && std::find(list.begin(), list.end(), worker) == list.end()) {
    const std::string known = absl::StrJoin(list, ", ");
    if (refused_workers_.insert(worker).second) {
      spdlog::warn("dispatcher: refused worker {}: not in --worker-addresses ({})", worker, known);
    }
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker,
                                                      " is not in the dispatcher's fixed worker list (", known,
                                                      "); static sharding admits only those workers"));
  }
  const std::vector<std::string> tags(req.worker_tags().begin(), req.worker_tags().end());
  if (!state_.WorkerKnown(worker) || state_.WorkerTags(worker) != tags) {
    const bool known = state_.WorkerKnown(worker);
    Update u;
    u.mutable_register_worker()->set_worker_address(worker);
    for (const std::string& t : tags) u.mutable_register_worker()->add_tags(t);
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
    spdlog::info("dispatcher: worker {} {}{}", worker, known ? "changed its tags" : "registered",
                 tags.empty() ? "" : absl::StrCat(" (tags: ", absl::StrJoin(tags, ", "), ")"));
  }
  worker_last_seen_[worker] = absl::Now();
  worker_traffic_[worker].Add(
      absl::Now(), {static_cast<double>(req.elements_served()), static_cast<double>(req.bytes_served()), 0, 0});
  if (unreachable_reports_.erase(worker) > 0 && !req.leaving()) {
    spdlog::info("dispatcher: worker {} heartbeated: no longer suspected", worker);
  }
  resp->set_incarnation_id(incarnation_id_);
  resp->set_fault_tolerant(journal_ != nullptr);
  for (int64_t t : req.finished_tasks()) {
    const auto* task = state_.FindTask(t);
    if (task == nullptr || task->finished || task->worker_address != worker) continue;
    Update u;
    u.mutable_finish_task()->set_task_id(t);
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
    spdlog::info("dispatcher: {} of {} finished on worker {}", TaskName(t), IterationName(task->iteration_id), worker);
  }
  for (const TaskProgress& p : req.task_progress()) {
    if (p.served_ends_size() > 0) NoteServedEndsLocked(p, worker);
    const auto* task = state_.FindTask(p.task_id());
    if (task == nullptr || task->worker_address != worker || p.splits_delivered() <= task->splits_delivered) continue;
    // Exactly-once jobs count what readers confirm (ConfirmReceiptsLocked), not what was served.
    if (ExactlyOnceLocked(task->iteration_id)) continue;
    Update u;
    u.mutable_deliver_splits()->set_task_id(p.task_id());
    u.mutable_deliver_splits()->set_splits_delivered(std::min(p.splits_delivered(), task->splits_assigned));
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
  }
  if (req.leaving()) return LeaveLocked(req);
  TFD_RETURN_IF_ERROR(AssignTasksLocked(worker));

  const std::vector<int64_t> assigned = state_.TasksOfWorker(worker);
  const std::set<int64_t> running(req.current_tasks().begin(), req.current_tasks().end());
  for (int64_t t : assigned) {
    if (!running.contains(t)) FillTaskDef(t, resp->add_new_tasks());
  }
  // Tasks the worker runs that the dispatcher no longer knows (garbage-collected, or from before a
  // restart): the worker drops them instead of serving them forever.
  const std::set<int64_t> known(assigned.begin(), assigned.end());
  for (int64_t t : running) {
    if (!known.contains(t)) resp->add_tasks_to_delete(t);
  }
  return absl::OkStatus();
}

bool Dispatcher::SuspectedLocked(const std::string& worker) const {
  auto it = unreachable_reports_.find(worker);
  return it != unreachable_reports_.end() && it->second >= kSuspectAfterReports;
}

absl::Status Dispatcher::LeaveLocked(const WorkerHeartbeatRequest& req) {
  const std::string& worker = req.worker_address();
  std::map<int64_t, int64_t> started;
  for (const TaskProgress& p : req.task_progress()) started[p.task_id()] = p.splits_started();
  int64_t returned = 0;
  for (int64_t t : state_.TasksOfWorker(worker)) {
    const auto* task = state_.FindTask(t);
    auto s = started.find(t);
    if (s == started.end() || task->splits_assigned <= s->second) continue;
    // Exactly-once: the removal below puts every split the task holds back in the pool.
    if (ExactlyOnceLocked(task->iteration_id)) continue;
    // The splits received and not started are the tail of the last assignment (the worker asks for
    // the next batch only when it has started every split of the last one).
    std::vector<int64_t> tail = state_.ReturnableSplits(*task);
    const int64_t unstarted = std::min<int64_t>(task->splits_assigned - s->second, static_cast<int64_t>(tail.size()));
    tail.erase(tail.begin(), tail.end() - unstarted);
    if (tail.empty() || !state_.EpochOpenElsewhere(task->iteration_id, task->last_epoch, t)) continue;
    Update u;
    auto* r = u.mutable_return_splits();
    r->set_task_id(t);
    r->set_epoch(task->last_epoch);
    for (int64_t i : tail) r->add_indices(i);
    if (auto st = ApplyLocked(u); !st.ok()) return st;
    returned += static_cast<int64_t>(tail.size());
  }
  RemoveWorkerLocked(worker, returned > 0
                                 ? absl::StrCat("left; ", returned, " split(s) it had not started go to other workers")
                                 : std::string("left"));
  workers_left_total_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

DispatcherCounts Dispatcher::Counts() const {
  absl::MutexLock lock(&mu_);
  DispatcherCounts c;
  for (const std::string& w : state_.Workers()) {
    ++c.workers;
    if (SuspectedLocked(w)) ++c.workers_suspected;
  }
  c.datasets = static_cast<int64_t>(state_.NumDatasets());
  c.jobs = state_.JobsByMode();
  c.active_iterations = static_cast<int64_t>(state_.ActiveIterations().size());
  c.readers = static_cast<int64_t>(state_.ClientIds().size());
  c.workers_lost_total = workers_lost_total_.load(std::memory_order_relaxed);
  c.workers_left_total = workers_left_total_.load(std::memory_order_relaxed);
  c.splits_assigned_total = splits_assigned_total_.load(std::memory_order_relaxed);
  c.splits_lost_total = splits_lost_total_.load(std::memory_order_relaxed);
  c.journal_appends_total = journal_appends_total_.load(std::memory_order_relaxed);
  c.journal_appended_bytes_total = journal_appended_bytes_total_.load(std::memory_order_relaxed);
  c.journal_append_latency = journal_append_latency_.Get();
  c.journal_bytes = journal_ != nullptr ? static_cast<int64_t>(journal_->size()) : 0;
  return c;
}

void Dispatcher::RemoveWorkerLocked(const std::string& worker, const std::string& why) {
  worker_last_seen_.erase(worker);
  worker_traffic_.erase(worker);
  unreachable_reports_.erase(worker);
  Update u;
  u.mutable_remove_worker()->set_worker_address(worker);
  const std::vector<int64_t> tasks = state_.TasksOfWorker(worker);
  AddTaskEndsLocked(tasks, u.mutable_remove_worker());
  int64_t lost = 0, reissued = 0;
  std::set<int64_t> exactly_once;  // iterations whose splits come back to the pool
  for (int64_t t : tasks) {
    const auto* task = state_.FindTask(t);
    const int64_t held = task->splits_assigned - task->splits_delivered;
    if (ExactlyOnceLocked(task->iteration_id)) {
      exactly_once.insert(task->iteration_id);
      reissued += held;
    } else {
      lost += held;
    }
  }
  if (ApplyLocked(u).ok()) {
    splits_lost_total_.fetch_add(lost, std::memory_order_relaxed);
    // The pooled splits wait until the readers have reported everything they got from the tasks.
    for (int64_t it : exactly_once) StartReissueBarrierLocked(it);
    spdlog::warn(
        "dispatcher: worker {} {}; its {} task(s) removed{}{}", worker, why, tasks.size(),
        lost > 0 ? absl::StrCat("; ", lost, " split(s) it held are lost") : "",
        reissued > 0 ? absl::StrCat("; ", reissued, " split(s) it held go to other workers (exactly once)") : "");
  }
}

}  // namespace tfdata::service
