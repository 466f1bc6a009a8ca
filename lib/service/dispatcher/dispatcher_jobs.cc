// The reader's side of the dispatcher: GetOrCreateJob (jobs, their iteration, joining it),
// ClientHeartbeat and ReleaseClient.
#include "lib/service/dispatcher/dispatcher.h"

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/determinism.h"
#include "lib/pipeline/sharding.h"
#include "lib/pipeline/split_isolation.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

absl::Status Dispatcher::GetOrCreateJob(const GetOrCreateJobRequest& req, GetOrCreateJobResponse* resp) {
  TFD_RETURN_IF_ERROR(CheckJobRequest(req));
  absl::MutexLock lock(&mu_);
  if (state_.FindDataset(req.dataset_id()) == nullptr) {
    return absl::NotFoundError(absl::StrCat("get or create job: unknown dataset \"", req.dataset_id(), "\""));
  }
  TFD_ASSIGN_OR_RETURN(const DispatcherState::Job* job, FindNamedJobLocked(req));
  int64_t job_id = 0;
  if (job != nullptr) {
    job_id = job->id;
  } else {
    TFD_ASSIGN_OR_RETURN(job_id, CreateJobLocked(req));
  }
  TFD_ASSIGN_OR_RETURN(const int64_t iteration_id, CurrentIterationLocked(job_id));
  const auto* iteration = state_.FindIteration(iteration_id);
  if (iteration->garbage_collected || state_.IterationFinished(iteration_id)) {
    resp->set_warning(absl::StrCat("job \"", req.job_name(), "\" (", JobName(job_id), ") has already ",
                                   iteration->garbage_collected ? "ended" : "finished",
                                   ": reading it yields no elements; pick a new job name to read the dataset again"));
    spdlog::warn("dispatcher: {}", resp->warning());
  }
  // A garbage-collected iteration has nothing to join: client 0 reads an empty, finished iteration.
  int64_t client_id = 0;
  if (!iteration->garbage_collected) {
    TFD_ASSIGN_OR_RETURN(client_id, JoinIterationLocked(req, job_id, iteration_id));
  }
  resp->set_job_id(job_id);
  resp->set_iteration_id(iteration_id);
  resp->set_client_id(client_id);
  const auto* job_now = state_.FindJob(job_id);
  if (IsStaticSharding(job_now->mode)) {
    resp->set_dataset_fingerprint(state_.FindDataset(job_now->dataset_id)->fingerprint);
    resp->set_num_shards(static_cast<int32_t>(config_.worker_addresses.size()));
  }
  if (job_now->mode == DISTRIBUTED_EPOCH) {
    // What a read state records, to be checked when it is resumed from.
    TFD_ASSIGN_OR_RETURN(const SplitPlan* plan, SplitPlanLocked(job_id));
    resp->set_dataset_fingerprint(state_.FindDataset(job_now->dataset_id)->fingerprint);
    resp->set_plan_fingerprint(SplitPlanFingerprint(*plan));
    resp->set_num_splits(plan->num_splits());
  }
  return absl::OkStatus();
}

absl::Status Dispatcher::CheckJobRequest(const GetOrCreateJobRequest& req) const {
  if (req.mode() != PARALLEL_EPOCHS && req.mode() != DISTRIBUTED_EPOCH && !IsStaticSharding(req.mode())) {
    return absl::InvalidArgumentError(
        absl::StrCat("get or create job: unsupported processing mode ", ProcessingMode_Name(req.mode())));
  }
  TFD_RETURN_IF_ERROR(CheckJobOptions(req));
  if (IsStaticSharding(req.mode()) && config_.worker_addresses.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "get or create job: mode ", ProcessingMode_Name(req.mode()),
        " (static sharding) needs a dispatcher started with --worker-addresses, the fixed list of workers"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const DispatcherState::Job*> Dispatcher::FindNamedJobLocked(const GetOrCreateJobRequest& req) const {
  const DispatcherState::Job* job = req.job_name().empty() ? nullptr : state_.FindJobByName(req.job_name());
  if (job == nullptr) return nullptr;
  if (job->num_consumers != req.num_consumers() || job->cross_trainer_cache != req.cross_trainer_cache()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "get or create job: job \"", req.job_name(), "\" was created with num_consumers ", job->num_consumers,
        " and cross_trainer_cache ", job->cross_trainer_cache ? "on" : "off", "; this request asks for num_consumers ",
        req.num_consumers(), " and cross_trainer_cache ", req.cross_trainer_cache() ? "on" : "off"));
  }
  if (job->exactly_once != req.exactly_once()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "get or create job: job \"", req.job_name(), "\" was created ", job->exactly_once ? "with" : "without",
        " exactly-once reads; this request asks ", req.exactly_once() ? "for them" : "for none"));
  }
  if (job->resume.has_value() != req.has_resume() ||
      (req.has_resume() &&
       job->resume->SerializeAsString() != req.resume().SerializeAsString())) {  // deterministic: same fields
    return absl::InvalidArgumentError(absl::StrCat(
        "get or create job: job \"", req.job_name(), "\" exists and was ",
        job->resume ? "resumed from another read state" : "not resumed from a read state",
        "; a resumed job shared by several readers needs a name of its own (for example the job's name with the "
        "launch number), and every reader of it passes the same state(s)"));
  }
  if (job->dataset_id != req.dataset_id() || job->mode != req.mode()) {
    return absl::InvalidArgumentError(absl::StrCat("get or create job: job name \"", req.job_name(), "\" is used by ",
                                                   JobName(job->id), " of dataset ", job->dataset_id, " in mode ",
                                                   ProcessingMode_Name(job->mode), "; this request asks for dataset ",
                                                   req.dataset_id(), " in mode ", ProcessingMode_Name(req.mode())));
  }
  return job;
}

