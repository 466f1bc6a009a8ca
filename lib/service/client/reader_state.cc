// Reader's read state (issue 22): what SaveState records, and how a resumed read starts from
// the states it was given; see reader.h and read_progress.h.
#include "lib/core/status_macros.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/client/read_state.h"
#include "lib/service/client/reader.h"

namespace tfdata::service {

absl::Status Reader::SeedResumeLocked(const ResumePlan& resume, int64_t num_splits, int64_t elements_before) {
  // The dispatcher checked the plan against the dataset's splits: it parses.
  TFD_ASSIGN_OR_RETURN(ReadProgress before, ReadProgress::FromPlan(resume, num_splits, "read state"));
  progress_.Merge(before);
  elements_before_ = elements_before;
  next_split_ = {before.first_epoch(), 0};
  resumed_from_ = std::move(before);
  // The elements handed out before count as received: a worker skips them, and the readers'
  // receipts must still add up to whole splits.
  for (const EpochResume& e : resume.epochs()) {
    for (const auto& [split, handed] : resumed_from_->Partial(e.epoch())) ledger_.Seed(e.epoch(), split, handed);
  }
  return absl::OkStatus();
}

absl::Status Reader::SeedShardResumeLocked(const ResumePlan& resume, int64_t elements_before) {
  TFD_ASSIGN_OR_RETURN(ShardReadProgress before, ShardReadProgress::FromPlan(resume, "read state"));
  shard_progress_.Merge(before);
  resumed_positions_ = ShardPositions(before);
  elements_before_ = elements_before;
  return absl::OkStatus();
}

absl::StatusOr<ReadState> Reader::SaveState() const {
  if (IsStaticSharding(options_.mode)) {
    absl::MutexLock lock(&mu_);
    ReadState state;
    state.set_version(kReadStateVersion);
    state.set_mode(options_.mode);
    state.set_elements(elements_before_ + elements_delivered_);
    state.set_job_name(options_.job_name);
    shard_progress_.ToPlan(state.mutable_handed());
    state.mutable_handed()->set_dataset_fingerprint(dataset_fingerprint_);
    return state;
  }
  if (!options_.exactly_once) {
    return absl::FailedPreconditionError(
        "a read state needs exactly-once reads (--exactly-once, exactly_once=True) in --mode distributed_epoch, or "
        "static sharding: a parallel_epochs read has no position that a new job could resume from "
        "(docs/guarantees.md)");
  }
  absl::MutexLock lock(&mu_);
  ReadState state;
  state.set_version(kReadStateVersion);
  state.set_mode(options_.mode);
  state.set_num_splits(progress_.num_splits());
  state.set_elements(elements_before_ + elements_delivered_);
  state.set_job_name(options_.job_name);
  *state.mutable_handed() = progress_.ToPlan();
  state.mutable_handed()->set_dataset_fingerprint(dataset_fingerprint_);
  state.mutable_handed()->set_plan_fingerprint(plan_fingerprint_);
  return state;
}

}  // namespace tfdata::service
