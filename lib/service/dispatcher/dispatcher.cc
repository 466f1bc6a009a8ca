#include "lib/service/dispatcher/dispatcher.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "absl/random/random.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/fingerprint.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/common/wire_compression.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

bool ValidDatasetId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  }
  return true;
}

}  // namespace

Dispatcher::Dispatcher(DispatcherConfig config)
    : config_(config), incarnation_id_(absl::Uniform<uint64_t>(absl::BitGen()) | 1) {}

Dispatcher::~Dispatcher() { Stop(); }

absl::Status Dispatcher::Recover() {
  if (!config_.fault_tolerant) return absl::OkStatus();
  if (config_.work_dir.empty()) return absl::InvalidArgumentError("--fault-tolerant needs --work-dir");
  std::error_code ec;
  std::filesystem::create_directories(config_.work_dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("dispatcher work directory ", config_.work_dir, ": cannot create it: ", ec.message()));
  }
  const std::string path = config_.work_dir + "/journal";
  TFD_ASSIGN_OR_RETURN(auto contents, ReadJournal(path));
  TFD_ASSIGN_OR_RETURN(auto file, config_.open_journal_file ? config_.open_journal_file(path) : OpenJournalFile(path));
  absl::MutexLock lock(&mu_);
  if (!contents.warning.empty()) {
    spdlog::warn("dispatcher: {}", contents.warning);
    TFD_RETURN_IF_ERROR(file->Truncate(contents.valid_bytes));
  }
  int64_t rejected = 0;
  for (const Update& u : contents.updates) {
    if (!state_.Apply(u).ok()) ++rejected;  // rejected live too (see ApplyLocked)
  }
  journal_ = std::make_unique<JournalWriter>(std::move(file), contents.valid_bytes, path);
  if (auto st = journal_->Init(); !st.ok()) {
    journal_.reset();
    return absl::Status(st.code(), absl::StrCat("dispatcher work directory ", config_.work_dir,
                                                ": cannot write the journal: ", st.message()));
  }
  journal_path_ = path;
  compact_at_ = config_.compact_after_records;
  if (static_cast<int64_t>(contents.updates.size()) > config_.compact_after_records) CompactLocked();
  // Time-outs restart from now: everyone gets a full time-out to reach the restarted dispatcher.
  const absl::Time now = absl::Now();
  for (const std::string& w : state_.Workers()) worker_last_seen_[w] = now;
  for (int64_t c : state_.ClientIds()) client_last_seen_[c] = now;
  for (int64_t it : state_.ActiveIterations()) {
    if (state_.FindIteration(it)->clients.empty()) iteration_unclaimed_since_[it] = now;
  }
  spdlog::info(
      "dispatcher: recovered {} journal record(s) from {} ({} rejected as when live): {} worker(s), next "
      "job id {}",
      contents.updates.size(), path, rejected, state_.Workers().size(), state_.NextJobId());
  return absl::OkStatus();
}

void Dispatcher::Start() {
  if (timeout_thread_.joinable()) return;
  timeout_thread_ = std::thread([this] { TimeoutLoop(); });
}

void Dispatcher::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (timeout_thread_.joinable()) timeout_thread_.join();
}

void Dispatcher::TimeoutLoop() {
  // Check often enough that a time-out is applied within a quarter of its length (and at least
  // every second), so tests with short time-outs do not wait long.
  absl::Duration period = std::min({config_.worker_timeout, config_.client_timeout, config_.job_gc_timeout}) / 4;
  period = std::clamp(period, absl::Milliseconds(10), absl::Seconds(1));
  while (!stop_.WaitForNotificationWithTimeout(period)) CheckTimeouts(absl::Now());
}

absl::Status Dispatcher::ApplyLocked(const Update& update) {
  if (journal_ != nullptr) {
    // Journal first: a change that is not durable is not made (and the RPC fails). A record the
    // state then rejects is rejected the same way on replay, so the journal never disagrees.
    if (auto st = journal_->Append(update); !st.ok()) {
      spdlog::error("dispatcher: {}", st.ToString());
      return absl::Status(st.code(), absl::StrCat("dispatcher: the change could not be journaled: ", st.message()));
    }
  }
  absl::Status st = state_.Apply(update);
  if (!st.ok()) spdlog::error("dispatcher: rejected state update ({}): {}", update.ShortDebugString(), st.ToString());
  if (journal_ != nullptr && journal_->records_written() >= compact_at_) CompactLocked();
  return st;
}

