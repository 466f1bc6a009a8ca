// Coordinated reads: the client side (`tfdata read --num-consumers n --consumer-index i`, or a C++
// trainer). n consumers share a named job and read it in rounds: in round r, consumer i gets the
// i-th element of the round, and every consumer gets its element of round r from the same worker,
// the one at r % k in the job's rotation of k tasks. Trainers that step in lock-step then train
// each step on elements of one worker, e.g. batches bucketed to similar lengths.
//
// The rotation changes (a worker joins, a worker is lost) only at rounds no consumer has fetched
// yet; see lib/service/dispatcher/dispatcher_rounds.cc for the lease that guarantees it. A round whose worker
// was lost before serving it is fetched from the next live task of the rotation instead
// (counted in rounds_substituted()). The pipeline must be infinite: the read never ends by itself.
//
// Next() is for one consumer thread; the other methods are thread-safe. Close() (or the
// destructor) stops fetching and releases the client at the dispatcher.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "lib/core/tensor.h"
#include "lib/service/client/job_membership.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/common/dispatcher_client.h"

namespace tfdata::service {

struct CoordinatedReadOptions {
  std::string dataset_id;
  std::string job_name;  // required: the consumers share the job by name
  int num_consumers = 0;
  int consumer_index = 0;
  // parallel_epochs: every worker runs the whole pipeline; distributed_epoch: the workers share
  // its splits, so the rounds together see each element of an epoch at most once.
  ProcessingMode mode = PARALLEL_EPOCHS;
  std::string protocol = "grpc";  // data plane: "grpc", "local", "shm" or "auto" (the CLI's and Python's default)
  absl::Duration heartbeat_interval = absl::Milliseconds(200);
  // Rounds fetched ahead of Next(), at most (each round is one request).
  int max_outstanding_rounds = 8;
};

// Where the element of one round came from.
struct RoundInfo {
  int64_t round = 0;
  int64_t task_id = 0;
  std::string worker_address;
  bool substituted = false;  // its worker was lost: served by the next task of the rotation
};

class CoordinatedReader : private JobMembership {
 public:
  using JobMembership::Stats;  // elements, bytes, time waiting in Next(): see job_membership.h
  // Joins the job (creating it on first use) and starts fetching. InvalidArgument for a missing
  // job name, a consumer index outside [0, num_consumers), or a finite pipeline.
  static absl::StatusOr<std::unique_ptr<CoordinatedReader>> Create(CoordinatedReadOptions options,
                                                                   std::unique_ptr<DispatcherClient> dispatcher);
  ~CoordinatedReader();

  // This consumer's element of the next round (true). Errors end the read; so does Close() (false).
  absl::StatusOr<bool> Next(Element* out, RoundInfo* info = nullptr);
  // Next(), waiting at most `timeout`: nullopt when nothing came in time (see Reader::NextWithin).
  absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration timeout, RoundInfo* info = nullptr);
  void Close();

  int64_t client_id() const { return client_id_; }
  int64_t rounds_substituted() const;

 private:
  struct TaskState {
    std::string address;
    int64_t starting_round = 0;
    int64_t ending_round = 0;  // 0: in the rotation for good; else its worker was lost
    std::unique_ptr<DataTransferClient> client;
  };
  struct Fetched {
    Element element;
    RoundInfo info;
  };

  CoordinatedReader(CoordinatedReadOptions options, std::unique_ptr<DispatcherClient> dispatcher);
  absl::Status HeartbeatOnce() override;
  void FetchLoop() override;
  // The task to fetch `round` from and whether it substitutes a lost one; 0 when there is none yet.
  std::pair<int64_t, bool> PickTaskLocked(int64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatedReadOptions options_;

  std::map<int64_t, TaskState> tasks_ ABSL_GUARDED_BY(mu_);
  int64_t round_limit_ ABSL_GUARDED_BY(mu_) = 0;   // fetch only rounds below it (the lease)
  int64_t next_issue_ ABSL_GUARDED_BY(mu_) = 0;    // the next round to fetch
  int64_t next_deliver_ ABSL_GUARDED_BY(mu_) = 0;  // the next round Next() returns
  int64_t issued_at_last_heartbeat_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, Fetched> fetched_ ABSL_GUARDED_BY(mu_);
  int64_t substituted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tfdata::service
