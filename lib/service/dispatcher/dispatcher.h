// The dispatcher core: the service's coordinator, without any RPC code. The gRPC adapter
// (grpc_dispatcher.h) turns each DispatcherService RPC into one call here.
//
// State lives in DispatcherState and changes only through Apply(Update) (see dispatcher_state.h);
// this class decides which updates each request causes. Liveness (when workers and clients were
// last heard from) is not state: it is rebuilt from heartbeats.
//
// Thread-safe: every public method may be called from any thread. Start() begins the background
// liveness checks; the destructor (or Stop()) ends them.
//
// Where each RPC is handled: dispatcher.cc (RegisterDataset, GetDataset; recovery, the journal,
// time-outs), dispatcher_jobs.cc (GetOrCreateJob, ClientHeartbeat, ReleaseClient),
// dispatcher_workers.cc (WorkerHeartbeat: tasks, leaving, suspicion, lost workers),
// dispatcher_splits.cc (GetSplits), dispatcher_rounds.cc (coordinated reads' leases),
// dispatcher_exactly_once.cc (exactly-once jobs: readers' receipts, re-issue barriers),
// dispatcher_status.cc (GetStatus: the operator's view, read-only). The state
// each changes: dispatcher_state.cc (dispatcher_state_splits.cc for the split records), one Apply
// case per journal record.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "lib/pipeline/splits.h"
#include "lib/service/common/latency_histogram.h"
#include "lib/service/dispatcher/dispatcher_state.h"
#include "lib/service/dispatcher/journal.h"
#include "lib/service/dispatcher/split_receipts.h"
#include "lib/service/dispatcher/totals_window.h"
#include "proto/service.pb.h"

namespace tfdata::service {

// 16 hex digits: XXH3-64 of the split plan's record, deterministically serialized. A read state
// keeps it, so that a resume after the source changed (a file list) is refused.
std::string SplitPlanFingerprint(const SplitPlan& plan);

struct DispatcherConfig {
  // A worker silent this long is lost: its tasks leave the clients' task lists.
  absl::Duration worker_timeout = absl::Minutes(10);
  // A client silent this long is released.
  absl::Duration client_timeout = absl::Minutes(5);
  // An iteration with no clients this long is garbage-collected (InfiniteDuration: never).
  absl::Duration job_gc_timeout = absl::Minutes(5);
  // Static sharding: the fixed worker list, as the workers advertise themselves ("host:port");
  // a worker's index is its position. When set, other workers are refused. Empty: any worker.
  std::vector<std::string> worker_addresses;
  // Fault tolerance: journal every state change to `work_dir`/journal (synced before the RPC is
  // answered) and replay it on start. fault_tolerant without a work_dir is an error.
  std::string work_dir;
  bool fault_tolerant = false;
  // The journal's file writes (tests substitute torn writes and full disks). Null: the real file.
  std::function<absl::StatusOr<std::unique_ptr<JournalFile>>(const std::string& path)> open_journal_file;
  // Compaction: after this many records the journal is rewritten as one snapshot of the state,
  // so restart time stays bounded on long jobs.
  int64_t compact_after_records = 100000;
  // How the dispatcher builds pipelines to plan their splits and to check coordinated reads'
  // pipelines; its `paths` bound what list_files may list (dispatcher --allowed-path), since the
  // names it lists go to workers and readers. Plugins are off: the dispatcher never runs a
  // pipeline's functions, and must not load a library a client names.
  BuildOptions build_options = [] {
    BuildOptions o;
    o.functions.allow_plugins = false;
    return o;
  }();
};

// What an operator sees of a dispatcher now (lib/service/metrics): counts of the state, taken
// under the lock, and totals since the process started (not journaled: they restart from 0).
struct DispatcherCounts {
  int64_t workers = 0;            // registered and not removed
  int64_t workers_suspected = 0;  // of those, reported unreachable by readers
  int64_t datasets = 0;
  std::map<ProcessingMode, int64_t> jobs;  // every job the state knows, by mode
  int64_t active_iterations = 0;           // not finished, not garbage-collected
  int64_t readers = 0;                     // clients reading an iteration
  int64_t workers_lost_total = 0;          // removed after --worker-timeout
  int64_t workers_left_total = 0;          // removed on their leaving heartbeat (SIGTERM)
  int64_t splits_assigned_total = 0;       // distributed_epoch splits handed to tasks
  int64_t splits_lost_total = 0;           // held by a removed worker, not given out again
  // Fault-tolerant dispatchers: records appended (synced), their bytes, the append+sync latency,
  // and the journal file's size now (it shrinks when compacted).
  int64_t journal_appends_total = 0;
  int64_t journal_appended_bytes_total = 0;
  LatencyHistogram::Snapshot journal_append_latency;
  int64_t journal_bytes = 0;
};

class Dispatcher {
 public:
  explicit Dispatcher(DispatcherConfig config);
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Fault-tolerant dispatchers: opens the work directory and replays its journal through the same
  // Apply as live updates (a torn last record is dropped with a warning; corruption elsewhere, or a
  // directory that cannot be created or written, is an error). Call before serving. A no-op
  // otherwise.
  absl::Status Recover();
  // Starts the background thread that applies the time-outs.
  void Start();
  void Stop();

