#include "lib/service/dispatcher/split_receipts.h"

#include <algorithm>

namespace tfdata::service {

bool SplitReceipts::Add(int64_t iteration_id, const SplitReceipt& receipt) {
  Split& s = splits_[iteration_id][{receipt.epoch(), receipt.split()}];
  const int n = std::min(receipt.range_begins_size(), receipt.range_ends_size());
  for (int i = 0; i < n; ++i) s.received.Add(receipt.range_begins(i), receipt.range_ends(i));
  if (receipt.has_count() && receipt.count() >= 0) s.count = receipt.count();
  return Complete(s);
}

bool SplitReceipts::Complete(const Split& s) { return s.count && s.received.Covers(*s.count); }

void SplitReceipts::Served(int64_t iteration_id, int64_t epoch, int64_t split, int64_t count, absl::Time now) {
  if (count < 0) return;
  Split& s = splits_[iteration_id][{epoch, split}];
  if (!s.count) s.count = count;
  if (!s.served_at) {
    s.served_at = now;
    s.served_round = rounds_[iteration_id].round;
  }
}

void SplitReceipts::ClientHeard(int64_t iteration_id, int64_t client_id, const std::set<int64_t>& clients) {
  Rounds& r = rounds_[iteration_id];
  r.heard.insert(client_id);
  for (int64_t c : clients) {
    if (!r.heard.contains(c)) return;
  }
  ++r.round;
  r.heard.clear();
}

std::vector<std::pair<int64_t, int64_t>> SplitReceipts::Stalled(int64_t iteration_id, absl::Time now,
                                                                absl::Duration grace) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  auto it = splits_.find(iteration_id);
  auto r = rounds_.find(iteration_id);
  if (it == splits_.end() || r == rounds_.end()) return out;
  for (const auto& [key, s] : it->second) {
    if (s.served_at && now - *s.served_at >= grace && r->second.round >= s.served_round + 2 && !Complete(s)) {
      out.push_back(key);
    }
  }
  return out;
}

void SplitReceipts::Unserve(int64_t iteration_id, int64_t epoch, int64_t split) {
  auto it = splits_.find(iteration_id);
  if (it == splits_.end()) return;
  auto s = it->second.find({epoch, split});
  if (s != it->second.end()) s->second.served_at.reset();
}

SkipRanges SplitReceipts::Received(int64_t iteration_id, int64_t epoch, int64_t split) const {
  SkipRanges out;
  auto it = splits_.find(iteration_id);
  if (it == splits_.end()) return out;
  auto s = it->second.find({epoch, split});
  if (s == it->second.end()) return out;
  for (const auto& [begin, end] : s->second.received.ranges()) {
    out.add_begins(begin);
    out.add_ends(end);
  }
  return out;
}

void SplitReceipts::Forget(int64_t iteration_id, int64_t epoch, int64_t split) {
  auto it = splits_.find(iteration_id);
  if (it == splits_.end()) return;
  it->second.erase({epoch, split});
  if (it->second.empty()) splits_.erase(it);
}

void SplitReceipts::StartBarrier(int64_t iteration_id, const std::set<int64_t>& clients) {
  std::map<int64_t, int>& b = barriers_[iteration_id];
  b.clear();
  for (int64_t c : clients) b[c] = 0;
}

void SplitReceipts::ClientReported(int64_t iteration_id, int64_t client_id, bool clean) {
  auto it = barriers_.find(iteration_id);
  if (it == barriers_.end()) return;
  auto c = it->second.find(client_id);
  if (c == it->second.end()) return;
  // The first heartbeat since the barrier began may have been sent before the reader learned of
  // the loss; a later clean one was sent after.
  if (c->second >= 1 && clean) {
    it->second.erase(c);
  } else {
    ++c->second;
  }
}

void SplitReceipts::ClientGone(int64_t iteration_id, int64_t client_id) {
  auto it = barriers_.find(iteration_id);
  if (it != barriers_.end()) it->second.erase(client_id);
}

bool SplitReceipts::MayReissue(int64_t iteration_id) const {
  auto it = barriers_.find(iteration_id);
  return it == barriers_.end() || it->second.empty();
}

void SplitReceipts::ForgetIteration(int64_t iteration_id) {
  splits_.erase(iteration_id);
  barriers_.erase(iteration_id);
  rounds_.erase(iteration_id);
}

size_t SplitReceipts::size() const {
  size_t n = 0;
  for (const auto& [id, splits] : splits_) n += splits.size();
  return n;
}

}  // namespace tfdata::service
