// Split-isolated processing: each split's output is a deterministic function of (pipeline, epoch,
// split), whichever iterator (worker) produces it, and carries its position.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "fmt/format.h"
#include "lib/pipeline/split_isolation.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;

namespace {

// Hands out the listed split indices of every epoch, in that order (a worker's share of them).
class ListedProvider : public SplitProvider {
 public:
  ListedProvider(SplitPlan plan, std::vector<int64_t> indices) : plan_(std::move(plan)), indices_(std::move(indices)) {}
  int64_t StartEpoch() override { return epochs_++; }
  absl::StatusOr<std::optional<service::Split>> Next(int64_t epoch) override {
    size_t& next = next_[epoch];
    if (next >= indices_.size()) return std::nullopt;
    return plan_.Get(indices_[next++]);
  }

 private:
  SplitPlan plan_;
  std::vector<int64_t> indices_;
  int64_t epochs_ = 0;
  std::map<int64_t, size_t> next_;
};

struct Out {
  std::vector<int64_t> values;  // unbatched
  std::vector<SplitPosition> positions;
  std::vector<std::vector<int64_t>> elements;  // as produced (a batch: its values)
};

std::vector<int64_t> AllSplits(const SplitPlan& plan) {
  std::vector<int64_t> all;
  for (int64_t i = 0; i < plan.num_splits(); ++i) all.push_back(i);
  return all;
}

Out Run(const std::string& text, std::vector<int64_t> splits = {}) {
  const pipeline::Pipeline p = testing::ParsedPipeline(text);
  auto plan = SplitPlan::Create(p, BuildOptions{});
  REQUIRE(plan.ok());
  if (splits.empty()) splits = AllSplits(*plan);
  auto it = SplitIsolatedIterator::Create(p, BuildOptions{}, std::make_shared<ListedProvider>(*plan, splits),
                                          IteratorContext{});
  INFO(it.status().ToString());
  REQUIRE(it.ok());
  Out out;
  Element e;
  SplitPosition pos;
  for (int n = 0; n < 100000; ++n) {
    auto more = (*it)->Next(&e, &pos);
    REQUIRE(more.ok());
    if (!*more) break;
    REQUIRE(e.size() == 1);
    const std::vector<int64_t> v =
        e[0].rank() == 0 ? std::vector<int64_t>{e[0].data<int64_t>()[0]}
                         : std::vector<int64_t>(e[0].data<int64_t>(), e[0].data<int64_t>() + e[0].shape()[0]);
    out.values.insert(out.values.end(), v.begin(), v.end());
    out.elements.push_back(v);
    out.positions.push_back(pos);
  }
  return out;
}

// range(1000): 63 splits of 16 elements (the last one 8).
constexpr const char* kShuffled = "op { range { stop: 1000 } } op { shuffle { buffer_size: 8 seed: 5 } } ";

}  // namespace

TEST_CASE("split isolation: every element once, batches within one split, positions in order",
          "[splits][split_isolation]") {
  const Out out = Run(std::string(kShuffled) + "op { batch { batch_size: 5 } }");
  std::vector<int64_t> sorted = out.values;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(1000);
  for (int64_t i = 0; i < 1000; ++i) expected[i] = i;
  CHECK(sorted == expected);
  std::map<int64_t, int64_t> next_seq;
  for (size_t k = 0; k < out.elements.size(); ++k) {
    const SplitPosition& pos = out.positions[k];
    CHECK(pos.epoch == 0);
    CHECK(pos.seq == next_seq[pos.split]++);
    for (int64_t v : out.elements[k]) CHECK(v / 16 == pos.split);  // a batch never spans two splits
  }
  // Each 16-element split gives 4 batches (5, 5, 5, 1): per split, not per stream.
  CHECK(next_seq[0] == 4);
  CHECK(next_seq[62] == 2);  // the last split's 8 elements
}

