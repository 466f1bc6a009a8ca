#include "lib/service/common/read_progress.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace tfdata::service {
namespace {

// Checks half-open ranges: non-empty, sorted, disjoint, within [0, limit) when limit >= 0.
absl::Status CheckRanges(const google::protobuf::RepeatedField<int64_t>& begins,
                         const google::protobuf::RepeatedField<int64_t>& ends, int64_t limit, const std::string& what) {
  if (begins.size() != ends.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", begins.size(), " range begins but ", ends.size(), " ends"));
  }
  int64_t last_end = -1;
  for (int i = 0; i < begins.size(); ++i) {
    const int64_t b = begins[i], e = ends[i];
    if (b < 0 || e <= b || (limit >= 0 && e > limit) || b <= last_end) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": range [", b, ", ", e, ") is ",
                                                     b < 0 || e <= b             ? "empty or negative"
                                                     : (limit >= 0 && e > limit) ? absl::StrCat("past ", limit)
                                                                                 : "out of order or overlapping"));
    }
    last_end = e;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ReadProgress> ReadProgress::FromPlan(const ResumePlan& plan, int64_t num_splits,
                                                    const std::string& where) {
  if (num_splits < 0) return absl::InvalidArgumentError(absl::StrCat(where, ": negative number of splits"));
  if (plan.first_epoch() < 0) return absl::InvalidArgumentError(absl::StrCat(where, ": negative first epoch"));
  ReadProgress p(num_splits);
  p.first_epoch_ = plan.first_epoch();
  int64_t last_epoch = plan.first_epoch() - 1;
  for (const EpochResume& er : plan.epochs()) {
    const std::string e_where = absl::StrCat(where, ": epoch ", er.epoch());
    if (er.epoch() <= last_epoch) {
      return absl::InvalidArgumentError(absl::StrCat(e_where, " is before the first epoch or out of order"));
    }
    last_epoch = er.epoch();
    if (auto st = CheckRanges(er.done_begins(), er.done_ends(), num_splits, absl::StrCat(e_where, ": splits done"));
        !st.ok()) {
      return st;
    }
    Epoch& e = p.epochs_[er.epoch()];
    for (int i = 0; i < er.done_begins_size(); ++i) e.done.Add(er.done_begins(i), er.done_ends(i));
    int64_t last_split = -1;
    for (const SplitSkips& s : er.partial()) {
      const std::string s_where = absl::StrCat(e_where, ": split ", s.split());
      if (s.split() < 0 || s.split() >= num_splits) {
        return absl::InvalidArgumentError(absl::StrCat(s_where, " is not in the plan's ", num_splits, " splits"));
      }
      if (s.split() <= last_split) return absl::InvalidArgumentError(absl::StrCat(s_where, " is out of order"));
      last_split = s.split();
      if (e.done.Contains(s.split())) {
        return absl::InvalidArgumentError(absl::StrCat(s_where, " is both done and in progress"));
      }
      if (s.has_count() && s.count() < 0) return absl::InvalidArgumentError(absl::StrCat(s_where, ": negative count"));
      if (auto st = CheckRanges(s.begins(), s.ends(), s.has_count() ? s.count() : -1, s_where); !st.ok()) return st;
      Split& sp = e.partial[s.split()];
      for (int i = 0; i < s.begins_size(); ++i) sp.handed.Add(s.begins(i), s.ends(i));
      if (s.has_count()) sp.count = s.count();
    }
    for (auto it = e.partial.begin(); it != e.partial.end();) {
      const int64_t split = (it++)->first;
      p.Settle(er.epoch(), e, split);
    }
  }
  p.Advance();
  return p;
}

void ReadProgress::Handed(int64_t epoch, int64_t split, int64_t seq) {
  if (epoch < first_epoch_) return;
  Epoch& e = epochs_[epoch];
  if (e.done.Contains(split)) return;
  e.partial[split].handed.Add(seq, seq + 1);
}