absl::StatusOr<std::optional<SplitPlan>> Dispatcher::PlanNewJobLocked(const GetOrCreateJobRequest& req) const {
  const pipeline::Pipeline& pipeline = state_.FindDataset(req.dataset_id())->pipeline;
  std::optional<SplitPlan> plan;
  if (req.mode() == DISTRIBUTED_EPOCH) {
    auto p = SplitPlan::Create(pipeline, config_.build_options);
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("get or create job: dataset ", req.dataset_id(), ": ", p.status().message()));
    }
    plan = *std::move(p);
  }
  if (req.exactly_once()) {
    if (auto st = CheckSplitIsolation(pipeline, "exactly-once reads"); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("get or create job: dataset ", req.dataset_id(), ": ", st.message()));
    }
  }
  if (req.has_resume()) {
    TFD_RETURN_IF_ERROR(IsStaticSharding(req.mode()) ? CheckShardResumeLocked(req) : CheckResumeLocked(req, *plan));
  }
  if (req.num_consumers() > 0) {
    if (auto st = CheckInfinite(pipeline, config_.build_options); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "get or create job: coordinated reads (--num-consumers) of dataset ", req.dataset_id(), ": ", st.message()));
    }
  }
  if (IsStaticSharding(req.mode())) {
    auto st = CheckStaticSharding(pipeline, req.mode(), static_cast<int64_t>(config_.worker_addresses.size()),
                                  config_.build_options);
    if (!st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("get or create job: dataset ", req.dataset_id(), ": ", st.message()));
    }
  }
  return plan;
}

namespace {

// Both kinds of resume: the state must be of this dataset's pipeline.
absl::Status CheckResumedDataset(const GetOrCreateJobRequest& req, const std::string& fingerprint) {
  if (req.resume().dataset_fingerprint() == fingerprint) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "get or create job: the read state is of another pipeline (fingerprint ", req.resume().dataset_fingerprint(),
      "), not of dataset ", req.dataset_id(), " (fingerprint ", fingerprint, "): nothing was read"));
}

}  // namespace

absl::Status Dispatcher::CheckResumeLocked(const GetOrCreateJobRequest& req, const SplitPlan& plan) const {
  const ResumePlan& r = req.resume();
  TFD_RETURN_IF_ERROR(CheckResumedDataset(req, state_.FindDataset(req.dataset_id())->fingerprint));
  if (r.plan_fingerprint() != SplitPlanFingerprint(plan)) {
    return absl::FailedPreconditionError(
        absl::StrCat("get or create job: the read state does not fit dataset ", req.dataset_id(),
                     "'s splits as they are now (split plan ", r.plan_fingerprint(), " then, ",
                     SplitPlanFingerprint(plan), " with ", plan.num_splits(),
                     " splits now): its source changed (a file list, or the files a list_files pattern "
                     "matches); nothing was read"));
  }
  auto progress = ReadProgress::FromPlan(r, plan.num_splits(), "get or create job: the read state");
  if (!progress.ok()) return progress.status();
  return absl::OkStatus();
}

