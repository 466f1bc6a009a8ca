// The cross-trainer cache against a real in-process cluster.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

absl::StatusOr<std::unique_ptr<service::Reader>> Trainer(TestCluster& cluster, const std::string& ds,
                                                         const std::string& id, int64_t buffer_elements = 16384) {
  service::ReaderOptions o;
  o.dataset_id = ds;
  o.job_name = "shared";
  o.cross_trainer_cache = true;
  o.trainer_id = id;
  o.buffer_elements = buffer_elements;
  if (buffer_elements < 64) o.max_elements_per_request = static_cast<int>(buffer_elements);
  return cluster.NewReader(o);
}

std::vector<int64_t> Take(service::Reader& r, int n) {
  std::vector<int64_t> out;
  Element e;
  for (int i = 0; i < n; ++i) {
    auto more = r.Next(&e);
    INFO(more.status().ToString());
    REQUIRE(more.ok());
    REQUIRE(*more);
    out.push_back(e[0].GetAsInt64(0));
  }
  return out;
}

service::TaskStats OnlyTaskStats(TestCluster& cluster, size_t worker) {
  auto ids = cluster.worker(worker).worker()->TaskIds();
  REQUIRE(ids.size() == 1);
  auto stats = cluster.worker(worker).worker()->Stats(ids[0]);
  REQUIRE(stats.ok());
  return *stats;
}

}  // namespace

TEST_CASE("cross-trainer cache: trainers reading in lock-step see identical sequences", "[cross_trainer][cluster]") {
  TestCluster cluster(1);
  const std::string ds = cluster.Register("op { range { stop: 100000000 } } op { repeat {} }");
  auto a = Trainer(cluster, ds, "a");
  auto b = Trainer(cluster, ds, "b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  std::vector<int64_t> sa, sb;
  for (int step = 0; step < 20; ++step) {
    auto x = Take(**a, 100);
    auto y = Take(**b, 100);
    sa.insert(sa.end(), x.begin(), x.end());
    sb.insert(sb.end(), y.begin(), y.end());
  }
  CHECK(sa == sb);
  // The whole stream, not a split of it: each trainer got 0, 1, 2, ...
  for (size_t i = 0; i < sa.size(); ++i) REQUIRE(sa[i] == static_cast<int64_t>(i));
  CHECK((*a)->elements_skipped() == 0);
  CHECK((*b)->elements_skipped() == 0);
}

TEST_CASE("cross-trainer cache: with two workers every trainer gets every worker's stream",
          "[cross_trainer][cluster]") {
  TestCluster cluster(2);
  const std::string ds = cluster.Register("op { range { stop: 300 } }");
  auto a = Trainer(cluster, ds, "a");
  auto b = Trainer(cluster, ds, "b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  auto ea = Int64Scalars(ReadAll(**a));
  auto eb = Int64Scalars(ReadAll(**b));
  std::sort(ea.begin(), ea.end());
  std::sort(eb.begin(), eb.end());
  CHECK(ea.size() == 600);  // parallel_epochs: each worker's 300
  CHECK(ea == eb);
}

TEST_CASE("cross-trainer cache: a slow trainer skips ahead, reports it, and the window stays bounded",
          "[cross_trainer][cluster]") {
  TestCluster cluster(0);
  service::WorkerConfig config;
  config.cross_trainer_cache_bytes = 2048;
  cluster.set_worker_config(config);
  cluster.AddWorker();
  const std::string ds = cluster.Register("op { range { stop: 100000000 } } op { repeat {} }");
  auto slow = Trainer(cluster, ds, "slow", /*buffer_elements=*/4);  // fetches little ahead
  REQUIRE(slow.ok());
  auto first = Take(**slow, 2);
  CHECK(first == std::vector<int64_t>{0, 1});
  auto fast = Trainer(cluster, ds, "fast");
  REQUIRE(fast.ok());
  auto ran = Take(**fast, 20000);  // far more than the window holds
  auto later = Take(**slow, 100);
  INFO("fast read " << ran.front() << ".." << ran.back() << ", slow then " << later.front() << ".." << later.back());
  CHECK((*slow)->elements_skipped() > 0);
  CHECK((*fast)->elements_skipped() == 0);
  // A few elements it had fetched before, then a jump to where the window starts, then in order.
  int jumps = 0;
  for (size_t i = 1; i < later.size(); ++i) {
    REQUIRE(later[i] > later[i - 1]);
    if (later[i] != later[i - 1] + 1) ++jumps;
  }
  CHECK(jumps >= 1);  // the fast trainer's reader keeps fetching ahead, so it may skip again
  CHECK(later.back() > 1000);
  // Every element up to the last one read was either read or counted as skipped (responses
  // fetched but not read yet may have counted more).
  CHECK((*slow)->elements_skipped() >= later.back() + 1 - 102);
  const service::TaskStats s = OnlyTaskStats(cluster, 0);
  CHECK(s.window_max_bytes == 2048);
  CHECK(s.window_peak_bytes <= 2048);
  CHECK(s.window_peak_bytes > 1024);
  CHECK(s.window_bytes <= 2048);
  // The worker's metrics say the same (it counts skips as it serves them: at least what the
  // slow trainer has received).
  const service::WorkerCounts counts = cluster.worker(0).worker()->Counts();
  REQUIRE(counts.datasets.contains(ds));
  CHECK(counts.datasets.at(ds).elements_skipped >= (*slow)->elements_skipped());
  CHECK(counts.datasets.at(ds).window_bytes > 0);
  CHECK(counts.datasets.at(ds).window_bytes <= 2048);
}

TEST_CASE("cross-trainer cache: errors", "[cross_trainer][cluster]") {
  TestCluster cluster(0);
  service::WorkerConfig config;
  config.cross_trainer_cache_bytes = 64;
  cluster.set_worker_config(config);
  cluster.AddWorker();
  // An element (100 int64 = 800 bytes) larger than the window.
  const std::string big = cluster.Register("op { range { stop: 1000 } } op { batch { batch_size: 100 } }");
  auto r = Trainer(cluster, big, "a");
  REQUIRE(r.ok());
  Element e;
  auto more = (*r)->Next(&e);
  REQUIRE(absl::IsInvalidArgument(more.status()));
  CHECK(std::string(more.status().message()).find("does not fit the cross-trainer cache") != std::string::npos);

  service::ReaderOptions o;
  o.dataset_id = big;
  o.cross_trainer_cache = true;
  o.trainer_id = "x";
  auto no_job = cluster.NewReader(o);
  REQUIRE(absl::IsInvalidArgument(no_job.status()));
  CHECK(std::string(no_job.status().message()).find("--job-name") != std::string::npos);
  o.job_name = "j2";
  o.trainer_id = "";
  auto no_id = cluster.NewReader(o);
  REQUIRE(absl::IsInvalidArgument(no_id.status()));
  CHECK(std::string(no_id.status().message()).find("--trainer-id") != std::string::npos);
  o.mode = service::DISTRIBUTED_EPOCH;
  o.trainer_id = "x";
  auto distributed = cluster.NewReader(o);
  REQUIRE(absl::IsInvalidArgument(distributed.status()));
  CHECK(std::string(distributed.status().message()).find("parallel_epochs") != std::string::npos);
  // A plain reader cannot join a cross-trainer job (and the other way round).
  auto plain = cluster.NewReader(big, "shared");
  REQUIRE(absl::IsInvalidArgument(plain.status()));
}
