#include "lib/service/dispatcher/dispatcher_state.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/sharding.h"
#include "lib/pipeline/splits.h"
#include "lib/service/dispatcher/dispatcher_state_internal.h"

namespace tfdata::service {

using state_internal::Find;
using state_internal::Inconsistent;

// The fields Snapshot and Restore copy, one list per record: adding a field to a record (and to
// its StateSnapshot message, under the same name) means adding it here, once. SCALAR copies a
// number, bool, enum or string; MESSAGE a protobuf message; REPEATED a std container of scalars
// as a repeated field. Fields whose snapshot form differs (a map as a list of pairs, ended tasks
// listed on their own, worker tags, clients) are copied by hand in Snapshot and Restore. The lists
// are kept as a table (clang-format off).
// clang-format off
#define TFD_DATASET_FIELDS(SCALAR, MESSAGE, REPEATED) \
  SCALAR(id) SCALAR(fingerprint) MESSAGE(pipeline) SCALAR(compression)
// By hand: split_plan (optional).
#define TFD_JOB_FIELDS(SCALAR, MESSAGE, REPEATED) \
  SCALAR(id) SCALAR(dataset_id) SCALAR(mode) SCALAR(name) REPEATED(iterations) SCALAR(num_consumers) \
  SCALAR(cross_trainer_cache) SCALAR(exactly_once)
// By hand: next_split, returned_splits, ended_tasks.
#define TFD_ITERATION_FIELDS(SCALAR, MESSAGE, REPEATED) \
  SCALAR(id) SCALAR(job_id) SCALAR(repetition) REPEATED(tasks) REPEATED(clients) SCALAR(garbage_collected) \
  SCALAR(splits_lost)
#define TFD_TASK_FIELDS(SCALAR, MESSAGE, REPEATED) \
  SCALAR(id) SCALAR(iteration_id) SCALAR(worker_address) SCALAR(finished) SCALAR(splits_assigned) \
  SCALAR(splits_delivered) SCALAR(last_epoch) SCALAR(last_first) SCALAR(last_count) SCALAR(starting_round) \
  REPEATED(last_indices) SCALAR(epochs_ended) REPEATED(outstanding_epochs) REPEATED(outstanding_indices) \
  MESSAGE(last_skips)
// By hand: the snapshot's id and iteration_id, the keys the ended task is stored under.
#define TFD_ENDED_TASK_FIELDS(SCALAR, MESSAGE, REPEATED) \
  SCALAR(worker_address) SCALAR(starting_round) SCALAR(ending_round)
// The id counters: member f_ is snapshot field f.
#define TFD_STATE_COUNTERS(COUNTER) \
  COUNTER(next_job_id) COUNTER(next_iteration_id) COUNTER(next_task_id) COUNTER(next_client_id) \
  COUNTER(next_dataset_number)
// clang-format on

namespace {

// ToSnapshot and FromSnapshot of each record (DispatcherState::R <-> StateSnapshot::R), from its list.
#define TFD_TO_SCALAR(f) o.set_##f(s.f);
#define TFD_TO_MESSAGE(f) *o.mutable_##f() = s.f;
#define TFD_TO_REPEATED(f) \
  for (const auto& v : s.f) o.add_##f(v);
#define TFD_FROM_SCALAR(f) s.f = o.f();
#define TFD_FROM_MESSAGE(f) s.f = o.f();
#define TFD_FROM_REPEATED(f) s.f = decltype(s.f)(o.f().begin(), o.f().end());
#define TFD_SNAPSHOT_COPIES(R, FIELDS)                                  \
  void ToSnapshot(const DispatcherState::R& s, StateSnapshot::R& o) {   \
    FIELDS(TFD_TO_SCALAR, TFD_TO_MESSAGE, TFD_TO_REPEATED)              \
  }                                                                     \
  void FromSnapshot(const StateSnapshot::R& o, DispatcherState::R& s) { \
    FIELDS(TFD_FROM_SCALAR, TFD_FROM_MESSAGE, TFD_FROM_REPEATED)        \
  }
TFD_SNAPSHOT_COPIES(Dataset, TFD_DATASET_FIELDS)
TFD_SNAPSHOT_COPIES(Job, TFD_JOB_FIELDS)
TFD_SNAPSHOT_COPIES(Iteration, TFD_ITERATION_FIELDS)
TFD_SNAPSHOT_COPIES(Task, TFD_TASK_FIELDS)
TFD_SNAPSHOT_COPIES(EndedTask, TFD_ENDED_TASK_FIELDS)
#undef TFD_SNAPSHOT_COPIES
#undef TFD_TO_SCALAR
#undef TFD_TO_MESSAGE
#undef TFD_TO_REPEATED
#undef TFD_FROM_SCALAR
#undef TFD_FROM_MESSAGE
#undef TFD_FROM_REPEATED

}  // namespace

absl::Status DispatcherState::Apply(const Update& update) {
  switch (update.kind_case()) {
    case Update::kRegisterDataset: return RegisterDataset(update.register_dataset());
    case Update::kRegisterWorker: return RegisterWorker(update.register_worker());
    case Update::kCreateJob: return CreateJob(update.create_job());
    case Update::kCreateIteration: return CreateIteration(update.create_iteration());
    case Update::kCreateTask: return CreateTask(update.create_task());
    case Update::kFinishTask: return FinishTask(update.finish_task());
    case Update::kRemoveWorker: return RemoveWorker(update.remove_worker());
    case Update::kAcquireClient: return AcquireClient(update.acquire_client());
    case Update::kReleaseClient: return ReleaseClient(update.release_client());
    case Update::kGarbageCollectIteration: return GarbageCollectIteration(update.garbage_collect_iteration());
    case Update::kAssignSplits: return AssignSplits(update.assign_splits());
    case Update::kDeliverSplits: return DeliverSplits(update.deliver_splits());
    case Update::kSnapshot: return Restore(update.snapshot());
    case Update::kReturnSplits: return ReturnSplits(update.return_splits());
    case Update::kEndSplits: return EndSplits(update.end_splits());
    case Update::kRequeueSplits: return RequeueSplits(update.requeue_splits());
    case Update::KIND_NOT_SET: break;
  }
  return Inconsistent("empty update record");
}

absl::Status DispatcherState::RegisterDataset(const RegisterDatasetUpdate& u) {
  if (u.dataset_id().empty()) return Inconsistent("dataset with an empty id");
  if (datasets_.contains(u.dataset_id())) return Inconsistent("dataset " + u.dataset_id() + " registered twice");
  datasets_[u.dataset_id()] = Dataset{u.dataset_id(), u.fingerprint(), u.pipeline(), u.compression()};
  dataset_by_fingerprint_.emplace(u.fingerprint(), u.dataset_id());  // the first id keeps the fingerprint
  int64_t n = 0;
  if (absl::SimpleAtoi(u.dataset_id(), &n) && n >= next_dataset_number_) next_dataset_number_ = n + 1;
  return absl::OkStatus();
}

absl::Status DispatcherState::RegisterWorker(const RegisterWorkerUpdate& u) {
  const std::vector<std::string> tags(u.tags().begin(), u.tags().end());
  // Registering a known worker again is only a change of its tags.
  if (!workers_.insert(u.worker_address()).second && WorkerTags(u.worker_address()) == tags) {
    return Inconsistent("worker " + u.worker_address() + " registered twice");
  }
  if (tags.empty()) {
    worker_tags_.erase(u.worker_address());
  } else {
    worker_tags_[u.worker_address()] = tags;
  }
  return absl::OkStatus();
}

const std::vector<std::string>& DispatcherState::WorkerTags(const std::string& address) const {
  static const std::vector<std::string> kNone;
  auto it = worker_tags_.find(address);
  return it == worker_tags_.end() ? kNone : it->second;
}

absl::Status DispatcherState::CreateJob(const CreateJobUpdate& u) {
  if (u.job_id() != next_job_id_) return Inconsistent(absl::StrCat("job id ", u.job_id(), " out of order"));
  if (!datasets_.contains(u.dataset_id())) return Inconsistent("job of unknown dataset " + u.dataset_id());
  if (!u.job_name().empty() && job_by_name_.contains(u.job_name())) {
    return Inconsistent("job name " + u.job_name() + " used twice");
  }
  if (u.num_consumers() < 0) return Inconsistent("negative num_consumers");
  if (u.exactly_once() && u.mode() != DISTRIBUTED_EPOCH)
    return Inconsistent("exactly-once job not in distributed_epoch");
  jobs_[u.job_id()] = Job{u.job_id(),        u.dataset_id(),          u.mode(),        u.job_name(), {},
                          u.num_consumers(), u.cross_trainer_cache(), u.exactly_once()};
  if (u.has_split_plan()) jobs_[u.job_id()].split_plan = u.split_plan();
  if (u.has_resume()) {
    if (auto st = SetResume(jobs_[u.job_id()], u.resume()); !st.ok()) {
      jobs_.erase(u.job_id());
      return st;
    }
  }
  if (!u.job_name().empty()) job_by_name_[u.job_name()] = u.job_id();
  ++next_job_id_;
  return absl::OkStatus();
}

absl::Status DispatcherState::SetResume(Job& job, const ResumePlan& plan) {
  if (IsStaticSharding(job.mode)) {
    auto shards = ShardReadProgress::FromPlan(plan, "resume plan");
    if (!shards.ok()) return Inconsistent(std::string(shards.status().message()));
    job.resume = plan;
    return absl::OkStatus();
  }
  if (!job.exactly_once || !job.split_plan) return Inconsistent("a resumed job that is not exactly-once");
  auto split_plan = SplitPlan::FromRecord(*job.split_plan);
  if (!split_plan.ok())
    return Inconsistent(absl::StrCat("a resumed job's split plan: ", split_plan.status().message()));
  auto progress = ReadProgress::FromPlan(plan, split_plan->num_splits(), "resume plan");
  if (!progress.ok()) return Inconsistent(std::string(progress.status().message()));
  job.resume = plan;
  job.resume_progress = std::make_shared<const ReadProgress>(*std::move(progress));
  return absl::OkStatus();
}

absl::Status DispatcherState::CreateIteration(const CreateIterationUpdate& u) {
  if (u.iteration_id() != next_iteration_id_) return Inconsistent("iteration id out of order");
  Job* job = Find(jobs_, u.job_id());
  if (job == nullptr) return Inconsistent("iteration of unknown " + JobName(u.job_id()));
  if (u.repetition() != static_cast<int64_t>(job->iterations.size())) return Inconsistent("repetition out of order");
  Iteration it;
  it.id = u.iteration_id();
  it.job_id = u.job_id();
  it.repetition = u.repetition();
  if (it.repetition == 0 && job->resume_progress) {
    // Splits handed out in part before go first, with what was handed out as skips.
    for (const EpochResume& e : job->resume->epochs()) {
      for (const SplitSkips& s : e.partial()) it.returned_splits[e.epoch()].push_back(s.split());
    }
  }
  iterations_[it.id] = it;
  live_iterations_.insert(it.id);
  job->iterations.push_back(it.id);
  ++next_iteration_id_;
  return absl::OkStatus();
}

absl::Status DispatcherState::CreateTask(const CreateTaskUpdate& u) {
  if (u.task_id() != next_task_id_) return Inconsistent("task id out of order");
  Iteration* it = Find(iterations_, u.iteration_id());
  if (it == nullptr || it->garbage_collected) return Inconsistent("task of unknown " + IterationName(u.iteration_id()));
  if (!workers_.contains(u.worker_address())) return Inconsistent("task on unknown worker " + u.worker_address());
  if (HasTaskOnWorker(u.iteration_id(), u.worker_address())) return Inconsistent("two tasks on one worker");
  Task t{u.task_id(), u.iteration_id(), u.worker_address(), false};
  t.starting_round = u.starting_round();
  tasks_[u.task_id()] = t;
  it->tasks.insert(u.task_id());
  ++next_task_id_;
  return absl::OkStatus();
}

absl::Status DispatcherState::FinishTask(const FinishTaskUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("finish of unknown " + TaskName(u.task_id()));
  t->finished = true;
  return absl::OkStatus();
}

absl::Status DispatcherState::RemoveWorker(const RemoveWorkerUpdate& u) {
  if (workers_.erase(u.worker_address()) == 0) return Inconsistent("removal of unknown worker " + u.worker_address());
  worker_tags_.erase(u.worker_address());
  std::map<int64_t, int64_t> ends;
  for (const TaskEnd& e : u.task_ends()) ends[e.task_id()] = e.ending_round();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (it->second.worker_address == u.worker_address()) {
      if (Iteration* iter = Find(iterations_, it->second.iteration_id)) {
        if (auto end = ends.find(it->first); end != ends.end()) {
          iter->ended_tasks[it->first] = EndedTask{it->second.worker_address, it->second.starting_round, end->second};
        }
        iter->tasks.erase(it->first);
        const Task& t = it->second;
        const Job* job = Find(jobs_, iter->job_id);
        if (job != nullptr && job->exactly_once) {
          // Produced again by another task; readers drop the elements they already have.
          for (size_t k = 0; k < t.outstanding_indices.size(); ++k) {
            iter->returned_splits[t.outstanding_epochs[k]].push_back(t.outstanding_indices[k]);
          }
        } else {
          // The splits it held and had not delivered are gone: never handed out again (at most
          // once). (A finished task may still have had elements buffered.)
          iter->splits_lost += t.splits_assigned - t.splits_delivered;
        }
      }
      it = tasks_.erase(it);
    } else {
      ++it;
    }
  }
  return absl::OkStatus();
}