void ReadProgress::SplitEnd(int64_t epoch, int64_t split, int64_t count) {
  if (epoch < first_epoch_) return;
  Epoch& e = epochs_[epoch];
  if (e.done.Contains(split)) return;
  e.partial[split].count = count;
  Settle(epoch, e, split);
  Advance();
}

void ReadProgress::Settle(int64_t epoch, Epoch& e, int64_t split) {
  auto it = e.partial.find(split);
  if (it == e.partial.end() || !it->second.count || !it->second.handed.Covers(*it->second.count)) return;
  e.partial.erase(it);
  e.done.Add(split, split + 1);
  (void)epoch;
}

void ReadProgress::Advance() {
  while (true) {
    auto it = epochs_.begin();
    while (it != epochs_.end() && it->first < first_epoch_) it = epochs_.erase(it);
    if (it == epochs_.end() || it->first != first_epoch_ || !it->second.partial.empty() || num_splits_ <= 0 ||
        !it->second.done.Covers(num_splits_)) {
      return;
    }
    epochs_.erase(it);
    ++first_epoch_;
  }
}

void ReadProgress::Merge(const ReadProgress& other) {
  if (num_splits_ == 0) num_splits_ = other.num_splits_;
  first_epoch_ = std::max(first_epoch_, other.first_epoch_);
  for (const auto& [epoch, oe] : other.epochs_) {
    if (epoch < first_epoch_) continue;
    Epoch& e = epochs_[epoch];
    for (const auto& [b, end] : oe.done.ranges()) e.done.Add(b, end);
    for (const auto& [split, os] : oe.partial) {
      Split& s = e.partial[split];
      for (const auto& [b, end] : os.handed.ranges()) s.handed.Add(b, end);
      if (os.count) s.count = os.count;
    }
    // A split another reader handed out in full is done, whatever this one has of it.
    for (auto it = e.partial.begin(); it != e.partial.end();) {
      if (e.done.Contains(it->first)) {
        it = e.partial.erase(it);
      } else {
        Settle(epoch, e, (it++)->first);
      }
    }
  }
  Advance();
}

ResumePlan ReadProgress::ToPlan() const {
  ResumePlan plan;
  plan.set_first_epoch(first_epoch_);
  for (const auto& [epoch, e] : epochs_) {
    if (epoch < first_epoch_ || (e.done.ranges().empty() && e.partial.empty())) continue;
    EpochResume* er = plan.add_epochs();
    er->set_epoch(epoch);
    for (const auto& [b, end] : e.done.ranges()) {
      er->add_done_begins(b);
      er->add_done_ends(end);
    }
    for (const auto& [split, s] : e.partial) {
      SplitSkips* sk = er->add_partial();
      sk->set_split(split);
      for (const auto& [b, end] : s.handed.ranges()) {
        sk->add_begins(b);
        sk->add_ends(end);
      }
      if (s.count) sk->set_count(*s.count);
    }
  }
  return plan;
}

SeqRanges ReadProgress::Excluded(int64_t epoch) const {
  SeqRanges out;
  if (epoch < first_epoch_) {
    out.Add(0, num_splits_);
    return out;
  }
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) return out;
  out = it->second.done;
  for (const auto& [split, s] : it->second.partial) out.Add(split, split + 1);
  return out;
}

bool ReadProgress::Done(int64_t epoch, int64_t split) const {
  if (epoch < first_epoch_) return true;
  auto it = epochs_.find(epoch);
  return it != epochs_.end() && it->second.done.Contains(split);
}

const SeqRanges* ReadProgress::PartialSplit(int64_t epoch, int64_t split) const {
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) return nullptr;
  auto s = it->second.partial.find(split);
  return s == it->second.partial.end() ? nullptr : &s->second.handed;
}

std::pair<int64_t, int64_t> ReadProgress::NextRun(int64_t epoch, int64_t from) const {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  if (epoch < first_epoch_) return {num_splits_, kUnbounded};
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) return {from, kUnbounded};
  const auto& done = it->second.done.ranges();
  const auto& partial = it->second.partial;
  // Step over excluded splits: a done range, or a split handed out in part.
  while (true) {
    auto d = done.upper_bound(from);
    if (d != done.begin() && std::prev(d)->second > from) {
      from = std::prev(d)->second;
      continue;
    }
    if (partial.contains(from)) {
      ++from;
      continue;
    }
    break;
  }
  int64_t end = kUnbounded;
  if (auto d = done.upper_bound(from); d != done.end()) end = d->first;
  if (auto p = partial.upper_bound(from); p != partial.end()) end = std::min(end, p->first);
  return {from, end};
}

