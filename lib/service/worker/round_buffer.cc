#include "lib/service/worker/round_buffer.h"

#include <algorithm>

namespace tfdata::service {
namespace {
constexpr size_t kMaxClosed = 1 << 16;
}  // namespace

bool RoundBuffer::Known(int64_t round) const {
  if (rounds_.contains(round) || closed_.contains(round)) return true;
  // Forgotten closed rounds are all below the oldest remembered one.
  return closed_.size() >= kMaxClosed && round < *closed_.begin();
}

int RoundBuffer::NumPresent() const { return static_cast<int>(std::count(present_.begin(), present_.end(), true)); }

void RoundBuffer::Open(int64_t round, std::vector<Element> elements, absl::Time now) {
  Round r;
  r.slots.resize(present_.size());
  r.opened = now;
  size_t next = 0;
  for (size_t i = 0; i < present_.size() && next < elements.size(); ++i) {
    if (!present_[i]) continue;
    bytes_ += static_cast<int64_t>(ElementByteSize(elements[next]));
    r.slots[i] = std::move(elements[next++]);
    ++r.untaken;
  }
  auto it = rounds_.emplace(round, std::move(r)).first;
  if (it->second.untaken == 0) CloseLocked(it);
}

std::optional<Element> RoundBuffer::Take(int64_t round, int consumer) {
  auto it = rounds_.find(round);
  if (it == rounds_.end()) return std::nullopt;
  auto& slot = it->second.slots[static_cast<size_t>(consumer)];
  if (!slot) return std::nullopt;
  Element e = std::move(*slot);
  slot.reset();
  bytes_ -= static_cast<int64_t>(ElementByteSize(e));
  if (--it->second.untaken == 0) CloseLocked(it);
  return e;
}

int64_t RoundBuffer::Expire(absl::Time now, absl::Duration expiry) {
  int64_t dropped = 0;
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    auto next = std::next(it);
    if (now - it->second.opened > expiry) {
      for (size_t i = 0; i < it->second.slots.size(); ++i) {
        if (!it->second.slots[i]) continue;
        bytes_ -= static_cast<int64_t>(ElementByteSize(*it->second.slots[i]));
        present_[i] = false;
        ++dropped;
      }
      CloseLocked(it);
    }
    it = next;
  }
  return dropped;
}

void RoundBuffer::CloseLocked(std::map<int64_t, Round>::iterator it) {
  closed_.insert(it->first);
  rounds_.erase(it);
  while (closed_.size() > kMaxClosed) closed_.erase(closed_.begin());
}

}  // namespace tfdata::service
