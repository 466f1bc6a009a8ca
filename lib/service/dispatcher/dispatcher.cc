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
    const absl::Time start = absl::Now();
    const uint64_t before = journal_->size();
    if (auto st = journal_->Append(update); !st.ok()) {
      spdlog::error("dispatcher: {}", st.ToString());
      return absl::Status(st.code(), absl::StrCat("dispatcher: the change could not be journaled: ", st.message()));
    }
    journal_append_latency_.Record(absl::Now() - start);
    journal_appends_total_.fetch_add(1, std::memory_order_relaxed);
    journal_appended_bytes_total_.fetch_add(static_cast<int64_t>(journal_->size() - before), std::memory_order_relaxed);
  }
  absl::Status st = state_.Apply(update);
  if (st.ok() && update.has_assign_splits()) {
    splits_assigned_total_.fetch_add(update.assign_splits().count() + update.assign_splits().indices_size(),
                                     std::memory_order_relaxed);
  }
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
    workers_lost_total_.fetch_add(1, std::memory_order_relaxed);
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
      receipts_.ForgetIteration(iteration_id);
    }
  }
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
