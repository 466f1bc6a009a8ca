// Read states (issue 22): the progress a reader keeps of what it handed out, plans made of it,
// their merge, and the stored form's refusals.
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/service/client/read_state.h"
#include "lib/service/common/read_progress.h"

using namespace tfdata::service;

namespace {

std::vector<std::pair<int64_t, int64_t>> Ranges(const SeqRanges& r) { return {r.ranges().begin(), r.ranges().end()}; }

ReadState StateOf(const ReadProgress& p, int64_t elements = 0) {
  ReadState s;
  s.set_version(kReadStateVersion);
  s.set_mode(DISTRIBUTED_EPOCH);
  s.set_num_splits(p.num_splits());
  s.set_elements(elements);
  *s.mutable_handed() = p.ToPlan();
  s.mutable_handed()->set_dataset_fingerprint("d");
  s.mutable_handed()->set_plan_fingerprint("p");
  return s;
}

}  // namespace

TEST_CASE("read progress: splits handed out in full become ranges, epochs handed out in full fold away",
          "[read_progress]") {
  ReadProgress p(4);
  for (int64_t seq = 0; seq < 3; ++seq) p.Handed(0, 0, seq);
  p.SplitEnd(0, 0, 3);
  p.Handed(0, 1, 0);
  p.SplitEnd(0, 2, 0);  // an empty split
  ResumePlan plan = p.ToPlan();
  REQUIRE(plan.epochs_size() == 1);
  CHECK(plan.epochs(0).done_begins_size() == 2);  // splits 0 and 2 are not adjacent: two ranges
  CHECK(Ranges(p.Excluded(0)) == std::vector<std::pair<int64_t, int64_t>>{{0, 3}});
  REQUIRE(p.Partial(0).size() == 1);
  CHECK(Ranges(p.Partial(0).at(1)) == std::vector<std::pair<int64_t, int64_t>>{{0, 1}});
  p.SplitEnd(0, 1, 1);
  p.SplitEnd(0, 3, 0);
  CHECK(p.first_epoch() == 1);
  CHECK(p.ToPlan().epochs_size() == 0);
  CHECK(Ranges(p.Excluded(0)) == std::vector<std::pair<int64_t, int64_t>>{{0, 4}});
}

TEST_CASE("read progress: the per-split queries need no copies and agree with the copies", "[read_progress]") {
  ReadProgress p(10);
  p.SplitEnd(0, 1, 0);
  p.SplitEnd(0, 2, 0);  // splits 1-2 done
  p.Handed(0, 4, 0);    // split 4 in part
  p.SplitEnd(0, 7, 0);  // split 7 done
  CHECK(p.Done(0, 1));
  CHECK_FALSE(p.Done(0, 4));
  CHECK_FALSE(p.Done(0, 0));
  CHECK_FALSE(p.Done(1, 1));
  REQUIRE(p.PartialSplit(0, 4) != nullptr);
  CHECK(Ranges(*p.PartialSplit(0, 4)) == std::vector<std::pair<int64_t, int64_t>>{{0, 1}});
  CHECK(p.PartialSplit(0, 1) == nullptr);
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  using Run = std::pair<int64_t, int64_t>;
  CHECK(p.NextRun(0, 0) == Run{0, 1});
  CHECK(p.NextRun(0, 1) == Run{3, 4});  // steps over the done run
  CHECK(p.NextRun(0, 4) == Run{5, 7});  // and over the split in part
  CHECK(p.NextRun(0, 7) == Run{8, kUnbounded});
  CHECK(p.NextRun(1, 3) == Run{3, kUnbounded});  // a later epoch excludes nothing
}

TEST_CASE("shard positions: a resumed stream's index maps past every range left out", "[read_progress]") {
  ShardReadProgress left_out(2);
  for (int64_t position : {0, 1, 2, 5, 6, 9}) left_out.Handed(0, position);
  const ShardPositions positions(left_out);
  // Shard 0 left out [0,3), [5,7) and [9,10): its stream holds 3, 4, 7, 8, 10, 11, ...
  std::vector<int64_t> got;
  for (int64_t i = 0; i < 6; ++i) got.push_back(positions.Position(0, i));
  CHECK(got == std::vector<int64_t>{3, 4, 7, 8, 10, 11});
  CHECK(positions.Position(1, 4) == 4);  // nothing left out of shard 1
}

