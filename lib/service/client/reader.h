// The reader: the client side of the service (`tfdata read`, `tfdata local`, a C++ trainer).
//
// It gets or creates the job and its iteration, heartbeats to the dispatcher to learn the current
// tasks, fetches elements from all tasks in parallel (at most max_outstanding_requests requests in
// flight, at most max_requests_per_task per task; each task's elements are delivered in the
// task's order whatever order the responses arrive in), and ends once every task
// has ended. A worker that cannot be reached is skipped (its task dropped, counted in
// tasks_dropped()) and reading goes on from the others. A read that ends with every task dropped
// and no element delivered is an error (UNAVAILABLE naming the workers), not a clean end: an
// empty read must never look like an empty dataset. A read that delivered something but dropped
// tasks ends cleanly: callers that need every element check tasks_dropped() and splits_lost(). Close() (or the
// destructor) releases the iteration at the dispatcher.
//
// Next() is for one consumer thread; the other methods are thread-safe.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/core/tensor.h"
#include "lib/service/client/job_membership.h"
#include "lib/service/client/split_ledger.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/common/dispatcher_client.h"
#include "lib/service/common/read_progress.h"
#include "proto/read_state.pb.h"

namespace tfdata::service {

struct ReaderOptions {
  std::string dataset_id;
  ProcessingMode mode = PARALLEL_EPOCHS;
  std::string job_name;  // empty: a job of its own
  int max_outstanding_requests = 4;
  // Requests in flight to one task, at most: 2 overlaps one response's transfer with the next.
  int max_requests_per_task = 2;
  std::string protocol = "grpc";  // data plane: "grpc", "local", "shm" or "auto" (the CLI's and Python's default)
  absl::Duration heartbeat_interval = absl::Milliseconds(200);
  // Bounds of one GetElements response.
  int max_elements_per_request = 4096;
  int64_t max_bytes_per_request = 16 << 20;
  // Fetched elements waiting for Next(), at most (fetching pauses at either bound).
  int64_t buffer_elements = 16384;
  int64_t buffer_bytes = 64 << 20;
  // Which workers to read from: any; local (in this process or on this host); auto (local when
  // this process runs a worker, any otherwise). And, when set, only workers with this tag.
  TargetWorkers target_workers = TARGET_WORKERS_AUTO;
  std::string worker_tag;
  // Cross-trainer cache: join the named job as trainer `trainer_id` (each trainer reads the whole
  // stream; workers keep a sliding window of it). Needs job_name.
  bool cross_trainer_cache = false;
  std::string trainer_id;
  // distributed_epoch: each split processed on its own, elements with their positions, and an
  // element this reader already has dropped (GetOrCreateJobRequest.exactly_once); a lost
  // worker's splits are produced again by others, and the reader keeps asking an unreachable
  // worker until the dispatcher declares it lost (docs/guarantees.md).
  bool exactly_once = false;
  // Resumable reads (exactly-once distributed_epoch, or static sharding): start where these read
  // states (Reader::SaveState) left off: one reader's, or those of every reader of a shared job,
  // merged. The job is a new one
  // (under job_name, which must not name a job made otherwise). Empty: from the start.
  std::vector<ReadState> resume;
  // Reproducible order (needs exactly_once, and a job of its own: no job_name): the elements in
  // the job's split order, epoch by epoch and split by split, each split's in its own order,
  // whatever the workers' number, speed or deaths. Splits are fetched from all workers in parallel
  // and put in order here, in the same buffer (buffer_elements, buffer_bytes); when the buffer is
  // full of later splits, the reader still fetches from the tasks that have nothing in it, one of
  // which holds the next split (so at most twice the buffer, plus the responses in flight and up
  // to max_requests_per_task responses per task; more only while a lost worker's splits are
  // produced again).
  bool deterministic = false;
  // With a filter that matches none of the job's workers, how long to wait for a matching one
  // before failing.
  absl::Duration untargeted_timeout = absl::Seconds(5);
};

// Whether a worker at `address` counts as local: it runs in this process or on this host.
bool IsLocalWorker(const std::string& address);
// The reader's effective choice for `target` (auto resolved), and a task filter made of it.
TargetWorkers ResolveTargetWorkers(TargetWorkers target);
bool TaskTargeted(const TaskInfo& task, TargetWorkers resolved, const std::string& worker_tag);

class Reader : private JobMembership {
 public:
  using JobMembership::Stats;  // elements, bytes, time waiting in Next(): see job_membership.h
  // Joins the job (one dispatcher call, bounded by the client's deadline) and starts fetching.
  static absl::StatusOr<std::unique_ptr<Reader>> Create(ReaderOptions options,
                                                        std::unique_ptr<DispatcherClient> dispatcher);
  ~Reader();