void Dispatcher::CompactLocked() {
  const int64_t records = journal_->records_written();
  Update snapshot;
  *snapshot.mutable_snapshot() = state_.Snapshot();
  auto size = RewriteJournal(journal_path_, {snapshot});
  auto file = size.ok() ? (config_.open_journal_file ? config_.open_journal_file(journal_path_)
                                                     : OpenJournalFile(journal_path_))
                        : absl::StatusOr<std::unique_ptr<JournalFile>>(size.status());
  if (!file.ok()) {
    // The old journal is still whole (the rename is atomic); try again after as many records.
    spdlog::warn("dispatcher: journal compaction failed, keeping the journal as it is: {}", file.status().ToString());
    compact_at_ = records + config_.compact_after_records;
    return;
  }
  journal_ = std::make_unique<JournalWriter>(*std::move(file), *size, journal_path_);
  compact_at_ = config_.compact_after_records;
  spdlog::info("dispatcher: compacted the journal: {} record(s) -> one snapshot of {} bytes", records, *size);
}

absl::Status Dispatcher::RegisterDataset(const RegisterDatasetRequest& req, RegisterDatasetResponse* resp) {
  if (req.pipeline().op_size() == 0) return absl::InvalidArgumentError("register dataset: the pipeline has no ops");
  if (!req.dataset_id().empty() && !ValidDatasetId(req.dataset_id())) {
    return absl::InvalidArgumentError(absl::StrCat("register dataset: invalid dataset id \"", req.dataset_id(),
                                                   "\" (use 1-128 characters of A-Z a-z 0-9 _ . -)"));
  }
  if (!Compression_IsValid(req.compression())) {
    return absl::InvalidArgumentError(absl::StrCat("register dataset: unknown compression ", req.compression()));
  }
  // The compression is part of the dataset's identity (it changes what workers send).
  std::string fingerprint = PipelineFingerprint(req.pipeline());
  if (req.compression() != COMPRESSION_NONE) absl::StrAppend(&fingerprint, "/", Compression_Name(req.compression()));
  absl::MutexLock lock(&mu_);
  if (!req.dataset_id().empty()) {
    if (const auto* existing = state_.FindDataset(req.dataset_id())) {
      if (existing->fingerprint != fingerprint) {
        return absl::AlreadyExistsError(absl::StrCat("register dataset: dataset id \"", req.dataset_id(),
                                                     "\" is already bound to a different pipeline (or compression)"));
      }
      resp->set_dataset_id(existing->id);
      resp->set_already_registered(true);
      return absl::OkStatus();
    }
  } else if (const auto* existing = state_.FindDatasetByFingerprint(fingerprint)) {
    resp->set_dataset_id(existing->id);
    resp->set_already_registered(true);
    return absl::OkStatus();
  }
  Update u;
  auto* r = u.mutable_register_dataset();
  r->set_dataset_id(req.dataset_id().empty() ? state_.NextDatasetId() : req.dataset_id());
  r->set_fingerprint(fingerprint);
  *r->mutable_pipeline() = req.pipeline();
  r->set_compression(req.compression());
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  spdlog::info("dispatcher: registered dataset {} ({} ops, fingerprint {}, compression {})", r->dataset_id(),
               req.pipeline().op_size(), fingerprint.substr(0, 12), CompressionFlagName(req.compression()));
  resp->set_dataset_id(r->dataset_id());
  return absl::OkStatus();
}

