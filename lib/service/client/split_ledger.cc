#include "lib/service/client/split_ledger.h"

#include <iterator>

namespace tfdata::service {

bool SplitLedger::Receive(int64_t epoch, int64_t split, int64_t seq) {
  std::map<int64_t, int64_t>& ranges = splits_[{epoch, split}].ranges;
  // The range starting after seq, and the one before it (which may hold seq or end at it).
  auto next = ranges.upper_bound(seq);
  if (next != ranges.begin()) {
    auto prev = std::prev(next);
    if (seq < prev->second) {
      ++duplicates_dropped_;
      return false;
    }
    if (seq == prev->second) {
      prev->second = seq + 1;
      if (next != ranges.end() && next->first == prev->second) {
        prev->second = next->second;
        ranges.erase(next);
      }
      return true;
    }
  }
  if (next != ranges.end() && next->first == seq + 1) {
    const int64_t end = next->second;
    ranges.erase(next);
    ranges.emplace(seq, end);
  } else {
    ranges.emplace(seq, seq + 1);
  }
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
    for (const auto& [begin, end] : s.ranges) {
      r.add_range_begins(begin);
      r.add_range_ends(end);
    }
    if (s.count) r.set_count(*s.count);
  }
  return out;
}

void SplitLedger::Forget(int64_t epoch, int64_t split) { splits_.erase({epoch, split}); }

}  // namespace tfdata::service