  absl::Status RegisterDataset(const RegisterDatasetRequest& req, RegisterDatasetResponse* resp);
  absl::Status GetDataset(const GetDatasetRequest& req, GetDatasetResponse* resp);
  absl::Status GetOrCreateJob(const GetOrCreateJobRequest& req, GetOrCreateJobResponse* resp);
  absl::Status ClientHeartbeat(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp);
  absl::Status ReleaseClient(const ReleaseClientRequest& req, ReleaseClientResponse* resp);
  absl::Status WorkerHeartbeat(const WorkerHeartbeatRequest& req, WorkerHeartbeatResponse* resp);
  absl::Status GetSplits(const GetSplitsRequest& req, GetSplitsResponse* resp);
  // The operator's view (dispatcher_status.cc): workers, datasets, live jobs with their rates,
  // stall and worker estimate, the journal. The one source of /, /status.json, `tfdata status`
  // and the per-job metrics.
  absl::Status GetStatus(const GetStatusRequest& req, DispatcherStatus* resp) const;
  // GetSplits hands out at most this many splits per request, whatever max_splits asks (workers
  // ask for up to 16): a request for 2^31 splits of a huge range would hold the lock while
  // building an answer that does not fit in memory.
  static constexpr int32_t kMaxSplitsPerRequest = 1024;

  // Applies the time-outs as of `now`: loses silent workers, releases silent clients,
  // garbage-collects iterations without clients. Called by the background thread; public so that
  // tests can drive time.
  void CheckTimeouts(absl::Time now);

  // For tests and status output.
  size_t NumWorkers() const;
  DispatcherCounts Counts() const;
  // A copy of the whole state (DispatcherState::Snapshot()), taken under the lock. For tests and
  // fuzzers only (tests/fuzz/dispatcher_rpc_fuzz.cc compares it with a replay of the journal);
  // the service never reads it.
  StateSnapshot SnapshotForTesting() const;
  // How long no job has been active (no unfinished iteration and no reader) as of `now`; counted
  // from the start when none ever was. For --exit-when-idle.
  absl::Duration IdleFor(absl::Time now) const;