absl::Status Dispatcher::CheckShardResumeLocked(const GetOrCreateJobRequest& req) const {
  const ResumePlan& r = req.resume();
  const auto* dataset = state_.FindDataset(req.dataset_id());
  TFD_RETURN_IF_ERROR(CheckResumedDataset(req, dataset->fingerprint));
  const auto shards = static_cast<int32_t>(config_.worker_addresses.size());
  if (r.num_shards() != shards) {
    return absl::FailedPreconditionError(
        absl::StrCat("get or create job: the read state was taken with ", r.num_shards(),
                     " shards (workers in --worker-addresses), and this dispatcher has ", shards,
                     ": a static-sharding read resumes only over the same worker list; nothing was read"));
  }
  // A worker leaves out positions of its shard's stream: the stream must be the same one.
  if (auto st = CheckDeterministic(dataset->pipeline, "resuming a static-sharding read"); !st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("get or create job: dataset ", req.dataset_id(), ": ", st.message()));
  }
  return ShardReadProgress::FromPlan(r, "get or create job: the read state").status();
}

absl::StatusOr<int64_t> Dispatcher::CreateJobLocked(const GetOrCreateJobRequest& req) {
  // Before the job exists: a pipeline that does not suit the job creates nothing.
  TFD_ASSIGN_OR_RETURN(std::optional<SplitPlan> plan, PlanNewJobLocked(req));
  Update u;
  auto* c = u.mutable_create_job();
  c->set_job_id(state_.NextJobId());
  c->set_dataset_id(req.dataset_id());
  c->set_mode(req.mode());
  c->set_job_name(req.job_name());
  c->set_num_consumers(req.num_consumers());
  c->set_cross_trainer_cache(req.cross_trainer_cache());
  c->set_exactly_once(req.exactly_once());
  // The plan goes into the journal: a restart must not list a list_files directory again.
  if (plan) *c->mutable_split_plan() = plan->ToRecord();
  if (req.has_resume()) *c->mutable_resume() = req.resume();
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  const DispatcherState::Job* job = state_.FindJob(c->job_id());
  if (plan) split_plans_.emplace(job->id, *std::move(plan));
  spdlog::info("dispatcher: created {} (dataset {}, {}{}{})", JobName(job->id), job->dataset_id,
               ProcessingMode_Name(job->mode), job->name.empty() ? "" : ", name \"" + job->name + "\"",
               split_plans_.contains(job->id)
                   ? absl::StrCat(", ", split_plans_.at(job->id).num_splits(), " splits per epoch")
                   : "");
  return job->id;
}

absl::StatusOr<int64_t> Dispatcher::CurrentIterationLocked(int64_t job_id) {
  if (state_.FindJob(job_id)->iterations.empty()) {
    Update u;
    auto* c = u.mutable_create_iteration();
    c->set_iteration_id(state_.NextIterationId());
    c->set_job_id(job_id);
    c->set_repetition(0);
    TFD_RETURN_IF_ERROR(ApplyLocked(u));
    iteration_unclaimed_since_[c->iteration_id()] = absl::Now();
    // A resumed job's pool holds the splits handed out in part before, with everything to skip
    // known from the plan: no reader of this job has anything in flight to wait for.
    if (state_.FindJob(job_id)->resume_progress) receipts_.StartBarrier(c->iteration_id(), {});
    for (const std::string& w : state_.Workers()) {
      // A suspected worker (readers could not reach it, and it has not heartbeated since) gets its
      // task at its next heartbeat, if it ever comes (AssignTasksLocked).
      if (SuspectedLocked(w)) continue;
      TFD_RETURN_IF_ERROR(CreateTaskLocked(c->iteration_id(), w));
    }
  }
  return state_.FindJob(job_id)->iterations.back();
}