absl::Status DispatcherState::AcquireClient(const AcquireClientUpdate& u) {
  if (u.client_id() != next_client_id_) return Inconsistent("client id out of order");
  Iteration* it = Find(iterations_, u.iteration_id());
  if (it == nullptr || it->garbage_collected)
    return Inconsistent("client of unknown " + IterationName(u.iteration_id()));
  it->clients.insert(u.client_id());
  client_iteration_[u.client_id()] = u.iteration_id();
  ++next_client_id_;
  return absl::OkStatus();
}

absl::Status DispatcherState::ReleaseClient(const ReleaseClientUpdate& u) {
  auto c = client_iteration_.find(u.client_id());
  if (c == client_iteration_.end()) return Inconsistent("release of unknown " + ClientName(u.client_id()));
  if (Iteration* it = Find(iterations_, c->second)) it->clients.erase(u.client_id());
  client_iteration_.erase(c);
  return absl::OkStatus();
}

absl::Status DispatcherState::GarbageCollectIteration(const GarbageCollectIterationUpdate& u) {
  Iteration* it = Find(iterations_, u.iteration_id());
  if (it == nullptr || it->garbage_collected) return Inconsistent("gc of unknown " + IterationName(u.iteration_id()));
  for (int64_t t : it->tasks) tasks_.erase(t);
  it->tasks.clear();
  for (int64_t c : it->clients) client_iteration_.erase(c);
  it->clients.clear();
  it->garbage_collected = true;
  live_iterations_.erase(u.iteration_id());
  // An unnamed job can never be found again (readers find jobs by name), so it goes with its
  // iterations: a dispatcher serving short jobs for weeks holds what is live, not every job it
  // ever made. A named job stays, with its collected iterations, so that reusing the name can warn.
  auto job = jobs_.find(it->job_id);
  if (job != jobs_.end() && job->second.name.empty()) {
    const bool all_collected =
        std::all_of(job->second.iterations.begin(), job->second.iterations.end(), [&](int64_t i) {
          const Iteration* other = Find(iterations_, i);
          return other == nullptr || other->garbage_collected;
        });
    if (all_collected) {
      for (int64_t i : job->second.iterations) iterations_.erase(i);
      jobs_.erase(job);
    }
  }
  return absl::OkStatus();
}