absl::Status Dispatcher::GetDataset(const GetDatasetRequest& req, GetDatasetResponse* resp) {
  absl::MutexLock lock(&mu_);
  const auto* ds = state_.FindDataset(req.dataset_id());
  if (ds == nullptr) return absl::NotFoundError(absl::StrCat("unknown dataset \"", req.dataset_id(), "\""));
  *resp->mutable_pipeline() = ds->pipeline;
  resp->set_compression(ds->compression);
  return absl::OkStatus();
}

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
    info->set_splits_undelivered(task->splits_assigned - task->splits_delivered);
    for (const std::string& tag : state_.WorkerTags(task->worker_address)) info->add_worker_tags(tag);
    info->set_starting_round(task->starting_round);
  }
  for (const auto& [t, ended] : iteration->ended_tasks) {
    TaskInfo* info = resp->add_tasks();
    info->set_task_id(t);
    info->set_worker_address(ended.worker_address);
    info->set_starting_round(ended.starting_round);
    info->set_ending_round(ended.ending_round);
  }
  if (state_.FindJob(iteration->job_id)->num_consumers > 0) GrantRoundsLocked(req, resp);
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
  spdlog::info("dispatcher: {} left {}", ClientName(client_id), IterationName(iteration_id));
  if (state_.FindIteration(iteration_id)->clients.empty()) iteration_unclaimed_since_[iteration_id] = now;
  return absl::OkStatus();
}

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
  if (IsStaticSharding(job->mode)) {
    const auto& list = config_.worker_addresses;
    def->set_num_workers(static_cast<int32_t>(list.size()));
    def->set_worker_index(
        static_cast<int32_t>(std::find(list.begin(), list.end(), task->worker_address) - list.begin()));
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
    const auto* task = state_.FindTask(p.task_id());
    if (task == nullptr || task->worker_address != worker || p.splits_delivered() <= task->splits_delivered) continue;
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
  return absl::OkStatus();
}

void Dispatcher::RemoveWorkerLocked(const std::string& worker, const std::string& why) {
  worker_last_seen_.erase(worker);
  unreachable_reports_.erase(worker);
  Update u;
  u.mutable_remove_worker()->set_worker_address(worker);
  const std::vector<int64_t> tasks = state_.TasksOfWorker(worker);
  AddTaskEndsLocked(tasks, u.mutable_remove_worker());
  int64_t lost = 0;
  for (int64_t t : tasks) {
    const auto* task = state_.FindTask(t);
    lost += task->splits_assigned - task->splits_delivered;
  }
  if (ApplyLocked(u).ok()) {
    spdlog::warn("dispatcher: worker {} {}; its {} task(s) removed{}", worker, why, tasks.size(),
                 lost > 0 ? absl::StrCat("; ", lost, " split(s) it held are lost") : "");
  }
}

void Dispatcher::CheckTimeouts(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (!state_.ActiveIterations().empty() || !state_.ClientIds().empty()) last_active_ = now;
  for (auto it = worker_last_seen_.begin(); it != worker_last_seen_.end();) {
    if (now - it->second <= config_.worker_timeout) {
      ++it;
      continue;
    }
    const std::string worker = it->first;
    ++it;  // RemoveWorkerLocked erases the entry
    RemoveWorkerLocked(worker,
                       absl::StrCat("lost (silent for more than ", absl::FormatDuration(config_.worker_timeout), ")"));
  }
  for (auto it = client_last_seen_.begin(); it != client_last_seen_.end();) {
    const int64_t client = it->first;
    const bool expired = now - it->second > config_.client_timeout;
    ++it;  // ReleaseClientLocked erases the entry
    if (expired) {
      spdlog::warn("dispatcher: {} silent for more than {}: released", ClientName(client),
                   absl::FormatDuration(config_.client_timeout));
      (void)ReleaseClientLocked(client, now);
    }
  }
  if (config_.job_gc_timeout == absl::InfiniteDuration()) return;
  for (auto it = iteration_unclaimed_since_.begin(); it != iteration_unclaimed_since_.end();) {
    if (now - it->second <= config_.job_gc_timeout) {
      ++it;
      continue;
    }
    const int64_t iteration_id = it->first;
    it = iteration_unclaimed_since_.erase(it);
    const auto* iteration = state_.FindIteration(iteration_id);
    if (iteration == nullptr) continue;
    const int64_t job_id = iteration->job_id;  // the record may erase the iteration and its job
    Update u;
    u.mutable_garbage_collect_iteration()->set_iteration_id(iteration_id);
    if (ApplyLocked(u).ok()) {
      spdlog::info("dispatcher: {} of {} garbage-collected (no clients for {})", IterationName(iteration_id),
                   JobName(job_id), absl::FormatDuration(config_.job_gc_timeout));
      // Its split plan is derived state, made again if the job ever gets another iteration.
      split_plans_.erase(job_id);
    }
  }
}

absl::StatusOr<const SplitPlan*> Dispatcher::SplitPlanLocked(int64_t job_id) {
  auto it = split_plans_.find(job_id);
  if (it != split_plans_.end()) return &it->second;
  const auto* job = state_.FindJob(job_id);
  TFD_ASSIGN_OR_RETURN(SplitPlan plan,
                       SplitPlan::Create(state_.FindDataset(job->dataset_id)->pipeline, config_.build_options));
  return &split_plans_.emplace(job_id, std::move(plan)).first->second;
}

