// The dispatcher's state: datasets, workers, jobs, iterations, tasks and clients.
//
// Glossary (see ../docs/guarantees.md and the product reference)
//   dataset    a registered pipeline, by id; identical pipelines share an id (fingerprint)
//   job        one processing of a dataset under a mode; named jobs are shared by readers
//   iteration  one pass of a job, keyed by (job, repetition)
//   task       the part of an iteration one worker runs (one task per worker per iteration)
//   client     a reader of an iteration
//
// The only mutator is Apply(update): the same code runs for live changes and, later, for journal
// replay, so every change must be expressible as an Update record (proto/journal.proto). Apply
// checks each record against the state and rejects inconsistent ones with FailedPrecondition,
// leaving the state unchanged.
//
// Not thread-safe: the owner (Dispatcher) serializes access.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/service/common/names.h"
#include "lib/service/common/read_progress.h"
#include "proto/journal.pb.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class DispatcherState {
 public:
  // Each record's fields are listed once more in dispatcher_state.cc (TFD_*_FIELDS), which
  // Snapshot and Restore copy: a new field goes there too, under its StateSnapshot name.
  struct Dataset {
    std::string id;
    std::string fingerprint;
    pipeline::Pipeline pipeline;
    Compression compression = COMPRESSION_NONE;
  };
  struct Job {
    int64_t id = 0;
    std::string dataset_id;
    ProcessingMode mode = PARALLEL_EPOCHS;
    std::string name;
    std::vector<int64_t> iterations;  // in repetition order
    int32_t num_consumers = 0;        // coordinated reads: round-robin over this many consumers
    bool cross_trainer_cache = false;
    // distributed_epoch: a lost worker's undelivered splits go back to the pool, not lost.
    bool exactly_once = false;
    // distributed_epoch: the splits as planned at creation (journals from before it was recorded
    // have none: the plan is then made again from the pipeline).
    std::optional<SplitPlanRecord> split_plan;
    // A resumed job (GetOrCreateJobRequest.resume): where its first iteration starts, as recorded,
    // and read (derived from it: not in the snapshot).
    std::optional<ResumePlan> resume;
    std::shared_ptr<const ReadProgress> resume_progress;
  };
  // Coordinated reads: a task whose worker was lost stays visible with the round it left the
  // rotation at, so that every consumer computes the same rotation.
  struct EndedTask {
    std::string worker_address;
    int64_t starting_round = 0;
    int64_t ending_round = 0;
  };
  struct Iteration {
    int64_t id = 0;
    int64_t job_id = 0;
    int64_t repetition = 0;
    std::set<int64_t> tasks;    // live tasks
    std::set<int64_t> clients;  // current clients
    bool garbage_collected = false;
    // distributed_epoch: per epoch, the next split to hand out; splits lost with dead workers.
    std::map<int64_t, int64_t> next_split;
    // Per epoch, splits a leaving worker gave back, handed out before next_split's.
    std::map<int64_t, std::vector<int64_t>> returned_splits;
    int64_t splits_lost = 0;
    std::map<int64_t, EndedTask> ended_tasks;  // by task id
  };
  struct Task {
    int64_t id = 0;
    int64_t iteration_id = 0;
    std::string worker_address;
    bool finished = false;
    // distributed_epoch: splits handed to the task, and how many of them (in that order) its
    // worker reported delivered in full.
    int64_t splits_assigned = 0;
    int64_t splits_delivered = 0;
    // The last assignment, to repeat it when its answer was lost: [last_first, last_first +
    // last_count) of last_epoch, or last_indices when it came from the returned splits.
    int64_t last_epoch = -1, last_first = 0, last_count = 0;
    std::vector<int64_t> last_indices;
    // Exactly-once: with last_indices, what readers already had of each (empty: nothing).
    google::protobuf::RepeatedPtrField<SkipRanges> last_skips;
    // The task was told that epochs below this have no splits left.
    int64_t epochs_ended = 0;
    // The splits assigned and not delivered (splits_assigned - splits_delivered of them), in
    // hand-out order: (outstanding_epochs[i], outstanding_indices[i]). What an exactly-once job
    // gives back to the pool when the task's worker is lost.
    std::vector<int64_t> outstanding_epochs, outstanding_indices;
    // Where split `index` of `epoch` is in the outstanding lists; nullopt when the task does not hold it.
    std::optional<size_t> FindOutstanding(int64_t epoch, int64_t index) const {
      for (size_t k = 0; k < outstanding_indices.size(); ++k) {
        if (outstanding_epochs[k] == epoch && outstanding_indices[k] == index) return k;
      }
      return std::nullopt;
    }
    int64_t starting_round = 0;  // coordinated reads
  };

  absl::Status Apply(const Update& update);
  // The whole state as one record; Apply(snapshot) on an empty state rebuilds it exactly.
  StateSnapshot Snapshot() const;

  // Queries. Pointers stay valid until the next Apply. A collected iteration of an unnamed job is
  // gone, with its job (nullptr); a named job's stays, marked garbage_collected.
  const Dataset* FindDataset(const std::string& id) const;
  const Dataset* FindDatasetByFingerprint(const std::string& fingerprint) const;
  const Job* FindJob(int64_t id) const;
  const Job* FindJobByName(const std::string& name) const;
  const Iteration* FindIteration(int64_t id) const;
  const Task* FindTask(int64_t id) const;
  // The iteration a client reads, or nullopt for an unknown client.
  std::optional<int64_t> ClientIteration(int64_t client_id) const;
  bool WorkerKnown(const std::string& address) const { return workers_.contains(address); }
  std::vector<std::string> Workers() const;
  size_t NumDatasets() const { return datasets_.size(); }
  std::vector<std::string> DatasetIds() const;
  std::vector<int64_t> JobIds() const;
  std::vector<int64_t> TaskIds() const;  // live tasks
  // Every job, by mode.
  std::map<ProcessingMode, int64_t> JobsByMode() const {
    std::map<ProcessingMode, int64_t> out;
    for (const auto& [id, job] : jobs_) ++out[job.mode];
    return out;
  }
  // A known worker's tags (empty for an unknown one).
  const std::vector<std::string>& WorkerTags(const std::string& address) const;
  // Live tasks of a worker.
  std::vector<int64_t> TasksOfWorker(const std::string& address) const;
  // Iterations not garbage-collected and not finished.
  std::vector<int64_t> ActiveIterations() const;
  std::vector<int64_t> ClientIds() const;
  // All live tasks finished (and there is at least one).
  bool IterationFinished(int64_t iteration_id) const;
  bool HasTaskOnWorker(int64_t iteration_id, const std::string& address) const;
  // distributed_epoch: the splits a task received last and could give back (the tail of its last
  // assignment that is not delivered), in hand-out order.
  std::vector<int64_t> ReturnableSplits(const Task& task) const;
  // Whether a live task of the iteration other than `except` may still ask for splits of `epoch`.
  bool EpochOpenElsewhere(int64_t iteration_id, int64_t epoch, int64_t except) const;
  // A resumed job's first iteration: what its readers handed out before (nullptr otherwise).
  const ReadProgress* ResumeOf(const Iteration& iteration) const;
  // distributed_epoch: the next split of `epoch` to hand out in order and the end of the run of
  // splits from it that may go out together (a resumed iteration leaves out what was handed out
  // before; otherwise the end is unbounded). AssignSplitsUpdate.first must be this next split.
  std::pair<int64_t, int64_t> NextSplitRun(const Iteration& iteration, int64_t epoch) const;

  // Id allocation: the next unused id of each kind (ids are never reused).
  int64_t NextJobId() const { return next_job_id_; }
  int64_t NextIterationId() const { return next_iteration_id_; }
  int64_t NextTaskId() const { return next_task_id_; }
  int64_t NextClientId() const { return next_client_id_; }
  // The next assigned dataset id (decimal, skipping ids users chose).
  std::string NextDatasetId() const;

 private:
  absl::Status RegisterDataset(const RegisterDatasetUpdate& u);
  absl::Status RegisterWorker(const RegisterWorkerUpdate& u);
  absl::Status CreateJob(const CreateJobUpdate& u);
  absl::Status CreateIteration(const CreateIterationUpdate& u);
  absl::Status CreateTask(const CreateTaskUpdate& u);
  absl::Status FinishTask(const FinishTaskUpdate& u);
  absl::Status RemoveWorker(const RemoveWorkerUpdate& u);
  absl::Status AcquireClient(const AcquireClientUpdate& u);
  absl::Status ReleaseClient(const ReleaseClientUpdate& u);
  absl::Status GarbageCollectIteration(const GarbageCollectIterationUpdate& u);
  absl::Status AssignSplits(const AssignSplitsUpdate& u);
  absl::Status DeliverSplits(const DeliverSplitsUpdate& u);
  absl::Status ReturnSplits(const ReturnSplitsUpdate& u);
  absl::Status EndSplits(const EndSplitsUpdate& u);
  absl::Status RequeueSplits(const RequeueSplitsUpdate& u);
  absl::Status Restore(const StateSnapshot& s);
  // Records a resumed job's plan, checked against its split plan.
  static absl::Status SetResume(Job& job, const ResumePlan& plan);

  std::map<std::string, Dataset> datasets_;
  std::map<std::string, std::string> dataset_by_fingerprint_;
  std::set<std::string> workers_;
  std::map<std::string, std::vector<std::string>> worker_tags_;  // workers with tags only
  std::map<int64_t, Job> jobs_;
  std::map<std::string, int64_t> job_by_name_;
  std::map<int64_t, Iteration> iterations_;
  // The iterations not garbage-collected (derived: kept by CreateIteration, GarbageCollectIteration
  // and Restore), so that every worker heartbeat's ActiveIterations() costs what is live, not
  // every iteration the dispatcher ever made.
  std::set<int64_t> live_iterations_;
  std::map<int64_t, Task> tasks_;
  std::map<int64_t, int64_t> client_iteration_;
  int64_t next_job_id_ = 1, next_iteration_id_ = 1, next_task_id_ = 1, next_client_id_ = 1;
  int64_t next_dataset_number_ = 1;
};

}  // namespace tfdata::service