StateSnapshot DispatcherState::Snapshot() const {
  StateSnapshot s;
  for (const auto& [id, d] : datasets_) ToSnapshot(d, *s.add_datasets());
  for (const std::string& w : workers_) s.add_workers(w);
  for (const auto& [w, tags] : worker_tags_) {
    auto* o = s.add_worker_tags();
    o->set_address(w);
    for (const std::string& t : tags) o->add_tags(t);
  }
  for (const auto& [id, j] : jobs_) {
    auto* o = s.add_jobs();
    ToSnapshot(j, *o);
    if (j.split_plan) *o->mutable_split_plan() = *j.split_plan;
    if (j.resume) *o->mutable_resume() = *j.resume;
  }
  for (const auto& [id, it] : iterations_) {
    auto* o = s.add_iterations();
    ToSnapshot(it, *o);
    for (const auto& [epoch, next] : it.next_split) {
      auto* e = o->add_next_split();
      e->set_epoch(epoch);
      e->set_next_split(next);
    }
    for (const auto& [epoch, indices] : it.returned_splits) {
      auto* e = o->add_returned_splits();
      e->set_epoch(epoch);
      for (int64_t i : indices) e->add_indices(i);
    }
    for (const auto& [task_id, e] : it.ended_tasks) {
      auto* t = s.add_ended_tasks();
      t->set_id(task_id);
      t->set_iteration_id(it.id);
      ToSnapshot(e, *t);
    }
  }
  for (const auto& [id, t] : tasks_) ToSnapshot(t, *s.add_tasks());
  for (const auto& [client, iteration] : client_iteration_) {
    auto* o = s.add_clients();
    o->set_id(client);
    o->set_iteration_id(iteration);
  }
#define TFD_TO_COUNTER(f) s.set_##f(f##_);
  TFD_STATE_COUNTERS(TFD_TO_COUNTER)
#undef TFD_TO_COUNTER
  return s;
}