std::map<int64_t, SeqRanges> ReadProgress::Partial(int64_t epoch) const {
  std::map<int64_t, SeqRanges> out;
  auto it = epochs_.find(epoch);
  if (it == epochs_.end()) return out;
  for (const auto& [split, s] : it->second.partial) out.emplace(split, s.handed);
  return out;
}

absl::StatusOr<ShardReadProgress> ShardReadProgress::FromPlan(const ResumePlan& plan, const std::string& where) {
  if (plan.num_shards() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a static-sharding state with ", plan.num_shards(), " shards"));
  }
  ShardReadProgress p(plan.num_shards());
  int32_t last = -1;
  for (const ShardResume& s : plan.shards()) {
    const std::string s_where = absl::StrCat(where, ": shard ", s.shard());
    if (s.shard() < 0 || s.shard() >= plan.num_shards()) {
      return absl::InvalidArgumentError(absl::StrCat(s_where, " is not one of the ", plan.num_shards(), " shards"));
    }
    if (s.shard() <= last) return absl::InvalidArgumentError(absl::StrCat(s_where, " is out of order"));
    last = s.shard();
    if (auto st = CheckRanges(s.begins(), s.ends(), -1, s_where); !st.ok()) return st;
    for (int i = 0; i < s.begins_size(); ++i) p.shards_[s.shard()].Add(s.begins(i), s.ends(i));
  }
  return p;
}

void ShardReadProgress::Merge(const ShardReadProgress& other) {
  num_shards_ = std::max(num_shards_, other.num_shards_);
  for (const auto& [shard, ranges] : other.shards_) {
    for (const auto& [b, e] : ranges.ranges()) shards_[shard].Add(b, e);
  }
}

void ShardReadProgress::ToPlan(ResumePlan* plan) const {
  plan->set_num_shards(num_shards_);
  plan->clear_shards();
  for (const auto& [shard, ranges] : shards_) {
    if (ranges.ranges().empty()) continue;
    ShardResume* s = plan->add_shards();
    s->set_shard(shard);
    for (const auto& [b, e] : ranges.ranges()) {
      s->add_begins(b);
      s->add_ends(e);
    }
  }
}

SeqRanges ShardReadProgress::Shard(int32_t shard) const {
  auto it = shards_.find(shard);
  return it == shards_.end() ? SeqRanges() : it->second;
}

namespace {

constexpr int64_t kMaxPosition = std::numeric_limits<int64_t>::max();

int64_t SaturatingAdd(int64_t a, int64_t b) { return b > kMaxPosition - a ? kMaxPosition : a + b; }

}  // namespace

ShardPositions::ShardPositions(const ShardReadProgress& left_out) {
  for (const auto& [shard, ranges] : left_out.shards()) {
    std::vector<Gap>& gaps = gaps_[shard];
    int64_t skipped = 0;
    for (const auto& [b, e] : ranges.ranges()) {
      // Ranges are sorted and disjoint, so the indices are non-decreasing.
      gaps.push_back({b - skipped, skipped = SaturatingAdd(skipped, e - b)});
    }
  }
}

int64_t ShardPositions::Position(int32_t shard, int64_t index) const {
  auto it = gaps_.find(shard);
  if (it == gaps_.end()) return index;
  // Every range that begins at or before the position pushes it on.
  const std::vector<Gap>& gaps = it->second;
  auto after = std::upper_bound(gaps.begin(), gaps.end(), index, [](int64_t i, const Gap& g) { return i < g.index; });
  if (after == gaps.begin()) return index;
  return SaturatingAdd(index, std::prev(after)->skipped_through);
}

}  // namespace tfdata::service
