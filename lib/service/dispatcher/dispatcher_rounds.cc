// Coordinated reads on the dispatcher: the round-limit lease that keeps every consumer's view of
// the round-robin rotation the same while workers join and leave.
//
// Consumers fetch round r from the task rotation[r % size], where the rotation at r is the
// iteration's tasks with starting_round <= r < ending_round, ordered by task id. For all consumers
// to compute the same rotation, a change must take effect at a round none of them has fetched yet.
// Each client may fetch only rounds below the limit it was last granted; a change takes effect at
// the highest limit granted to any client of the iteration, and every grant above it is sent in
// the same reply as the changed task list.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/builder.h"
#include "lib/pipeline/dataset.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/dispatcher/dispatcher.h"

namespace tfdata::service {
namespace {

// Bounds of the rounds a client may be ahead of its last heartbeat.
constexpr int64_t kMinRoundWindow = 16;
constexpr int64_t kMaxRoundWindow = 1 << 16;

}  // namespace

absl::Status Dispatcher::CheckJobOptions(const GetOrCreateJobRequest& req) {
  if (req.num_consumers() < 0)
    return absl::InvalidArgumentError("get or create job: --num-consumers must be at least 0");
  if (req.num_consumers() > 0) {
    if (req.job_name().empty()) {
      return absl::InvalidArgumentError(
          "coordinated reads (--num-consumers) need a --job-name shared by the consumers");
    }
    // Static sharding pins each reader to its local worker; round robin needs all of them.
    if (req.mode() != PARALLEL_EPOCHS && req.mode() != DISTRIBUTED_EPOCH) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinated reads (--num-consumers) need --mode parallel_epochs or distributed_epoch, not ",
                       ProcessingMode_Name(req.mode())));
    }
    if (req.consumer_index() < 0 || req.consumer_index() >= req.num_consumers()) {
      return absl::InvalidArgumentError(absl::StrCat("--consumer-index ", req.consumer_index(),
                                                     " is outside [0, --num-consumers ", req.num_consumers(), ")"));
    }
    if (req.cross_trainer_cache()) {
      return absl::InvalidArgumentError(
          "--cross-trainer-cache and coordinated reads (--num-consumers) cannot be combined");
    }
  } else if (req.consumer_index() != 0) {
    return absl::InvalidArgumentError("--consumer-index needs --num-consumers");
  }
  if (req.exactly_once()) {
    if (req.mode() != DISTRIBUTED_EPOCH) {
      return absl::InvalidArgumentError(
          absl::StrCat("exactly-once reads need --mode distributed_epoch, not ", ProcessingMode_Name(req.mode())));
    }
    if (req.num_consumers() > 0) {
      return absl::InvalidArgumentError(
          "exactly-once reads and coordinated reads (--num-consumers) cannot be combined");
    }
  }
  if (req.has_resume() && !IsStaticSharding(req.mode()) && !req.exactly_once()) {
    return absl::InvalidArgumentError(
        req.mode() == DISTRIBUTED_EPOCH
            ? "resuming from a read state needs exactly-once reads (--exactly-once, exactly_once=True)"
            : "resuming from a read state needs --mode distributed_epoch (exactly once) or static sharding: in "
              "parallel_epochs every worker makes a pass of its own, and no position says what a new job should "
              "leave out");
  }
  if (req.has_resume() && req.num_consumers() > 0) {
    return absl::InvalidArgumentError(
        "coordinated reads (--num-consumers) do not resume: a round's elements come from whichever worker's "
        "stream is at that round, which a new job cannot reproduce");
  }
  if (req.cross_trainer_cache()) {
    if (req.job_name().empty()) {
      return absl::InvalidArgumentError("--cross-trainer-cache needs a --job-name shared by the trainers");
    }
    if (req.mode() != PARALLEL_EPOCHS) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cross-trainer-cache needs --mode parallel_epochs, not ", ProcessingMode_Name(req.mode())));
    }
  }
  return absl::OkStatus();
}

absl::Status Dispatcher::CheckInfinite(const pipeline::Pipeline& pipeline, const BuildOptions& options) {
  // A last `repeat` without a count never ends, whatever precedes it: accepted without building
  // the pipeline here (its files may exist only on the workers).
  if (!pipeline.op().empty()) {
    const pipeline::Op& last = *pipeline.op().rbegin();
    if (last.has_repeat() && (!last.repeat().has_count() || last.repeat().count() < 0)) return absl::OkStatus();
  }
  TFD_ASSIGN_OR_RETURN(auto dataset, BuildDataset(pipeline, options));
  const int64_t n = dataset->Cardinality();
  if (n == Dataset::kInfinite) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the pipeline must be infinite (end it with `op { repeat {} }`), but it has ",
                   n >= 0 ? absl::StrCat(n, " element(s)") : std::string("an unknown number of elements")));
}

void Dispatcher::GrantRoundsLocked(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp) {
  auto [it, inserted] = client_rounds_.try_emplace(req.client_id(), ClientRounds{req.consumer_index(), 0});
  ClientRounds& r = it->second;
  const int64_t window = std::clamp<int64_t>(req.round_window(), kMinRoundWindow, kMaxRoundWindow);
  // Never lower a limit: the client may already be fetching up to the one it holds.
  r.limit = std::max({r.limit, req.round_limit(), req.current_round() + window});
  resp->set_round_limit(r.limit);
}

std::optional<int64_t> Dispatcher::RotationChangeRoundLocked(int64_t iteration_id) const {
  int64_t round = 0;
  for (int64_t c : state_.FindIteration(iteration_id)->clients) {
    auto it = client_rounds_.find(c);
    if (it == client_rounds_.end()) return std::nullopt;
    round = std::max(round, it->second.limit);
  }
  return round;
}

void Dispatcher::AddTaskEndsLocked(const std::vector<int64_t>& tasks, RemoveWorkerUpdate* u) const {
  for (int64_t t : tasks) {
    const int64_t iteration_id = state_.FindTask(t)->iteration_id;
    if (state_.FindJob(state_.FindIteration(iteration_id)->job_id)->num_consumers == 0) continue;
    // A client that has not reported since a restart holds at most what it reports next; the
    // worker is lost anyway, so the consumers only need one agreed end: take the known maximum.
    int64_t end = 0;
    for (int64_t c : state_.FindIteration(iteration_id)->clients) {
      if (auto it = client_rounds_.find(c); it != client_rounds_.end()) end = std::max(end, it->second.limit);
    }
    TaskEnd* e = u->add_task_ends();
    e->set_task_id(t);
    e->set_ending_round(std::max({end, state_.FindTask(t)->starting_round, int64_t{1}}));  // 0 means "never"
  }
}

}  // namespace tfdata::service
