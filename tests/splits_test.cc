// Split plans and split-fed sources (distributed_epoch), without the service.
#include <algorithm>
#include <deque>

#include <catch2/catch.hpp>

#include "lib/io/tfrecord.h"
#include "lib/pipeline/splits.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// Every split's elements, split after split, through SourcePipelineForSplit.
std::vector<Element> ElementsBySplit(const pipeline::Pipeline& p, const SplitPlan& plan) {
  std::vector<Element> out;
  for (int64_t i = 0; i < plan.num_splits(); ++i) {
    service::Split s = plan.Get(i);
    CHECK(s.index() == i);
    auto sub = SourcePipelineForSplit(p.op(0), s);
    REQUIRE(sub.ok());
    auto ds = BuildDataset(*sub, BuildOptions{});
    REQUIRE(ds.ok());
    auto elements = Collect(**ds);
    REQUIRE(elements.ok());
    for (auto& e : *elements) out.push_back(std::move(e));
  }
  return out;
}

// The source alone, iterated directly.
std::vector<Element> SourceElements(const pipeline::Pipeline& p) {
  pipeline::Pipeline first;
  *first.add_op() = p.op(0);
  auto ds = BuildDataset(first, BuildOptions{});
  REQUIRE(ds.ok());
  auto elements = Collect(**ds);
  REQUIRE(elements.ok());
  return *elements;
}

void CheckSplitsCoverSource(const std::string& text, int64_t expect_splits = -1) {
  INFO(text);
  const auto p = ParsedPipeline(text);
  auto plan = SplitPlan::Create(p, BuildOptions{});
  REQUIRE(plan.ok());
  if (expect_splits >= 0) CHECK(plan->num_splits() == expect_splits);
  CHECK(ElementsBySplit(p, *plan) == SourceElements(p));
}

// Hands out a fixed list of splits per epoch, like the dispatcher would.
class FakeProvider : public SplitProvider {
 public:
  explicit FakeProvider(SplitPlan plan) : plan_(std::move(plan)) {}
  int64_t StartEpoch() override { return epochs_++; }
  absl::StatusOr<std::optional<service::Split>> Next(int64_t epoch) override {
    int64_t& next = next_[epoch];
    if (next >= plan_.num_splits()) return std::nullopt;
    return plan_.Get(next++);
  }
  int64_t epochs_ = 0;

 private:
  SplitPlan plan_;
  std::map<int64_t, int64_t> next_;
};

}  // namespace

TEST_CASE("splits: the splits of each splittable source cover it exactly, in order", "[splits]") {
  CheckSplitsCoverSource("op { range { stop: 1000 } }", 63);  // 16 elements per split
  CheckSplitsCoverSource("op { range { start: 5 stop: -300 step: -7 } }");
  CheckSplitsCoverSource("op { range { stop: 0 } }", 0);
  CheckSplitsCoverSource("op { range { stop: 5 } }", 5);
  CheckSplitsCoverSource(
      "op { from_tensor_slices { tensor { dtype: INT64 shape: [5, 2] int_values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] } "
      "tensor { dtype: STRING string_values: ['a', 'b', 'c', 'd', 'e'] } } }",
      5);
  CheckSplitsCoverSource(
      "op { zip { input { op { range { stop: 300 } } } input { op { range { start: 10 stop: 1000 } } } } }");
  CheckSplitsCoverSource(
      "op { concatenate { input { op { range { stop: 100 } } } "
      "input { op { range { start: 500 stop: 520 } } op { map { fn { arith { op: MUL value: 2 } } } } } } }");
}

TEST_CASE("splits: file sources split by file, and list_files expands on the planning side", "[splits]") {
  TempDir dir;
  std::vector<std::string> files;
  for (int f = 0; f < 4; ++f) {
    files.push_back(dir.Join("part-" + std::to_string(f) + ".tfrecord"));
    auto w = TFRecordWriter::Open(files.back(), Compression::kNone);
    REQUIRE(w.ok());
    for (int r = 0; r < 3 + f; ++r) REQUIRE((*w)->Write("f" + std::to_string(f) + "r" + std::to_string(r)).ok());
    REQUIRE((*w)->Close().ok());
  }
  std::string list;
  for (const auto& f : files) list += (list.empty() ? "'" : ", '") + f + "'";
  CheckSplitsCoverSource("op { tfrecord { file: [" + list + "] } }", 4);
  CheckSplitsCoverSource("op { list_files { pattern: '" + dir.Join("*.tfrecord") + "' } }", 4);
  auto p = ParsedPipeline("op { list_files { pattern: '" + dir.Join("*.tfrecord") + "' } }");
  auto plan = SplitPlan::Create(p, BuildOptions{});
  REQUIRE(plan.ok());
  CHECK(plan->Get(2).file() == files[2]);
}

