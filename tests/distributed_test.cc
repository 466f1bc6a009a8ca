// distributed_epoch through real in-process clusters (TestCluster): exactly once without faults,
// at most once (with the loss counted) when a worker dies.
#include <chrono>
#include <map>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/io/tfrecord.h"
#include "lib/pipeline/splits.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

service::ReaderOptions Distributed(const std::string& id, const std::string& job_name = "") {
  service::ReaderOptions o;
  o.dataset_id = id;
  o.mode = service::DISTRIBUTED_EPOCH;
  o.job_name = job_name;
  return o;
}

bool EachOnce(const std::vector<int64_t>& values, int64_t n) {
  auto counts = Counts(values);
  if (static_cast<int64_t>(counts.size()) != n || static_cast<int64_t>(values.size()) != n) return false;
  for (const auto& [v, c] : counts) {
    if (v < 0 || v >= n || c != 1) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("distributed_epoch: exactly once on range with 1, 3 and 5 workers and 1 to 3 readers",
          "[distributed][cluster]") {
  for (int workers : {1, 3, 5}) {
    TestCluster cluster(workers);
    const std::string id = cluster.Register("op { range { stop: 20000 } }");
    for (int readers : {1, 2, 3}) {
      INFO(workers << " workers, " << readers << " readers");
      const std::string job = "job-" + std::to_string(readers);
      auto values = Int64Scalars(ReadShared(cluster, Distributed(id, job), readers));
      CHECK(EachOnce(values, 20000));
    }
  }
}

TEST_CASE("distributed_epoch: exactly once over a set of TFRecord files, 1 to 5 workers, 1 or 3 readers",
          "[distributed][cluster]") {
  TempDir dir;
  std::string files;
  std::map<std::string, int> expected;
  for (int f = 0; f < 7; ++f) {
    const std::string path = dir.Join("part-" + std::to_string(f));
    auto w = TFRecordWriter::Open(path, Compression::kNone);
    REQUIRE(w.ok());
    for (int r = 0; r < 50 + f; ++r) {
      const std::string rec = "file" + std::to_string(f) + "-rec" + std::to_string(r);
      REQUIRE((*w)->Write(rec).ok());
      ++expected[rec];
    }
    REQUIRE((*w)->Close().ok());
    files += (files.empty() ? "'" : ", '") + path + "'";
  }
  for (int workers : {1, 3, 5}) {
    INFO(workers << " workers");
    TestCluster cluster(workers);
    const std::string id = cluster.Register("op { tfrecord { file: [" + files + "] } }");
    for (int readers : {1, 3}) {
      auto elements = ReadShared(cluster, Distributed(id, "tfrecords-" + std::to_string(readers)), readers);
      std::map<std::string, int> got;
      for (const auto& e : elements) ++got[e[0].strings()[0]];
      CHECK(got == expected);
    }
  }
}

TEST_CASE("distributed_epoch: repeat starts a new epoch of splits, each exactly once", "[distributed][cluster]") {
  TestCluster cluster(3);
  const std::string id = cluster.Register("op { range { stop: 3000 } } op { repeat { count: 3 } }");
  auto reader = cluster.NewReader(Distributed(id));
  REQUIRE(reader.ok());
  auto counts = Counts(Int64Scalars(ReadAll(**reader)));
  REQUIRE(counts.size() == 3000);
  bool three = true;
  for (const auto& [v, c] : counts) three = three && c == 3;
  CHECK(three);
}

TEST_CASE("distributed_epoch: a worker joining mid-epoch takes splits that are left, still exactly once",
          "[distributed][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 200000 } }");
  auto reader = cluster.NewReader(Distributed(id));
  REQUIRE(reader.ok());
  std::vector<Element> first(10);
  for (Element& e : first) REQUIRE(*(*reader)->Next(&e));
  const size_t added = cluster.AddWorker();
  REQUIRE(WaitFor([&] { return (*reader)->num_tasks() == 2; }));
  auto values = Int64Scalars(ReadAll(**reader));
  for (int64_t v : Int64Scalars(first)) values.push_back(v);
  CHECK(EachOnce(values, 200000));
  CHECK((*reader)->tasks_dropped() == 0);
  (void)added;
}

TEST_CASE("distributed_epoch: a worker dying mid-epoch loses its splits, never duplicates, and the loss is counted",
          "[distributed][cluster]") {
  TestCluster cluster(3);
  const int64_t n = 300000;
  const std::string id = cluster.Register("op { range { stop: 300000 } }");
  auto reader = cluster.NewReader(Distributed(id));
  REQUIRE(reader.ok());
  std::vector<Element> first(1000);
  for (Element& e : first) REQUIRE(*(*reader)->Next(&e));
  // Worker 1 must hold splits when it dies: it learns of its task at a heartbeat, which on a busy
  // machine may come after the first 1000 elements arrived from the others.
  const std::string dying = cluster.worker(1).address();
  REQUIRE(WaitFor([&] {
    const service::StateSnapshot snapshot = cluster.dispatcher().SnapshotForTesting();
    for (const auto& t : snapshot.tasks()) {
      if (t.worker_address() == dying && t.splits_assigned() > t.splits_delivered()) return true;
    }
    return false;
  }));
  cluster.StopWorker(1);
  auto values = Int64Scalars(ReadAll(**reader));
  for (int64_t v : Int64Scalars(first)) values.push_back(v);
  auto counts = Counts(values);
  bool no_duplicate = true;
  for (const auto& [v, c] : counts) no_duplicate = no_duplicate && c == 1;
  CHECK(no_duplicate);
  CHECK((*reader)->tasks_dropped() == 1);
  // What is missing lies in the splits counted lost.
  const int64_t split_size = (n + kTargetSplits - 1) / kTargetSplits;
  std::set<int64_t> missing_splits;
  int64_t missing = 0;
  for (int64_t v = 0; v < n; ++v) {
    if (!counts.contains(v)) {
      ++missing;
      missing_splits.insert(v / split_size);
    }
  }
  INFO(missing << " elements missing in " << missing_splits.size() << " splits; " << (*reader)->splits_lost()
               << " counted lost");
  CHECK(missing > 0);
  CHECK(static_cast<int64_t>(missing_splits.size()) <= (*reader)->splits_lost());
  CHECK((*reader)->splits_lost() <= kTargetSplits);
  // The dispatcher's metrics (tfdata_dispatcher_splits_*_total) tell the same: every split handed
  // out once, and the loss the reader was told.
  REQUIRE(WaitFor([&] { return cluster.dispatcher().NumWorkers() == 2; }));  // removed at its time-out
  const service::DispatcherCounts counts_now = cluster.dispatcher().Counts();
  CHECK(counts_now.splits_assigned_total == kTargetSplits);
  CHECK(counts_now.splits_lost_total == (*reader)->splits_lost());
}

TEST_CASE("distributed_epoch: an unsplittable pipeline fails at job creation naming the op", "[distributed][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register(
      "op { zip { input { op { range { stop: 5 } } } input { op { range { stop: 5 } } op { skip { count: 1 } } } } }");
  auto reader = cluster.NewReader(Distributed(id));
  REQUIRE_FALSE(reader.ok());
  CHECK(absl::IsInvalidArgument(reader.status()));
  CHECK_THAT(std::string(reader.status().message()), Catch::Contains("cannot split op 0 (zip) > input 1"));
}