absl::Status DispatcherState::Restore(const StateSnapshot& s) {
  if (!datasets_.empty() || !workers_.empty() || !jobs_.empty() || next_job_id_ != 1 || next_task_id_ != 1 ||
      next_client_id_ != 1) {
    return Inconsistent("a snapshot can only start a journal");
  }
  DispatcherState r;  // built aside: a bad snapshot leaves the state unchanged
  for (const auto& d : s.datasets()) {
    FromSnapshot(d, r.datasets_[d.id()]);
    r.dataset_by_fingerprint_.emplace(d.fingerprint(), d.id());
  }
  for (const auto& w : s.workers()) r.workers_.insert(w);
  for (const auto& w : s.worker_tags()) {
    if (!r.workers_.contains(w.address())) return Inconsistent("snapshot: tags of an unknown worker");
    r.worker_tags_[w.address()] = {w.tags().begin(), w.tags().end()};
  }
  for (const auto& j : s.jobs()) {
    if (!r.datasets_.contains(j.dataset_id())) return Inconsistent("snapshot: job of an unknown dataset");
    FromSnapshot(j, r.jobs_[j.id()]);
    if (j.has_split_plan()) r.jobs_[j.id()].split_plan = j.split_plan();
    if (j.has_resume()) TFD_RETURN_IF_ERROR(SetResume(r.jobs_[j.id()], j.resume()));
    if (!j.name().empty()) r.job_by_name_[j.name()] = j.id();
  }
  for (const auto& i : s.iterations()) {
    Iteration it;
    FromSnapshot(i, it);
    for (const auto& e : i.next_split()) it.next_split[e.epoch()] = e.next_split();
    for (const auto& e : i.returned_splits()) it.returned_splits[e.epoch()] = {e.indices().begin(), e.indices().end()};
    r.iterations_[it.id] = std::move(it);
  }
  for (const auto& t : s.tasks()) {
    if (!r.iterations_.contains(t.iteration_id())) return Inconsistent("snapshot: task of an unknown iteration");
    FromSnapshot(t, r.tasks_[t.id()]);
    if (t.outstanding_epochs_size() != t.outstanding_indices_size()) {
      return Inconsistent("snapshot: a task's outstanding splits have epochs and indices of different lengths");
    }
  }
  for (const auto& e : s.ended_tasks()) {
    auto it = r.iterations_.find(e.iteration_id());
    if (it == r.iterations_.end()) return Inconsistent("snapshot: ended task of an unknown iteration");
    FromSnapshot(e, it->second.ended_tasks[e.id()]);
  }
  for (const auto& i : r.iterations_) {
    if (!i.second.garbage_collected) r.live_iterations_.insert(i.first);
    for (int64_t t : i.second.tasks) {
      if (!r.tasks_.contains(t)) return Inconsistent("snapshot: iteration lists an unknown task");
    }
  }
  for (const auto& c : s.clients()) r.client_iteration_[c.id()] = c.iteration_id();
#define TFD_FROM_COUNTER(f) r.f##_ = s.f();
  TFD_STATE_COUNTERS(TFD_FROM_COUNTER)
#undef TFD_FROM_COUNTER
  *this = std::move(r);
  return absl::OkStatus();
}

