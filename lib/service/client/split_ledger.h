// What a reader of an exactly-once job has received, split by split (issue 19): the sequence
// numbers of each split's elements, as ranges, and each split's element count once its end marker
// came. It drops an element it already has (a split regenerated on another worker after its first
// worker was lost), and it is what the reader reports to the dispatcher, which adds up the reports
// of all readers of the job to tell when a split was delivered in full.
//
// Its size is bounded by the splits in flight: the dispatcher confirms complete splits
// (Forget), and a split received in order is one range.
//
// Thread-compatible: the reader calls it under its own mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "lib/service/common/seq_ranges.h"
#include "proto/service.pb.h"

namespace tfdata::service {

class SplitLedger {
 public:
  // Records element `seq` of split `split` of epoch `epoch`. False when it was received before:
  // the caller drops it.
  bool Receive(int64_t epoch, int64_t split, int64_t seq);
  // A resumed read: the elements of the split handed out before count as received.
  void Seed(int64_t epoch, int64_t split, const SeqRanges& handed);
  // Records the split's end marker: it has `count` elements.
  void End(int64_t epoch, int64_t split, int64_t count);
  // Every split not forgotten, with what was received of it.
  std::vector<SplitReceipt> Receipts() const;
  // The dispatcher confirmed the split complete: nothing of it can come again.
  void Forget(int64_t epoch, int64_t split);

  int64_t duplicates_dropped() const { return duplicates_dropped_; }
  size_t splits() const { return splits_.size(); }

 private:
  struct Split {
    SeqRanges received;
    std::optional<int64_t> count;
  };
  std::map<std::pair<int64_t, int64_t>, Split> splits_;  // by (epoch, split)
  int64_t duplicates_dropped_ = 0;
};

}  // namespace tfdata::service