  // The next element (true), or the end of the data (false). Errors from the pipeline on a worker
  // and an iteration the dispatcher no longer knows end the read.
  absl::StatusOr<bool> Next(Element* out);
  // Next(), waiting at most `timeout`: nullopt when nothing came in time (the read goes on). For
  // callers that must stay responsive while they wait (the Python binding checks for Ctrl-C).
  absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration timeout);
  // Stops fetching and releases the iteration. Idempotent.
  void Close();

  int64_t job_id() const { return job_id_; }
  bool exactly_once() const { return options_.exactly_once; }
  int64_t client_id() const { return client_id_; }
  // Non-empty when the dispatcher warned (e.g. the named job had already finished).
  const std::string& warning() const { return warning_; }
  // Tasks dropped because their worker could not be reached.
  int64_t tasks_dropped() const;
  // The workers of the dropped tasks ("host:port"), sorted, each once.
  std::vector<std::string> dropped_workers() const;
  // Tasks this reader has learned of so far (read, being read or dropped).
  int64_t num_tasks() const;
  // distributed_epoch: splits lost with the tasks this reader dropped (their worker died): the
  // splits each held and had not reported delivered. Every element missing from the epoch belongs
  // to one of them; a split counted may have been delivered in part (an upper bound). A reader of
  // every task reports at least the dispatcher's count for the iteration.
  int64_t splits_lost() const;
  // Cross-trainer cache: elements this trainer skipped because they had left a worker's window
  // before it asked for them (it fell too far behind the fastest trainer).
  int64_t elements_skipped() const;
  // Exactly-once jobs: elements dropped because this reader had received them before (a split
  // regenerated after its worker was lost).
  int64_t duplicates_dropped() const;
  // Exactly-once distributed_epoch and static-sharding reads: where the trainer stands, as a
  // state to keep with its checkpoint: what Next() has returned, with the fingerprints a resume
  // checks. Made from the reader's own bookkeeping (no RPC; its size is bounded by the splits in
  // progress and the ranges of those done, or a range per shard). FailedPrecondition otherwise.
  absl::StatusOr<ReadState> SaveState() const;
  // Deterministic order: the most bytes held at once to put splits in order.
  int64_t max_reorder_bytes() const;

 private:
  // A response that may only be delivered once the requests that were in flight to the same task
  // when it arrived have answered (one of them may hold earlier elements of the stream).
  struct HeldResponse {
    GetElementsResult result;
    std::set<int64_t> waiting_for;  // request numbers
  };
  struct Ready {
    Element element;
    int64_t bytes = 0;
    // Exactly-once: the element's position, or (split_end) a marker that the split ended with
    // `seq` elements; epoch -1 for an element without a position.
    int64_t epoch = -1, split = 0, seq = 0;
    bool split_end = false;
    int64_t task_id = 0;  // deterministic order: where it came from
    int32_t shard = -1;   // static sharding: the shard whose stream position `seq` is
  };
  struct TaskState {
    int64_t id = 0;
    int32_t shard = 0;  // static sharding
    std::string address;
    std::unique_ptr<DataTransferClient> client;
    bool ended = false;
    int64_t next_request = 0;
    std::set<int64_t> in_flight;  // request numbers
    std::vector<HeldResponse> held;
    int64_t delivered_index = 0;  // the stream index after the last element delivered
    int failures = 0;
    absl::Time retry_after = absl::InfinitePast();
    // As of the last heartbeat; for a dropped task, what was counted lost (raised by later
    // heartbeats that list more: splits handed out after the count, see HeartbeatOnce).
    int64_t splits_undelivered = 0;
    bool dropped = false;  // given up (worker unreachable), not ended by its stream
  };