const DispatcherState::Dataset* DispatcherState::FindDataset(const std::string& id) const {
  return Find(datasets_, id);
}
const DispatcherState::Dataset* DispatcherState::FindDatasetByFingerprint(const std::string& fp) const {
  const std::string* id = Find(dataset_by_fingerprint_, fp);
  return id == nullptr ? nullptr : FindDataset(*id);
}
const DispatcherState::Job* DispatcherState::FindJob(int64_t id) const { return Find(jobs_, id); }
const DispatcherState::Job* DispatcherState::FindJobByName(const std::string& name) const {
  const int64_t* id = Find(job_by_name_, name);
  return id == nullptr ? nullptr : FindJob(*id);
}
const DispatcherState::Iteration* DispatcherState::FindIteration(int64_t id) const { return Find(iterations_, id); }
const DispatcherState::Task* DispatcherState::FindTask(int64_t id) const { return Find(tasks_, id); }

std::optional<int64_t> DispatcherState::ClientIteration(int64_t client_id) const {
  const int64_t* it = Find(client_iteration_, client_id);
  return it == nullptr ? std::nullopt : std::optional<int64_t>(*it);
}

std::vector<std::string> DispatcherState::Workers() const { return {workers_.begin(), workers_.end()}; }

std::vector<std::string> DispatcherState::DatasetIds() const {
  std::vector<std::string> out;
  for (const auto& [id, d] : datasets_) out.push_back(id);
  return out;
}