TEST_CASE("split isolation: a split produced again elsewhere gives the same elements in the same order",
          "[splits][split_isolation]") {
  const std::string text =
      std::string(kShuffled) + "op { map { fn { arith { op: MUL value: 3 } } } } op { batch { batch_size: 3 } }";
  const Out first = Run(text, {0, 7, 9});
  const Out again = Run(text, {9});  // another worker, given split 9 alone
  std::vector<std::vector<int64_t>> first9;
  for (size_t k = 0; k < first.elements.size(); ++k) {
    if (first.positions[k].split == 9) first9.push_back(first.elements[k]);
  }
  CHECK(first9 == again.elements);
  // The shuffle shuffled within the split, and two splits got different orders.
  std::vector<int64_t> s0, s7;
  for (size_t k = 0; k < first.values.size(); ++k) {
    (first.values[k] / 3 / 16 == 0 ? s0 : s7).push_back(first.values[k] / 3 % 16);
  }
  s7.resize(16);  // split 7's part (split 9 follows it)
  CHECK(s0 != s7);
  CHECK_FALSE(std::is_sorted(s0.begin(), s0.end()));
}

TEST_CASE("split isolation: a trailing repeat is the number of epochs, each shuffled anew",
          "[splits][split_isolation]") {
  const Out out = Run(std::string(kShuffled) + "op { repeat { count: 2 } }", {0});
  REQUIRE(out.values.size() == 32);
  CHECK(out.positions[0].epoch == 0);
  CHECK(out.positions[16].epoch == 1);
  CHECK(out.positions[16].seq == 0);
  const std::vector<int64_t> e0(out.values.begin(), out.values.begin() + 16);
  const std::vector<int64_t> e1(out.values.begin() + 16, out.values.end());
  CHECK(e0 != e1);
  CHECK(std::set<int64_t>(e0.begin(), e0.end()) == std::set<int64_t>(e1.begin(), e1.end()));
}

TEST_CASE("split isolation: pipelines whose ops would act per split, or differ per run, are refused",
          "[splits][split_isolation]") {
  auto check = [](const std::string& text) {
    return std::string(CheckSplitIsolation(testing::ParsedPipeline(text), "exactly-once reads").message());
  };
  CHECK(check("op { range { stop: 10 } } op { take { count: 3 } }") ==
        "op 1 (take): exactly-once reads process each split of the source on its own, and this op would then act on "
        "each split, not on the whole stream (a `repeat` is allowed as the last op: the number of epochs)");
  CHECK_THAT(check("op { range { stop: 10 } } op { repeat { count: 2 } } op { batch { batch_size: 2 } }"),
             Catch::StartsWith("op 1 (repeat): "));
  CHECK_THAT(check("op { range { stop: 10 } } op { shuffle { buffer_size: 2 } }"),
             Catch::Contains("a shuffle without a `seed`"));
  CHECK(check("op { range { stop: 10 } } op { batch { batch_size: 2 } } op { repeat {} }").empty());
}

TEST_CASE("split isolation: Step marks the end of every split, empty ones included, with its count",
          "[splits][split_isolation]") {
  // range(64): 64 splits of 1 element each; the filter empties all but split 4.
  const pipeline::Pipeline p =
      testing::ParsedPipeline("op { range { stop: 64 } } op { filter { fn { compare { op: EQ value: 4 } } } }");
  auto plan = SplitPlan::Create(p, BuildOptions{});
  REQUIRE(plan.ok());
  const std::vector<int64_t> splits = {3, 4, 10};
  auto it = SplitIsolatedIterator::Create(p, BuildOptions{}, std::make_shared<ListedProvider>(*plan, splits),
                                          IteratorContext{});
  INFO(it.status().ToString());
  REQUIRE(it.ok());
  std::vector<std::string> steps;
  Element e;
  SplitPosition pos;
  for (int n = 0; n < 100; ++n) {
    auto step = (*it)->Step(&e, &pos);
    REQUIRE(step.ok());
    if (*step == SplitStep::kEnd) break;
    steps.push_back(
        fmt::format("{} {}/{}/{}", *step == SplitStep::kElement ? "element" : "end", pos.epoch, pos.split, pos.seq));
  }
  CHECK(steps == std::vector<std::string>{"end 0/3/0", "element 0/4/0", "end 0/4/1", "end 0/10/0"});
}
