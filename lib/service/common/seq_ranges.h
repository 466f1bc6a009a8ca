// A set of sequence numbers kept as half-open ranges [begin, end), sorted, disjoint and not
// adjacent (a split received in order is one range). What a reader received of a split
// (client/split_ledger.h) and what all readers did (dispatcher/split_receipts.h).
//
// Thread-compatible.
#pragma once

#include <cstdint>
#include <map>

namespace tfdata::service {

class SeqRanges {
 public:
  bool Contains(int64_t seq) const;
  // Adds [begin, end), merging it with every range it touches or overlaps; an empty or negative
  // range adds nothing.
  void Add(int64_t begin, int64_t end);
  // Whether the set is exactly [0, count) or holds it (count 0: always).
  bool Covers(int64_t count) const;
  const std::map<int64_t, int64_t>& ranges() const { return ranges_; }  // begin -> end

 private:
  std::map<int64_t, int64_t> ranges_;
};

}  // namespace tfdata::service