std::vector<int64_t> DispatcherState::TaskIds() const {
  std::vector<int64_t> out;
  for (const auto& [id, t] : tasks_) out.push_back(id);
  return out;
}

std::vector<int64_t> DispatcherState::JobIds() const {
  std::vector<int64_t> out;
  for (const auto& [id, j] : jobs_) out.push_back(id);
  return out;
}

std::vector<int64_t> DispatcherState::TasksOfWorker(const std::string& address) const {
  std::vector<int64_t> out;
  for (const auto& [id, t] : tasks_) {
    if (t.worker_address == address) out.push_back(id);
  }
  return out;
}

std::vector<int64_t> DispatcherState::ActiveIterations() const {
  std::vector<int64_t> out;
  for (int64_t id : live_iterations_) {
    if (!IterationFinished(id)) out.push_back(id);
  }
  return out;
}

std::vector<int64_t> DispatcherState::ClientIds() const {
  std::vector<int64_t> out;
  for (const auto& [id, _] : client_iteration_) out.push_back(id);
  return out;
}

bool DispatcherState::IterationFinished(int64_t iteration_id) const {
  const Iteration* it = FindIteration(iteration_id);
  if (it == nullptr || it->tasks.empty()) return false;
  return std::all_of(it->tasks.begin(), it->tasks.end(), [&](int64_t t) { return tasks_.at(t).finished; });
}

bool DispatcherState::HasTaskOnWorker(int64_t iteration_id, const std::string& address) const {
  const Iteration* it = FindIteration(iteration_id);
  if (it == nullptr) return false;
  return std::any_of(it->tasks.begin(), it->tasks.end(),
                     [&](int64_t t) { return tasks_.at(t).worker_address == address; });
}

std::string DispatcherState::NextDatasetId() const {
  int64_t n = next_dataset_number_;
  while (datasets_.contains(absl::StrCat(n))) ++n;
  return absl::StrCat(n);
}

}  // namespace tfdata::service
