// distributed_epoch: GetSplits hands a task its next splits (and repeats a lost answer).
#include "lib/service/dispatcher/dispatcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "lib/core/status_macros.h"
#include "spdlog/spdlog.h"
#include "xxhash.h"

namespace tfdata::service {
namespace {

void SetSkips(const SkipRanges& skips, Split* split) {
  split->mutable_skip_begins()->Assign(skips.begins().begin(), skips.begins().end());
  split->mutable_skip_ends()->Assign(skips.ends().begin(), skips.ends().end());
}

}  // namespace

SkipRanges Dispatcher::SkipsLocked(const DispatcherState::Iteration& iteration, int64_t epoch, int64_t split) const {
  SkipRanges skips = receipts_.Received(iteration.id, epoch, split);
  const ReadProgress* resumed = state_.ResumeOf(iteration);
  if (resumed == nullptr) return skips;
  // What readers had handed out before the resume, with what readers of this job have since.
  const SeqRanges* before = resumed->PartialSplit(epoch, split);
  if (before == nullptr) return skips;
  SeqRanges all = *before;
  for (int i = 0; i < std::min(skips.begins_size(), skips.ends_size()); ++i) all.Add(skips.begins(i), skips.ends(i));
  SkipRanges out;
  for (const auto& [b, e] : all.ranges()) {
    out.add_begins(b);
    out.add_ends(e);
  }
  return out;
}

std::string SplitPlanFingerprint(const SplitPlan& plan) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  plan.ToRecord().SerializeToCodedStream(&coded);
  coded.Trim();
  return absl::StrFormat("%016x", XXH3_64bits(bytes.data(), bytes.size()));
}

absl::StatusOr<const SplitPlan*> Dispatcher::SplitPlanLocked(int64_t job_id) {
  auto it = split_plans_.find(job_id);
  if (it != split_plans_.end()) return &it->second;
  const auto* job = state_.FindJob(job_id);
  // The plan made at the job's creation, from the journal; made again only for jobs journaled
  // before plans were.
  TFD_ASSIGN_OR_RETURN(SplitPlan plan,
                       job->split_plan
                           ? SplitPlan::FromRecord(*job->split_plan)
                           : SplitPlan::Create(state_.FindDataset(job->dataset_id)->pipeline, config_.build_options));
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
      for (size_t k = 0; k < pooled.size(); ++k) {
        Split* s = resp->add_splits();
        *s = plan->Get(pooled[k]);
        if (k < static_cast<size_t>(task->last_skips.size())) SetSkips(task->last_skips[static_cast<int>(k)], s);
      }
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
  // Splits a leaving worker gave back (or, exactly once, a lost worker held) go first.
  if (auto pool = iteration->returned_splits.find(req.epoch()); pool != iteration->returned_splits.end()) {
    if (job->exactly_once) {
      // A dispatcher that restarted has no barrier for splits pooled before: it starts one.
      if (!receipts_.HasBarrierState(iteration->id)) StartReissueBarrierLocked(iteration->id);
      if (!receipts_.MayReissue(iteration->id)) {
        resp->set_retry_after_ms(kSplitRetryMs);
        return absl::OkStatus();
      }
    }
    Update u;
    auto* a = u.mutable_assign_splits();
    a->set_task_id(req.task_id());
    a->set_epoch(req.epoch());
    const int64_t n = std::min<int64_t>(max_splits, static_cast<int64_t>(pool->second.size()));
    for (int64_t k = 0; k < n; ++k) {
      a->add_indices(pool->second[k]);
      if (job->exactly_once) *a->add_skips() = SkipsLocked(*iteration, req.epoch(), pool->second[k]);
    }
    if (auto st = ApplyLocked(u); !st.ok()) return st;
    for (int k = 0; k < a->indices_size(); ++k) {
      Split* s = resp->add_splits();
      *s = plan->Get(a->indices(k));
      if (k < a->skips_size()) SetSkips(a->skips(k), s);
    }
    return absl::OkStatus();
  }
  // A resumed iteration leaves out the splits handed out before it.
  const auto [next, run_end] = state_.NextSplitRun(*iteration, req.epoch());
  const int64_t count = std::min<int64_t>(max_splits, std::min(plan->num_splits(), run_end) - next);
  if (count <= 0) {
    // Exactly once: the epoch ends only when no split of it can come back to the pool.
    if (job->exactly_once && !EpochSettledLocked(iteration->id, req.epoch())) {
      resp->set_retry_after_ms(kSplitRetryMs);
      return absl::OkStatus();
    }
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

}  // namespace tfdata::service