absl::Status Dispatcher::CheckConsumerFreeLocked(const GetOrCreateJobRequest& req, int64_t iteration_id) const {
  if (req.num_consumers() == 0) return absl::OkStatus();
  for (int64_t c : state_.FindIteration(iteration_id)->clients) {
    auto r = client_rounds_.find(c);
    if (r != client_rounds_.end() && r->second.consumer_index == req.consumer_index()) {
      return absl::AlreadyExistsError(absl::StrCat("get or create job: consumer index ", req.consumer_index(),
                                                   " of job \"", req.job_name(), "\" is already read by ",
                                                   ClientName(c)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Dispatcher::JoinIterationLocked(const GetOrCreateJobRequest& req, int64_t job_id,
                                                        int64_t iteration_id) {
  TFD_RETURN_IF_ERROR(CheckConsumerFreeLocked(req, iteration_id));
  Update u;
  auto* a = u.mutable_acquire_client();
  a->set_client_id(state_.NextClientId());
  a->set_iteration_id(iteration_id);
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  const absl::Time now = absl::Now();
  client_last_seen_[a->client_id()] = now;
  if (req.num_consumers() > 0) client_rounds_[a->client_id()] = ClientRounds{req.consumer_index(), 0};
  iteration_unclaimed_since_.erase(iteration_id);
  spdlog::info("dispatcher: {} joined {} of {}", ClientName(a->client_id()), IterationName(iteration_id),
               JobName(job_id));
  return a->client_id();
}

absl::Status Dispatcher::ClientHeartbeat(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp) {
  absl::MutexLock lock(&mu_);
  if (req.client_id() == 0) {  // the client of an iteration that had already ended
    resp->set_iteration_finished(true);
    return absl::OkStatus();
  }
  auto iteration_id = state_.ClientIteration(req.client_id());
  if (!iteration_id) {
    return absl::NotFoundError(absl::StrCat("unknown ", ClientName(req.client_id()),
                                            " (released after --client-timeout, or the dispatcher restarted)"));
  }
  client_last_seen_[req.client_id()] = absl::Now();
  if (req.has_stats()) {
    const ReaderStats& s = req.stats();
    client_traffic_[req.client_id()].Add(
        absl::Now(),
        {static_cast<double>(s.elements()), static_cast<double>(s.bytes()), s.wait_seconds(), s.elapsed_seconds()});
  }
  for (const std::string& w : req.unreachable_workers()) {
    if (!state_.WorkerKnown(w)) continue;
    if (++unreachable_reports_[w] == kSuspectAfterReports) {
      spdlog::warn(
          "dispatcher: worker {} suspected: readers could not reach it, and it has not heartbeated since; "
          "new jobs get no task on it until it heartbeats again",
          w);
    }
  }
  resp->set_incarnation_id(incarnation_id_);
  resp->set_fault_tolerant(journal_ != nullptr);
  const auto* iteration = state_.FindIteration(*iteration_id);
  for (int64_t t : iteration->tasks) {
    TaskInfo* info = resp->add_tasks();
    info->set_task_id(t);
    const auto* task = state_.FindTask(t);
    info->set_worker_address(task->worker_address);
    // Exactly-once: a lost task's splits are produced again elsewhere, not lost.
    if (!ExactlyOnceLocked(*iteration_id)) info->set_splits_undelivered(task->splits_assigned - task->splits_delivered);
    for (const std::string& tag : state_.WorkerTags(task->worker_address)) info->add_worker_tags(tag);
    info->set_starting_round(task->starting_round);
    if (IsStaticSharding(state_.FindJob(iteration->job_id)->mode)) {
      const auto& list = config_.worker_addresses;
      info->set_shard_index(
          static_cast<int32_t>(std::find(list.begin(), list.end(), task->worker_address) - list.begin()));
    }
  }
  for (const auto& [t, ended] : iteration->ended_tasks) {
    TaskInfo* info = resp->add_tasks();
    info->set_task_id(t);
    info->set_worker_address(ended.worker_address);
    info->set_starting_round(ended.starting_round);
    info->set_ending_round(ended.ending_round);
  }
  if (!ExactlyOnceLocked(*iteration_id)) resp->set_splits_lost(iteration->splits_lost);
  if (state_.FindJob(iteration->job_id)->num_consumers > 0) GrantRoundsLocked(req, resp);
  if (ExactlyOnceLocked(*iteration_id)) TFD_RETURN_IF_ERROR(ConfirmReceiptsLocked(req, *iteration_id, resp));
  resp->set_iteration_finished(state_.IterationFinished(*iteration_id));
  return absl::OkStatus();
}

absl::Status Dispatcher::ReleaseClient(const ReleaseClientRequest& req, ReleaseClientResponse* resp) {
  absl::MutexLock lock(&mu_);
  if (req.client_id() == 0 || !state_.ClientIteration(req.client_id())) return absl::OkStatus();  // idempotent
  return ReleaseClientLocked(req.client_id(), absl::Now());
}

absl::Status Dispatcher::ReleaseClientLocked(int64_t client_id, absl::Time now) {
  const int64_t iteration_id = *state_.ClientIteration(client_id);
  Update u;
  u.mutable_release_client()->set_client_id(client_id);
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  client_last_seen_.erase(client_id);
  client_rounds_.erase(client_id);
  client_traffic_.erase(client_id);
  receipts_.ClientGone(iteration_id, client_id);
  spdlog::info("dispatcher: {} left {}", ClientName(client_id), IterationName(iteration_id));
  if (state_.FindIteration(iteration_id)->clients.empty()) iteration_unclaimed_since_[iteration_id] = now;
  return absl::OkStatus();
}

}  // namespace tfdata::service