  Reader(ReaderOptions options, std::unique_ptr<DispatcherClient> dispatcher);
  absl::Status HeartbeatOnce() override;
  void FetchLoop() override;
  bool DoneLocked() const override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FullLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ready_ alone at the buffer's bounds (deterministic order: what is in order).
  bool ReadyFullLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the answer to request `request` of the task and delivers what is now in stream order.
  void CompleteLocked(int64_t task_id, int64_t request, absl::StatusOr<GetElementsResult> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives a task up: counts it dropped, its undelivered splits lost, delivers what it holds.
  void DropLocked(TaskState& ts) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves held responses to ready_: those nothing in flight can precede, or (`all`) every one.
  void DeliverLocked(TaskState& ts, bool all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadyLocked(Ready r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deterministic order: holds an entry until its split is next, and moves what is next to ready_.
  void ReorderLocked(Ready r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseInOrderLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The split after next_split_ in the job's order (skipping the splits a resumed read had done).
  void AdvanceSplitLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether fetching may go on from `task_id` though the buffer is full: deterministic order,
  // what is in order below the buffer's bounds, and the task has nothing waiting in the buffer
  // (or no live task is so).
  bool MayOverfillLocked(int64_t task_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A resumed read (exactly-once, static sharding): starts from what `resume` handed out.
  absl::Status SeedResumeLocked(const ResumePlan& resume, int64_t num_splits, int64_t elements_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SeedShardResumeLocked(const ResumePlan& resume, int64_t elements_before)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves leading split-end markers of ready_ into progress_.
  void TakeMarkersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ReaderOptions options_;
  int64_t job_id_ = 0;
  std::string warning_;

  absl::CondVar fetch_cv_;  // fetchers waiting for a task or for room in ready_
  std::map<int64_t, TaskState> tasks_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> listed_tasks_ ABSL_GUARDED_BY(mu_);  // as of the last heartbeat
  bool heard_ ABSL_GUARDED_BY(mu_) = false;                 // at least one heartbeat answered
  bool iteration_finished_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_task_cursor_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Ready> ready_ ABSL_GUARDED_BY(mu_);
  // The consumer's side of ready_ (Next()'s thread alone touches it, without mu_): elements with
  // no position to record, taken from ready_ in one go so that small elements do not cost a lock
  // (and a wake-up of a fetcher) each. At most kMaxTaken of them, or kMaxTakenBytes (one larger);
  // they stay within the buffer's bounds (taken_elements_, taken_bytes_).
  struct Taken {
    Element element;
    int64_t bytes = 0;
  };
  std::vector<Taken> taken_;
  size_t taken_next_ = 0;
  // What the last batch took: still counted in the buffer's bounds (FullLocked) until the consumer
  // comes back for more, by which time it has all been handed out.
  int64_t taken_elements_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t taken_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  static constexpr size_t kMaxTaken = 256;
  static constexpr int64_t kMaxTakenBytes = 1 << 20;
  int64_t ready_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tasks_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> dropped_workers_ ABSL_GUARDED_BY(mu_);
  std::string last_drop_error_ ABSL_GUARDED_BY(mu_);  // why the last task dropped for its worker was
  // Workers given up on as unreachable, for the next heartbeat to report (ClientHeartbeatRequest.
  // unreachable_workers: two reports make the dispatcher suspect a worker).
  std::set<std::string> unreported_ ABSL_GUARDED_BY(mu_);
  int64_t elements_delivered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t splits_lost_ ABSL_GUARDED_BY(mu_) = 0;
  // The dispatcher's count for the iteration (ClientHeartbeatResponse.splits_lost).
  int64_t dispatcher_splits_lost_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t elements_skipped_ ABSL_GUARDED_BY(mu_) = 0;
  // Exactly-once jobs: what was received of each split (responses with split runs).
  SplitLedger ledger_ ABSL_GUARDED_BY(mu_);
  // Exactly-once jobs: what Next() has handed out (the read state), with what the job resumed
  // from; and what a state records besides.
  ReadProgress progress_ ABSL_GUARDED_BY(mu_);
  int64_t elements_before_ = 0;  // handed out before the resume
  // Deterministic order: entries of splits not yet next, by (epoch, split); the next split; what
  // each task has waiting; the splits a resumed read had done (skipped in the order).
  std::map<std::pair<int64_t, int64_t>, std::deque<Ready>> reorder_ ABSL_GUARDED_BY(mu_);
  int64_t reorder_elements_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reorder_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t max_reorder_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, int64_t> reorder_by_task_ ABSL_GUARDED_BY(mu_);
  std::pair<int64_t, int64_t> next_split_ ABSL_GUARDED_BY(mu_) = {0, 0};
  std::optional<ReadProgress> resumed_from_ ABSL_GUARDED_BY(mu_);
  std::string dataset_fingerprint_, plan_fingerprint_;
  // Static sharding: what Next() handed out of each shard's stream, and what a resumed read's
  // workers leave out of their streams (to map stream indexes back to shard positions).
  ShardReadProgress shard_progress_ ABSL_GUARDED_BY(mu_);
  ShardPositions resumed_positions_ ABSL_GUARDED_BY(mu_);
  TargetWorkers target_ = TARGET_WORKERS_ANY;  // options_.target_workers resolved
  // Since when the dispatcher lists tasks of which none is targeted (a clear error after a while).
  absl::Time untargeted_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool only_untargeted_ ABSL_GUARDED_BY(mu_) = false;  // the job has tasks, none of them targeted
  uint64_t dispatcher_incarnation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tfdata::service
