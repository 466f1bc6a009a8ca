// What a reader of an exactly-once distributed_epoch job has handed to its trainer, split by
// split (issue 22): the ground of read states and of resuming from them.
//
// Per epoch from first_epoch() on: the splits handed out in full (index ranges) and, for the
// others, the sequence numbers handed out (ranges) and the split's element count once its end was
// handed out. Epochs handed out in full are folded into first_epoch(). As a ResumePlan
// (proto/service.proto) it is both a reader's state and the plan a resumed job starts from:
// merging the states of the readers of a shared job is the union of what each handed out.
//
// Used by the reader (Handed/SplitEnd for every element Next() returns) and by the dispatcher
// (FromPlan checks a plan that came over the wire; Excluded tells what not to hand out).
// Thread-compatible.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/service/common/seq_ranges.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class ReadProgress {
 public:
  ReadProgress() = default;
  explicit ReadProgress(int64_t num_splits) : num_splits_(num_splits) {}
  // The progress a plan describes, checked: InvalidArgument naming the epoch, split and range
  // when it is malformed or names a split outside [0, num_splits) (`where` begins the message).
  static absl::StatusOr<ReadProgress> FromPlan(const ResumePlan& plan, int64_t num_splits, const std::string& where);

  // Element `seq` of split `split` of `epoch` was handed to the trainer.
  void Handed(int64_t epoch, int64_t split, int64_t seq);
  // The split's end was handed out: it has `count` elements.
  void SplitEnd(int64_t epoch, int64_t split, int64_t count);
  // Adds what `other` handed out (the union).
  void Merge(const ReadProgress& other);

  // As a plan (fingerprints left empty: the caller sets them). Normalised: the same progress
  // gives the same plan.
  ResumePlan ToPlan() const;
  int64_t first_epoch() const { return first_epoch_; }
  int64_t num_splits() const { return num_splits_; }
  // For the dispatcher: the splits of `epoch` not to hand out in order (done or partial), and the
  // splits handed out in part, with what to skip. Copies: for tests and one-off use.
  SeqRanges Excluded(int64_t epoch) const;
  std::map<int64_t, SeqRanges> Partial(int64_t epoch) const;
  // The same without copies, for the per-split paths. Whether split `split` of `epoch` was handed
  // out in full.
  bool Done(int64_t epoch, int64_t split) const;
  // What was handed out of a split handed out in part; null when it was not. Valid until the
  // progress next changes.
  const SeqRanges* PartialSplit(int64_t epoch, int64_t split) const;
  // The first run [begin, end) of splits of `epoch` at or after `from` that are not excluded
  // (end is INT64_MAX when no excluded split follows; begin is num_splits when none is left).
  std::pair<int64_t, int64_t> NextRun(int64_t epoch, int64_t from) const;

 private:
  struct Split {
    SeqRanges handed;
    std::optional<int64_t> count;
  };
  struct Epoch {
    SeqRanges done;  // split indices
    std::map<int64_t, Split> partial;
  };
  // Moves the split to the done ranges once it was handed out in full.
  void Settle(int64_t epoch, Epoch& e, int64_t split);
  // Folds leading epochs handed out in full into first_epoch_.
  void Advance();

  int64_t num_splits_ = 0;
  int64_t first_epoch_ = 0;
  std::map<int64_t, Epoch> epochs_;
};

// Static sharding's counterpart: per shard (a worker of the fixed list), the positions of the
// shard's stream handed to the trainer. A reader alone in its job has one range per shard. A
// resumed job's worker leaves out the positions handed out before (TaskDef.skip_begins/ends), so
// its stream skips them: Position() maps an index of that stream back to the shard's position.
// Thread-compatible.
class ShardReadProgress {
 public:
  ShardReadProgress() = default;
  explicit ShardReadProgress(int32_t num_shards) : num_shards_(num_shards) {}
  // The progress a plan's shards describe, checked (InvalidArgument naming the shard and range).
  static absl::StatusOr<ShardReadProgress> FromPlan(const ResumePlan& plan, const std::string& where);

  void Handed(int32_t shard, int64_t position) { shards_[shard].Add(position, position + 1); }
  void Merge(const ShardReadProgress& other);
  // Sets num_shards and shards of `plan`.
  void ToPlan(ResumePlan* plan) const;
  int32_t num_shards() const { return num_shards_; }
  // What was handed out of `shard` (empty when nothing).
  SeqRanges Shard(int32_t shard) const;
  const std::map<int32_t, SeqRanges>& shards() const { return shards_; }

 private:
  int32_t num_shards_ = 0;
  std::map<int32_t, SeqRanges> shards_;
};

// Maps an index of a resumed shard's stream (which leaves out the positions handed out before)
// back to the shard's position, in O(log ranges) per element. Built once from the progress the
// job resumed from; holds no reference to it. Immutable after construction: thread-safe.
class ShardPositions {
 public:
  ShardPositions() = default;
  explicit ShardPositions(const ShardReadProgress& left_out);
  // The shard position of index `index` of a stream that leaves out the positions of `shard`
  // (INT64_MAX when the positions left out reach past every index).
  int64_t Position(int32_t shard, int64_t index) const;

 private:
  // Per shard, per range left out in order: the stream index at which it would begin (the
  // range's begin less what was left out before it), and what was left out up to its end.
  struct Gap {
    int64_t index;
    int64_t skipped_through;
  };
  std::map<int32_t, std::vector<Gap>> gaps_;
};

}  // namespace tfdata::service
