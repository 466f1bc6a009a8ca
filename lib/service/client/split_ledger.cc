#include "lib/service/client/split_ledger.h"

namespace tfdata::service {

bool SplitLedger::Receive(int64_t epoch, int64_t split, int64_t seq) {
  SeqRanges& received = splits_[{epoch, split}].received;
  if (received.Contains(seq)) {
    ++duplicates_dropped_;
    return false;
  }
  received.Add(seq, seq + 1);
  return true;
}

void SplitLedger::End(int64_t epoch, int64_t split, int64_t count) { splits_[{epoch, split}].count = count; }

std::vector<SplitReceipt> SplitLedger::Receipts() const {
  std::vector<SplitReceipt> out;
  out.reserve(splits_.size());
  for (const auto& [key, s] : splits_) {
    SplitReceipt& r = out.emplace_back();
    r.set_epoch(key.first);
    r.set_split(key.second);
    for (const auto& [begin, end] : s.received.ranges()) {
      r.add_range_begins(begin);
      r.add_range_ends(end);
    }
    if (s.count) r.set_count(*s.count);
  }
  return out;
}

void SplitLedger::Forget(int64_t epoch, int64_t split) { splits_.erase({epoch, split}); }

void SplitLedger::Seed(int64_t epoch, int64_t split, const SeqRanges& handed) {
  Split& s = splits_[{epoch, split}];
  for (const auto& [b, e] : handed.ranges()) s.received.Add(b, e);
}

}  // namespace tfdata::service