TEST_CASE("splits: unsplittable sources are errors naming the op", "[splits]") {
  auto err = [](const std::string& text) {
    auto plan = SplitPlan::Create(ParsedPipeline(text), BuildOptions{});
    REQUIRE_FALSE(plan.ok());
    CHECK(absl::IsInvalidArgument(plan.status()));
    return std::string(plan.status().message());
  };
  CHECK_THAT(err("op { zip { input { op { range { stop: 5 } } } input { op { range { stop: 5 } } op { take { count: 2 "
                 "} } } } }"),
             Catch::Contains("distributed_epoch cannot split op 0 (zip) > input 1"));
  CHECK_THAT(
      err("op { concatenate { input { op { range { stop: 5 } } } input { op { zip { input { op { range { stop: 1 } } } "
          "input { op { range { stop: 1 } } op { repeat {} } } } } } } }"),
      Catch::Contains("op 0 (concatenate) > input 1 > op 0 (zip) > input 1"));
}

TEST_CASE("splits: a split-fed source runs the rest of the pipeline over all splits, a new epoch per repeat",
          "[splits]") {
  const auto p =
      ParsedPipeline("op { range { stop: 100 } } op { batch { batch_size: 30 } } op { repeat { count: 2 } }");
  auto plan = SplitPlan::Create(p, BuildOptions{});
  REQUIRE(plan.ok());
  auto provider = std::make_shared<FakeProvider>(*plan);
  auto ds = BuildSplitFedDataset(p, BuildOptions{}, provider);
  REQUIRE(ds.ok());
  auto out = Collect(**ds);
  REQUIRE(out.ok());
  // Batches span splits (the fused range -> batch bulk path across split boundaries).
  REQUIRE(out->size() == 8);
  CHECK((*out)[0][0].shape() == Shape{30});
  CHECK((*out)[3][0].shape() == Shape{10});
  std::vector<int64_t> values;
  for (const auto& e : *out) {
    for (int64_t i = 0; i < e[0].num_elements(); ++i) values.push_back(e[0].data<int64_t>()[i]);
  }
  REQUIRE(values.size() == 200);
  for (size_t i = 0; i < values.size(); ++i) CHECK(values[i] == static_cast<int64_t>(i % 100));
  CHECK(provider->epochs_ == 2);
}

TEST_CASE("splits: a bad split is an error, not a crash", "[splits]") {
  const auto p =
      ParsedPipeline("op { concatenate { input { op { range { stop: 5 } } } input { op { range { stop: 5 } } } } }");
  service::Split s;
  s.set_input(7);
  CHECK(absl::IsInvalidArgument(SourcePipelineForSplit(p.op(0), s).status()));
  const auto r = ParsedPipeline("op { range { stop: 5 } }");
  s.set_begin(3);
  s.set_end(1);
  CHECK(absl::IsInvalidArgument(SourcePipelineForSplit(r.op(0), s).status()));
  const auto t = ParsedPipeline("op { tfrecord { file: ['x'] } }");
  CHECK(absl::IsInvalidArgument(SourcePipelineForSplit(t.op(0), service::Split()).status()));
}

TEST_CASE("splits: a plan survives its journal record, and a corrupt record is an error", "[splits]") {
  for (const char* text : {"op { range { stop: 1000 } }",
                           "op { concatenate { input { op { range { stop: 10 } } } "
                           "input { op { from_tensor_slices { tensor { dtype: INT64 shape: 3 int_values: [1, 2, 3] } } "
                           "} } } }"}) {
    INFO(text);
    auto plan = SplitPlan::Create(ParsedPipeline(text), BuildOptions{});
    REQUIRE(plan.ok());
    auto back = SplitPlan::FromRecord(plan->ToRecord());
    REQUIRE(back.ok());
    REQUIRE(back->num_splits() == plan->num_splits());
    for (int64_t i = 0; i < plan->num_splits(); ++i)
      CHECK(back->Get(i).ShortDebugString() == plan->Get(i).ShortDebugString());
  }
  service::SplitPlanRecord files;
  files.set_kind(service::SplitPlanRecord::FILES);
  files.add_files("/data/a");
  files.add_files("/data/b");
  auto from_files = SplitPlan::FromRecord(files);
  REQUIRE(from_files.ok());
  CHECK(from_files->Get(1).file() == "/data/b");
  service::SplitPlanRecord bad;
  bad.set_kind(service::SplitPlanRecord::ELEMENTS);
  bad.set_elements(10);  // split_size 0
  CHECK(absl::IsDataLoss(SplitPlan::FromRecord(bad).status()));
  bad.set_kind(static_cast<service::SplitPlanRecord::Kind>(7));
  CHECK(absl::IsDataLoss(SplitPlan::FromRecord(bad).status()));
  service::SplitPlanRecord deep;
  deep.set_kind(service::SplitPlanRecord::CONCATENATE);
  service::SplitPlanRecord* at = &deep;
  for (int i = 0; i < 100; ++i) {
    at = at->add_inputs();
    at->set_kind(service::SplitPlanRecord::CONCATENATE);
  }
  CHECK(absl::IsDataLoss(SplitPlan::FromRecord(deep).status()));
}