absl::Status Dispatcher::GetSplits(const GetSplitsRequest& req, GetSplitsResponse* resp) {
  absl::MutexLock lock(&mu_);
  const auto* task = state_.FindTask(req.task_id());
  if (task == nullptr) {
    return absl::NotFoundError(absl::StrCat("get splits: unknown ", TaskName(req.task_id()),
                                            " (its worker was declared lost, or its job ended)"));
  }
  const auto* iteration = state_.FindIteration(task->iteration_id);
  const auto* job = state_.FindJob(iteration->job_id);
  if (job->mode != DISTRIBUTED_EPOCH) {
    return absl::FailedPreconditionError(
        absl::StrCat("get splits: ", TaskName(req.task_id()), " is in mode ", ProcessingMode_Name(job->mode)));
  }
  if (req.epoch() < 0) return absl::InvalidArgumentError("get splits: negative epoch");
  TFD_ASSIGN_OR_RETURN(const SplitPlan* plan, SplitPlanLocked(job->id));
  if (req.splits_received() < task->splits_assigned) {
    // The answer to the task's last request never arrived: send the same splits again.
    const std::vector<int64_t>& pooled = task->last_indices;
    const int64_t last_count = pooled.empty() ? task->last_count : static_cast<int64_t>(pooled.size());
    if (req.splits_received() + last_count == task->splits_assigned && req.epoch() == task->last_epoch) {
      for (int64_t i : pooled) *resp->add_splits() = plan->Get(i);
      for (int64_t i = task->last_first; pooled.empty() && i < task->last_first + task->last_count; ++i) {
        *resp->add_splits() = plan->Get(i);
      }
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(absl::StrCat("get splits: ", TaskName(req.task_id()), " reports ",
                                                      req.splits_received(), " splits received of ",
                                                      task->splits_assigned, " handed out"));
  }
  const int64_t max_splits = std::clamp<int32_t>(req.max_splits(), 1, kMaxSplitsPerRequest);
  // Splits a leaving worker gave back go first.
  if (auto pool = iteration->returned_splits.find(req.epoch()); pool != iteration->returned_splits.end()) {
    Update u;
    auto* a = u.mutable_assign_splits();
    a->set_task_id(req.task_id());
    a->set_epoch(req.epoch());
    const int64_t n = std::min<int64_t>(max_splits, static_cast<int64_t>(pool->second.size()));
    for (int64_t k = 0; k < n; ++k) a->add_indices(pool->second[k]);
    if (auto st = ApplyLocked(u); !st.ok()) return st;
    for (int64_t i : a->indices()) *resp->add_splits() = plan->Get(i);
    return absl::OkStatus();
  }
  auto next_it = iteration->next_split.find(req.epoch());
  const int64_t next = next_it == iteration->next_split.end() ? 0 : next_it->second;
  const int64_t count = std::min<int64_t>(max_splits, plan->num_splits() - next);
  if (count <= 0) {
    if (task->epochs_ended <= req.epoch()) {  // recorded once: splits returned later skip this task
      Update u;
      u.mutable_end_splits()->set_task_id(req.task_id());
      u.mutable_end_splits()->set_epoch(req.epoch());
      if (auto st = ApplyLocked(u); !st.ok()) return st;
    }
    resp->set_end_of_splits(true);
    return absl::OkStatus();
  }
  Update u;
  auto* a = u.mutable_assign_splits();
  a->set_task_id(req.task_id());
  a->set_epoch(req.epoch());
  a->set_first(next);
  a->set_count(count);
  TFD_RETURN_IF_ERROR(ApplyLocked(u));
  for (int64_t i = next; i < next + count; ++i) *resp->add_splits() = plan->Get(i);
  return absl::OkStatus();
}

absl::Duration Dispatcher::IdleFor(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (!state_.ActiveIterations().empty() || !state_.ClientIds().empty()) return absl::ZeroDuration();
  return now - last_active_;
}

size_t Dispatcher::NumWorkers() const {
  absl::MutexLock lock(&mu_);
  return state_.Workers().size();
}

StateSnapshot Dispatcher::SnapshotForTesting() const {
  absl::MutexLock lock(&mu_);
  return state_.Snapshot();
}

}  // namespace tfdata::service
