// Exactly-once distributed_epoch reads (issue 19) through real in-process clusters: split-isolated
// processing on the workers, elements with their positions, refusals at job creation.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// Each element as its int64 values (a batch: all of them), sorted, so that runs compare as sets.
std::vector<std::vector<int64_t>> SortedBatches(const std::vector<Element>& elements) {
  std::vector<std::vector<int64_t>> out;
  for (const Element& e : elements) {
    REQUIRE(e.size() == 1);
    out.emplace_back(e[0].data<int64_t>(), e[0].data<int64_t>() + e[0].num_elements());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// range(3000): 64 splits of 47 elements (the last one 39).
constexpr const char* kPipeline =
    "op { range { stop: 3000 } } op { shuffle { buffer_size: 64 seed: 7 } } op { batch { batch_size: 10 } }";
constexpr int64_t kSplitSize = 47;

}  // namespace

TEST_CASE("exactly-once: every element once, batches within a split, the same batches whatever the workers",
          "[exactly_once][cluster]") {
  std::vector<std::vector<int64_t>> first;
  for (const auto& [workers, readers] : std::vector<std::pair<int, int>>{{1, 1}, {3, 2}}) {
    INFO(workers << " workers, " << readers << " readers");
    TestCluster cluster(workers);
    const std::string id = cluster.Register(kPipeline);
    std::vector<std::unique_ptr<service::Reader>> rs;
    const auto batches = SortedBatches(ReadShared(cluster, ExactlyOnceOptions(id, "eval"), readers, &rs));
    std::vector<int64_t> values;
    bool within_split = true;
    for (const auto& b : batches) {
      values.insert(values.end(), b.begin(), b.end());
      for (int64_t v : b) within_split = within_split && v / kSplitSize == b.front() / kSplitSize;
    }
    CHECK(within_split);
    std::sort(values.begin(), values.end());
    std::vector<int64_t> expected(3000);
    for (int64_t i = 0; i < 3000; ++i) expected[i] = i;
    CHECK(values == expected);
    for (const auto& r : rs) CHECK(r->duplicates_dropped() == 0);
    // A split's batches depend on the split alone (its shuffle is seeded from the job's seed and
    // the split), not on which worker made them or how the splits were shared.
    if (first.empty()) {
      first = batches;
    } else {
      CHECK(batches == first);
    }
  }
}

TEST_CASE("exactly-once: a plain distributed_epoch read of the same pipeline batches across splits",
          "[exactly_once][cluster]") {
  // The contrast that shows the option reaches the workers: without it, one worker's batches
  // span split boundaries.
  TestCluster cluster(1);
  const std::string id = cluster.Register(kPipeline);
  service::ReaderOptions o = ExactlyOnceOptions(id);
  o.exactly_once = false;
  auto reader = cluster.NewReader(o);
  REQUIRE(reader.ok());
  bool spans = false;
  for (const auto& b : SortedBatches(ReadAll(**reader))) {
    for (int64_t v : b) spans = spans || v / kSplitSize != b.front() / kSplitSize;
  }
  CHECK(spans);
}

TEST_CASE("exactly-once: pipelines and options that cannot give it are refused at job creation, naming why",
          "[exactly_once][cluster]") {
  TestCluster cluster(1);
  auto error = [&](const std::string& pipeline, service::ReaderOptions o) {
    o.dataset_id = cluster.Register(pipeline);
    auto reader = cluster.NewReader(o);
    REQUIRE_FALSE(reader.ok());
    CHECK(absl::IsInvalidArgument(reader.status()));
    return std::string(reader.status().message());
  };
  const service::ReaderOptions eo = ExactlyOnceOptions("");
  CHECK_THAT(error("op { range { stop: 10 } } op { shuffle { buffer_size: 4 } }", eo),
             Catch::Contains("op 1 (shuffle)") && Catch::Contains("seed"));
  CHECK_THAT(error("op { range { stop: 10 } } op { take { count: 4 } }", eo),
             Catch::Contains("op 1 (take)") && Catch::Contains("each split"));
  service::ReaderOptions parallel = eo;
  parallel.mode = service::PARALLEL_EPOCHS;
  CHECK_THAT(error("op { range { stop: 10 } }", parallel),
             Catch::Contains("exactly-once reads need --mode distributed_epoch"));
  // Readers of one named job must agree.
  const std::string id = cluster.Register("op { range { stop: 10 } }");
  auto first = cluster.NewReader(ExactlyOnceOptions(id, "shared"));
  REQUIRE(first.ok());
  service::ReaderOptions plain = ExactlyOnceOptions(id, "shared");
  plain.exactly_once = false;
  auto second = cluster.NewReader(plain);
  REQUIRE_FALSE(second.ok());
  CHECK_THAT(std::string(second.status().message()),
             Catch::Contains("was created with exactly-once reads; this request asks for none"));
}

namespace {

// Reads the job with `readers` readers in threads; once they have `stop_after` elements between
// them, stops worker `victim` as a crash would. Returns every element read.
std::vector<Element> ReadThroughACrash(TestCluster& cluster, const service::ReaderOptions& options, int readers,
                                       int64_t stop_after, size_t victim,
                                       std::vector<std::unique_ptr<service::Reader>>* rs) {
  return ReadShared(cluster, options, readers, rs, [&](const std::atomic<int64_t>& read) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (read.load() < stop_after && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    cluster.StopWorker(victim);
  });
}

std::vector<int64_t> Values(const std::vector<Element>& elements) {
  std::vector<int64_t> values;
  for (const auto& b : SortedBatches(elements)) values.insert(values.end(), b.begin(), b.end());
  std::sort(values.begin(), values.end());
  return values;
}

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_CASE("exactly-once: a worker dying mid-epoch: its splits are produced again elsewhere, every element once",
          "[exactly_once][cluster]") {
  // A slow pipeline (a sleep per element), so that the dying worker holds splits in flight.
  const std::string pipeline =
      "op { range { stop: 6400 } } op { map { fn { sleep { micros: 100 } } } } "
      "op { shuffle { buffer_size: 16 seed: 3 } } op { batch { batch_size: 4 } }";
  for (int readers : {1, 2}) {
    INFO(readers << " reader(s)");
    TestCluster cluster(3);
    const std::string id = cluster.Register(pipeline);
    std::vector<std::unique_ptr<service::Reader>> rs;
    const auto elements = ReadThroughACrash(cluster, ExactlyOnceOptions(id, "eval"), readers, 300, 1, &rs);
    const std::vector<int64_t> values = Values(elements);
    CHECK(values.size() == 6400);
    CHECK(values == Iota(6400));
    int64_t lost = 0;
    for (const auto& r : rs) lost += r->splits_lost();
    CHECK(lost == 0);
  }
}

TEST_CASE("exactly-once: a reader of a shared job that goes away mid-split does not stall the epoch",
          "[exactly_once][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register(
      "op { range { stop: 4000 } } op { map { fn { sleep { micros: 200 } } } } op { batch { batch_size: 2 } }");
  service::ReaderOptions small = ExactlyOnceOptions(id, "shared");
  small.max_outstanding_requests = 1;
  small.max_requests_per_task = 1;
  small.max_elements_per_request = 1;
  small.buffer_elements = 1;
  auto a = cluster.NewReader(ExactlyOnceOptions(id, "shared"));
  auto b = cluster.NewReader(small);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  // B takes a few batches and goes away: what it fetched after its last heartbeat was never
  // reported, so those splits stay incomplete until the dispatcher produces them again.
  std::vector<Element> b_got(3);
  for (Element& e : b_got) REQUIRE(*(*b)->Next(&e));
  b->reset();
  std::vector<Element> a_got;
  Element e;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  bool ended = false;
  while (absl::Now() < deadline) {
    auto more = (*a)->NextWithin(&e, absl::Seconds(1));
    REQUIRE(more.ok());
    if (!more->has_value()) continue;
    if (!**more) {
      ended = true;
      break;
    }
    a_got.push_back(e);
  }
  REQUIRE(ended);  // no hang
  const std::vector<int64_t> a_values = Values(a_got);
  CHECK(std::adjacent_find(a_values.begin(), a_values.end()) == a_values.end());  // nothing twice to A
  std::vector<int64_t> all = a_values;
  for (int64_t v : Values(b_got)) all.push_back(v);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  // What B fetched and reported but never consumed is B's (at most its small buffer's worth).
  INFO(4000 - static_cast<int64_t>(all.size()) << " missing");
  CHECK(static_cast<int64_t>(all.size()) >= 4000 - 8);
}
