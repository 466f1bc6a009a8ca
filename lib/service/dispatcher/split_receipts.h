// Exactly-once jobs (issue 19): what the readers of each iteration have received of each split in
// flight, added up from their heartbeats, and when a lost worker's splits may be handed out again.
//
// This is soft state, like liveness: rebuilt from heartbeats after a restart (readers report
// every split the dispatcher has not confirmed, every time). What it decides goes through the
// journal: a split the receipts show complete is delivered (DeliverSplitsUpdate by index), and a
// split handed out again carries the receipts as its skip ranges (AssignSplitsUpdate.skips).
//
// A lost worker's splits wait in the pool until each reader of the iteration has sent a second
// heartbeat since the loss (so the first one's answer told it the task is gone) with nothing in
// flight from a task that is no longer live: its receipts then hold everything it will ever get
// from the lost task, and the skip ranges are complete, whichever reader got which element.
//
// Thread-compatible: the dispatcher calls it under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "lib/service/common/seq_ranges.h"
#include "proto/journal.pb.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class SplitReceipts {
 public:
  // Merges a reader's receipt of one split into the iteration's; true once the split is complete
  // (its end seen, and every element up to it received by some reader).
  bool Add(int64_t iteration_id, const SplitReceipt& receipt);
  // What readers have of the split so far (empty when nothing), as skip ranges.
  SkipRanges Received(int64_t iteration_id, int64_t epoch, int64_t split) const;
  // The split was confirmed (or is otherwise settled): its receipts are no longer needed.
  void Forget(int64_t iteration_id, int64_t epoch, int64_t split);

  // A task of the iteration was lost, or the dispatcher restarted with splits in the pool: splits
  // wait until every one of `clients` has reported clean (see above).
  void StartBarrier(int64_t iteration_id, const std::set<int64_t>& clients);
  // A client's heartbeat, after its receipts were added: `clean` when everything it has in flight
  // is from live tasks of the iteration.
  void ClientReported(int64_t iteration_id, int64_t client_id, bool clean);
  // The client left (released, or timed out): nothing more will come from it.
  void ClientGone(int64_t iteration_id, int64_t client_id);
  // Whether the iteration's pooled splits may be handed out.
  bool MayReissue(int64_t iteration_id) const;
  // Whether a barrier was ever started for the iteration in this process (a restarted dispatcher
  // starts one before it hands out pooled splits).
  bool HasBarrierState(int64_t iteration_id) const { return barriers_.contains(iteration_id); }
  void ForgetIteration(int64_t iteration_id);

  // A worker served the split's end marker (TaskProgress.served_ends): its count is known, and if
  // the readers' receipts stay incomplete the split is stalled (see Stalled).
  void Served(int64_t iteration_id, int64_t epoch, int64_t split, int64_t count, absl::Time now);
  // A client's heartbeat, for the iteration's heartbeat rounds: a round ends when every one of
  // `clients` has been heard since the last one ended.
  void ClientHeard(int64_t iteration_id, int64_t client_id, const std::set<int64_t>& clients);
  // Splits served to their end at least `grace` ago and two heartbeat rounds ago whose receipts
  // are still incomplete: what is missing will not come (a response lost in flight, or a reader
  // that died before reporting it). The caller puts them back in the pool.
  std::vector<std::pair<int64_t, int64_t>> Stalled(int64_t iteration_id, absl::Time now, absl::Duration grace) const;
  // The split goes out again: its served mark no longer holds (its receipts stay, as skips).
  void Unserve(int64_t iteration_id, int64_t epoch, int64_t split);

  // Splits with receipts held, over all iterations (for tests and status).
  size_t size() const;

 private:
  struct Split {
    SeqRanges received;  // the union of the readers' receipts
    std::optional<int64_t> count;
    std::optional<absl::Time> served_at;  // when a worker reported its end served
    int64_t served_round = 0;             // the heartbeat round then
  };
  struct Rounds {
    int64_t round = 0;
    std::set<int64_t> heard;  // clients heard in the current round
  };
  static bool Complete(const Split& s);
  using SplitKey = std::pair<int64_t, int64_t>;          // (epoch, split)
  std::map<int64_t, std::map<SplitKey, Split>> splits_;  // by iteration
  // Per iteration: the clients a barrier waits for, and how many heartbeats each sent since it began.
  std::map<int64_t, std::map<int64_t, int>> barriers_;
  std::map<int64_t, Rounds> rounds_;  // by iteration
};

}  // namespace tfdata::service
