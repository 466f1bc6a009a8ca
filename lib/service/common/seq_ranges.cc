#include "lib/service/common/seq_ranges.h"

#include <algorithm>
#include <iterator>

namespace tfdata::service {

bool SeqRanges::Contains(int64_t seq) const {
  auto next = ranges_.upper_bound(seq);
  return next != ranges_.begin() && seq < std::prev(next)->second;
}

void SeqRanges::Add(int64_t begin, int64_t end) {
  if (begin < 0 || end <= begin) return;
  auto it = ranges_.upper_bound(begin);
  if (it != ranges_.begin() && std::prev(it)->second >= begin) {
    // The common case, elements in order: the range before grows (or holds it), in place.
    auto before = std::prev(it);
    if (end <= before->second) return;
    if (it == ranges_.end() || it->first > end) {
      before->second = end;
      return;
    }
    it = before;
  }
  while (it != ranges_.end() && it->first <= end) {
    begin = std::min(begin, it->first);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(begin, end);
}

bool SeqRanges::Covers(int64_t count) const {
  if (count <= 0) return true;
  return !ranges_.empty() && ranges_.begin()->first == 0 && ranges_.begin()->second >= count;
}

}  // namespace tfdata::service