TEST_CASE("read progress: a plan round-trips, and merging the readers of a job is the union", "[read_progress]") {
  ReadProgress a(3), b(3);
  for (int64_t seq = 0; seq < 5; ++seq) a.Handed(0, 0, seq);   // a has the first half of split 0
  for (int64_t seq = 5; seq < 10; ++seq) b.Handed(0, 0, seq);  // b the rest, and its end
  b.SplitEnd(0, 0, 10);
  a.Handed(0, 1, 0);
  auto back = ReadProgress::FromPlan(a.ToPlan(), 3, "a");
  REQUIRE(back.ok());
  CHECK(back->ToPlan().SerializeAsString() == a.ToPlan().SerializeAsString());
  ReadProgress merged = *back;
  merged.Merge(b);
  // Split 0 is whole only together.
  CHECK(Ranges(merged.Excluded(0)) == std::vector<std::pair<int64_t, int64_t>>{{0, 2}});
  CHECK(merged.Partial(0).size() == 1);  // split 1
  int64_t elements = 0;
  auto plan = MergeReadStates({StateOf(a, 6), StateOf(b, 5)}, &elements);
  REQUIRE(plan.ok());
  CHECK(elements == 11);
  CHECK(plan->dataset_fingerprint() == "d");
  CHECK(plan->SerializeAsString() == [&] {
    ResumePlan p = merged.ToPlan();
    p.set_dataset_fingerprint("d");
    p.set_plan_fingerprint("p");
    return p.SerializeAsString();
  }());
  ReadState other = StateOf(b);
  other.mutable_handed()->set_plan_fingerprint("q");
  auto mixed = MergeReadStates({StateOf(a), other});
  REQUIRE_FALSE(mixed.ok());
  CHECK(std::string(mixed.status().message()).find("read state 1 is of another dataset or split plan") !=
        std::string::npos);
}

TEST_CASE("read progress: a malformed plan is refused, naming what", "[read_progress]") {
  ResumePlan plan;
  auto* e = plan.add_epochs();
  e->set_epoch(0);
  e->add_done_begins(2);
  e->add_done_ends(9);
  auto bad = ReadProgress::FromPlan(plan, 5, "state");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "state: epoch 0: splits done: range [2, 9) is past 5");
  e->set_done_ends(0, 4);
  auto* s = e->add_partial();
  s->set_split(3);
  bad = ReadProgress::FromPlan(plan, 5, "state");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "state: epoch 0: split 3 is both done and in progress");
  s->set_split(4);
  s->add_begins(3);
  s->add_ends(1);
  bad = ReadProgress::FromPlan(plan, 5, "state");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "state: epoch 0: split 4: range [3, 1) is empty or negative");
  plan.set_first_epoch(1);
  s->set_ends(0, 5);
  bad = ReadProgress::FromPlan(plan, 5, "state");
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "state: epoch 0 is before the first epoch or out of order");
}

TEST_CASE("read state: the stored form refuses a truncated, corrupted or foreign state", "[read_progress]") {
  ReadProgress p(8);
  p.Handed(2, 5, 0);
  const std::string bytes = EncodeReadState(StateOf(p, 1));
  auto back = DecodeReadState(bytes, "ckpt");
  REQUIRE(back.ok());
  CHECK(back->handed().epochs(0).epoch() == 2);
  auto truncated = DecodeReadState(bytes.substr(0, bytes.size() - 3), "ckpt");
  REQUIRE_FALSE(truncated.ok());
  CHECK(std::string(truncated.status().message()).rfind("ckpt: ", 0) == 0);
  std::string flipped = bytes;
  flipped[flipped.size() / 2] ^= 0x20;
  CHECK_FALSE(DecodeReadState(flipped, "ckpt").ok());
  auto empty = DecodeReadState("", "ckpt");
  REQUIRE_FALSE(empty.ok());
  CHECK(std::string(empty.status().message()) == "ckpt: empty, not a read state");
  ReadState newer = StateOf(p);
  newer.set_version(kReadStateVersion + 1);
  auto too_new = DecodeReadState(EncodeReadState(newer), "ckpt");
  REQUIRE_FALSE(too_new.ok());
  CHECK(std::string(too_new.status().message()).find("read state version 2") != std::string::npos);
}