 private:
  absl::Status ApplyLocked(const Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // GetOrCreateJob's steps, in order. Each change goes through ApplyLocked.
  // Checks what the request decides alone (its mode and options against each other and the config).
  absl::Status CheckJobRequest(const GetOrCreateJobRequest& req) const;
  // The job the request names, checked against the request's options; nullptr when it names
  // none or one that does not exist yet.
  absl::StatusOr<const DispatcherState::Job*> FindNamedJobLocked(const GetOrCreateJobRequest& req) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Checks that the dataset's pipeline suits a new job of the request, and makes its split plan
  // (distributed_epoch; nullopt otherwise).
  absl::StatusOr<std::optional<SplitPlan>> PlanNewJobLocked(const GetOrCreateJobRequest& req) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Creates the job the request asks for; returns its id.
  absl::StatusOr<int64_t> CreateJobLocked(const GetOrCreateJobRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The job's latest iteration; a new job first gets its first one, with a task on every known worker.
  absl::StatusOr<int64_t> CurrentIterationLocked(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Coordinated reads: AlreadyExists when another client of the iteration reads the request's consumer index.
  absl::Status CheckConsumerFreeLocked(const GetOrCreateJobRequest& req, int64_t iteration_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds a client for the request to the (not garbage-collected) iteration; returns its id.
  absl::StatusOr<int64_t> JoinIterationLocked(const GetOrCreateJobRequest& req, int64_t job_id, int64_t iteration_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Creates a task on `worker` for every active iteration that has none there.
  absl::Status AssignTasksLocked(const std::string& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CreateTaskLocked(int64_t iteration_id, const std::string& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReleaseClientLocked(int64_t client_id, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's last heartbeat (leaving): gives back its tasks' unstarted splits where another
  // task of the epoch can still take them, then removes the worker.
  absl::Status LeaveLocked(const WorkerHeartbeatRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes a worker and its tasks (journaled) and logs `why` with the splits lost.
  void RemoveWorkerLocked(const std::string& worker, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Readers reported the worker unreachable kSuspectAfterReports times since it last heartbeated.
  bool SuspectedLocked(const std::string& worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr int kSuspectAfterReports = 2;
  void FillTaskDef(int64_t task_id, TaskDef* def) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Coordinated reads (dispatcher_rounds.cc). The rotation of an iteration's tasks changes only at
  // a round no consumer can have fetched yet: at or above every round limit granted to its clients.
  // Checks the request's coordinated-read and cross-trainer-cache options against each other.
  static absl::Status CheckJobOptions(const GetOrCreateJobRequest& req);
  // OK for a pipeline that never ends (coordinated reads need one). Builds it under `options` (the
  // dispatcher's: its --allowed-path, memory and plugin settings).
  static absl::Status CheckInfinite(const pipeline::Pipeline& pipeline, const BuildOptions& options);
  // Raises the client's round limit (its lease) from its heartbeat and returns it.
  void GrantRoundsLocked(const ClientHeartbeatRequest& req, ClientHeartbeatResponse* resp)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The first round a rotation change may take effect at; nullopt while some client of the
  // iteration has not reported its limit to this dispatcher process (after a restart).
  std::optional<int64_t> RotationChangeRoundLocked(int64_t iteration_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records where a lost worker's coordinated tasks leave their rotation.
  void AddTaskEndsLocked(const std::vector<int64_t>& tasks, RemoveWorkerUpdate* u) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Exactly-once jobs (dispatcher_exactly_once.cc). Whether the iteration's job reads exactly once.
  bool ExactlyOnceLocked(int64_t iteration_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The live task holding each outstanding split of the iteration, by (epoch, split).
  std::map<std::pair<int64_t, int64_t>, int64_t> HoldersLocked(int64_t iteration_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A reader's heartbeat: adds its receipts up with the other readers', delivers (journaled) the
  // splits they complete, tells it which of its splits are settled, and counts it toward a
  // re-issue barrier.
  absl::Status ConfirmReceiptsLocked(const ClientHeartbeatRequest& req, int64_t iteration_id,
                                     ClientHeartbeatResponse* resp) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker's report of the split ends its exactly-once task served.
  void NoteServedEndsLocked(const TaskProgress& progress, const std::string& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts splits served to their end but never received in full back in the pool (journaled).
  absl::Status RequeueStalledLocked(int64_t iteration_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long after a split's end was served its receipts may still be coming (requests in flight
  // and answers held for ordering end within a GetElements time-out).
  static constexpr absl::Duration kStallGrace = absl::Seconds(3);
  // Pooled splits of the iteration wait until every current reader has reported clean.
  void StartReissueBarrierLocked(int64_t iteration_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an exactly-once epoch may end for a task: no split of it is pooled or held by a live
  // task without the readers' confirmation (it could still come back to the pool).
  bool EpochSettledLocked(int64_t iteration_id, int64_t epoch) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What to skip of a split handed out again: what readers of this job have of it, and for a
  // resumed job's first iteration, what was handed out before the resume.
  SkipRanges SkipsLocked(const DispatcherState::Iteration& iteration, int64_t epoch, int64_t split) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Resumable reads: the request's plan fits the dataset and its splits as they are now.
  absl::Status CheckResumeLocked(const GetOrCreateJobRequest& req, const SplitPlan& plan) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ... and for static sharding: the same dataset, the same number of shards, a deterministic pipeline.
  absl::Status CheckShardResumeLocked(const GetOrCreateJobRequest& req) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long a worker waits before asking again for splits of an epoch that is not settled.
  static constexpr int32_t kSplitRetryMs = 10;
  // The split plan of a distributed_epoch job (made from its pipeline, so derived state: not journaled).
  absl::StatusOr<const SplitPlan*> SplitPlanLocked(int64_t job_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimeoutLoop();
  // Rewrites the journal as a snapshot of the state; on failure keeps the current one.
  void CompactLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DispatcherConfig config_;
  std::atomic<int64_t> workers_lost_total_{0}, workers_left_total_{0};
  std::atomic<int64_t> splits_assigned_total_{0}, splits_lost_total_{0};
  std::atomic<int64_t> journal_appends_total_{0}, journal_appended_bytes_total_{0};
  LatencyHistogram journal_append_latency_;
  mutable absl::Mutex mu_;
  DispatcherState state_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Time> worker_last_seen_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Time> client_last_seen_ ABSL_GUARDED_BY(mu_);
  // What workers served and readers consumed lately, from their heartbeats' totals (soft state:
  // the status's rates and the worker estimate). Workers: elements, bytes; readers: ReaderStats'
  // elements, bytes, wait and elapsed seconds.
  std::map<std::string, TotalsWindow> worker_traffic_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, TotalsWindow> client_traffic_ ABSL_GUARDED_BY(mu_);
  // Readers' reports of a worker they could not reach, since its last heartbeat (soft state:
  // suspicion only keeps new iterations off a worker that is probably dead).
  std::map<std::string, int> unreachable_reports_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads: each client's consumer index and granted round limit, rebuilt from
  // heartbeats after a restart (soft state, like liveness).
  struct ClientRounds {
    int32_t consumer_index = 0;
    int64_t limit = 0;
  };
  std::map<int64_t, ClientRounds> client_rounds_ ABSL_GUARDED_BY(mu_);
  // Iterations that have no clients, and since when.
  std::map<int64_t, absl::Time> iteration_unclaimed_since_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, SplitPlan> split_plans_ ABSL_GUARDED_BY(mu_);  // by job id
  // Exactly-once jobs: the readers' receipts and re-issue barriers (soft state).
  SplitReceipts receipts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> refused_workers_ ABSL_GUARDED_BY(mu_);   // logged once each
  std::unique_ptr<JournalWriter> journal_ ABSL_GUARDED_BY(mu_);  // fault-tolerant only
  std::string journal_path_ ABSL_GUARDED_BY(mu_);
  int64_t compact_at_ ABSL_GUARDED_BY(mu_) = 0;  // records_written() that triggers compaction
  absl::Time last_active_ ABSL_GUARDED_BY(mu_) = absl::Now();
  const uint64_t incarnation_id_;
  const absl::Time started_ = absl::Now();

  absl::Notification stop_;
  std::thread timeout_thread_;
};

}  // namespace tfdata::service
