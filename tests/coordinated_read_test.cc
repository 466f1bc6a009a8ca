// Coordinated reads against a real in-process cluster: rounds, joins, losses, stopped consumers.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/service/client/coordinated_reader.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;
using service::CoordinatedReader;
using service::RoundInfo;

namespace {

// Lines of 1..7 words: tokenized and padded in pairs, elements of varying shapes.
std::string VaryingLengthPipeline(const TempDir& dir) {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    for (int w = 0; w <= i % 7; ++w) text += (w > 0 ? " w" : "w") + std::to_string(w);
    text += "\n";
  }
  WriteFile(dir.Join("lines.txt"), text);
  return "op { text_line { file: \"" + dir.Join("lines.txt") +
         "\" } }\n"
         "op { map { fn { tokenize {} } } }\n"
         "op { padded_batch { batch_size: 2 } }\n"
         "op { repeat {} }\n";
}

std::unique_ptr<CoordinatedReader> NewConsumer(TestCluster& cluster, const std::string& dataset, int n, int i,
                                               const std::string& job = "coordinated",
                                               service::ProcessingMode mode = service::PARALLEL_EPOCHS) {
  service::CoordinatedReadOptions o;
  o.mode = mode;
  o.dataset_id = dataset;
  o.job_name = job;
  o.num_consumers = n;
  o.consumer_index = i;
  o.heartbeat_interval = absl::Milliseconds(50);
  auto r = CoordinatedReader::Create(o, cluster.NewDispatcherClient());
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  return *std::move(r);
}

// Reads `rounds` rounds from every consumer (one after the other: consumers never wait for each
// other), returning per consumer the info of each round and the element shapes.
struct Rounds {
  std::vector<std::vector<RoundInfo>> info;
  std::set<std::string> shapes;
};
void ReadRounds(std::vector<std::unique_ptr<CoordinatedReader>>& consumers, int rounds, Rounds* out) {
  out->info.resize(consumers.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t c = 0; c < consumers.size(); ++c) {
      Element e;
      RoundInfo info;
      auto more = consumers[c]->Next(&e, &info);
      INFO(more.status().ToString());
      REQUIRE(more.ok());
      REQUIRE(*more);
      out->info[c].push_back(info);
      out->shapes.insert(e.at(0).TypeString());
    }
  }
}

// Rounds (by index) in which the consumers' elements came from different workers; rounds that a
// consumer had to fetch from a substitute (its worker was lost) are reported apart.
struct Agreement {
  int64_t rounds = 0, disagree = 0, substituted = 0;
};
Agreement Check(const Rounds& r) {
  Agreement a;
  a.rounds = static_cast<int64_t>(r.info[0].size());
  for (size_t k = 0; k < r.info[0].size(); ++k) {
    bool sub = false, same = true;
    for (const auto& c : r.info) {
      REQUIRE(c[k].round == static_cast<int64_t>(k));
      sub = sub || c[k].substituted;
      same = same && c[k].worker_address == r.info[0][k].worker_address;
    }
    if (sub) ++a.substituted;
    else if (!same) ++a.disagree;
  }
  return a;
}

}  // namespace

TEST_CASE("coordinated reads: every round's elements come from one worker, workers in rotation",
          "[coordinated][cluster]") {
  TempDir dir;
  TestCluster cluster(3);
  const std::string ds = cluster.Register(VaryingLengthPipeline(dir));
  std::vector<std::unique_ptr<CoordinatedReader>> consumers;
  for (int i = 0; i < 4; ++i) consumers.push_back(NewConsumer(cluster, ds, 4, i));
  Rounds r;
  ReadRounds(consumers, 90, &r);
  const Agreement a = Check(r);
  CHECK(a.disagree == 0);
  CHECK(a.substituted == 0);
  CHECK(r.shapes.size() >= 3);  // the element sizes really vary
  // The rotation: round k from task k % 3, so consecutive rounds change workers and all 3 serve.
  std::map<std::string, int> per_worker;
  for (int k = 0; k < 90; ++k) {
    ++per_worker[r.info[0][k].worker_address];
    if (k >= 3) CHECK(r.info[0][k].task_id == r.info[0][k - 3].task_id);
    if (k >= 1) CHECK(r.info[0][k].task_id != r.info[0][k - 1].task_id);
  }
  CHECK(per_worker.size() == 3);
  for (const auto& [w, n] : per_worker) CHECK(n == 30);
}

TEST_CASE("coordinated reads: consumers get distinct elements of the round", "[coordinated][cluster]") {
  TestCluster cluster(2);
  const std::string ds = cluster.Register("op { range { stop: 1000000 } } op { repeat {} }");
  std::vector<std::unique_ptr<CoordinatedReader>> consumers;
  for (int i = 0; i < 3; ++i) consumers.push_back(NewConsumer(cluster, ds, 3, i));
  std::map<std::string, std::set<int64_t>> seen;  // per worker: a worker's stream gives each value once
  for (int k = 0; k < 50; ++k) {
    for (auto& c : consumers) {
      Element e;
      RoundInfo info;
      auto more = c->Next(&e, &info);
      REQUIRE(more.ok());
      CHECK(seen[info.worker_address].insert(e[0].GetAsInt64(0)).second);
    }
  }
}

TEST_CASE("coordinated reads: distributed_epoch rounds come from one worker, each split from one worker",
          "[coordinated][cluster]") {
  // Dynamic sharding: the 3 workers share range(0, 10^8)'s splits of 65536 elements, batched by 64
  // so no batch spans two splits. The reads stay far inside the first epoch (workers run ahead into
  // a second epoch only after 10^8 elements), so no value may come twice, and no split may be
  // served by two workers (in parallel_epochs every worker would serve split 0).
  TestCluster cluster(3);
  const std::string ds =
      cluster.Register("op { range { stop: 100000000 } } op { batch { batch_size: 64 } } op { repeat {} }");
  std::vector<std::unique_ptr<CoordinatedReader>> consumers;
  for (int i = 0; i < 3; ++i) consumers.push_back(NewConsumer(cluster, ds, 3, i, "dyn", service::DISTRIBUTED_EPOCH));
  std::set<int64_t> firsts;                     // first value of each batch read
  std::map<int64_t, std::string> split_worker;  // split index -> the worker that served it
  std::map<std::string, int> per_worker;        // rounds served
  std::vector<RoundInfo> infos(consumers.size());
  const int kRounds = 300;
  for (int k = 0; k < kRounds; ++k) {
    for (size_t c = 0; c < consumers.size(); ++c) {
      Element e;
      auto more = consumers[c]->Next(&e, &infos[c]);
      INFO(more.status().ToString());
      REQUIRE(more.ok());
      REQUIRE(*more);
      REQUIRE(infos[c].round == k);
      CHECK(!infos[c].substituted);
      const int64_t first = e[0].GetAsInt64(0);
      INFO("round " << k << " consumer " << c << " worker " << infos[c].worker_address << " value " << first);
      CHECK(first % 64 == 0);
      CHECK(firsts.insert(first).second);
      auto [it, inserted] = split_worker.try_emplace(first / 65536, infos[c].worker_address);
      CHECK(it->second == infos[c].worker_address);
    }
    for (const RoundInfo& info : infos) CHECK(info.worker_address == infos[0].worker_address);
    ++per_worker[infos[0].worker_address];
  }
  CHECK(firsts.size() == 3 * kRounds);
  REQUIRE(per_worker.size() == 3);  // every worker got splits and serves its turn
  for (const auto& [w, n] : per_worker) CHECK(n == kRounds / 3);
  CHECK(split_worker.size() >= 3);
}

TEST_CASE("coordinated reads: a worker that joins mid-run enters the rotation at a later round",
          "[coordinated][cluster]") {
  TempDir dir;
  TestCluster cluster(1);
  const std::string ds = cluster.Register(VaryingLengthPipeline(dir));
  std::vector<std::unique_ptr<CoordinatedReader>> consumers;
  for (int i = 0; i < 2; ++i) consumers.push_back(NewConsumer(cluster, ds, 2, i));
  Rounds r;
  ReadRounds(consumers, 20, &r);
  cluster.AddWorker();
  // Keep reading until the new worker serves rounds (it joins once every lease has run out).
  std::set<std::string> workers;
  for (int batch = 0; batch < 100 && workers.size() < 2; ++batch) {
    Rounds more;
    ReadRounds(consumers, 20, &more);
    for (size_t c = 0; c < 2; ++c) r.info[c].insert(r.info[c].end(), more.info[c].begin(), more.info[c].end());
    for (const RoundInfo& i : more.info[0]) workers.insert(i.worker_address);
  }
  REQUIRE(workers.size() == 2);
  const Agreement a = Check(r);
  CHECK(a.disagree == 0);
  CHECK(a.substituted == 0);
  // Before the join every round came from the first worker.
  for (int k = 0; k < 20; ++k) CHECK(r.info[0][k].worker_address == r.info[0][0].worker_address);
}

TEST_CASE("coordinated reads: a worker lost mid-run leaves the rotation without stalling anyone",
          "[coordinated][cluster]") {
  TempDir dir;
  TestCluster cluster(3);
  const std::string ds = cluster.Register(VaryingLengthPipeline(dir));
  std::vector<std::unique_ptr<CoordinatedReader>> consumers;
  for (int i = 0; i < 2; ++i) consumers.push_back(NewConsumer(cluster, ds, 2, i));
  Rounds r;
  ReadRounds(consumers, 30, &r);
  const std::string lost = cluster.worker(1).address();
  cluster.StopWorker(1);
  // Rounds up to the end of the leases granted before the loss was noticed are served by a
  // substitute; then the rotation holds the two remaining workers only.
  bool settled = false;
  for (int batch = 0; batch < 400 && !settled; ++batch) {
    Rounds more;
    ReadRounds(consumers, 50, &more);
    for (size_t c = 0; c < 2; ++c) r.info[c].insert(r.info[c].end(), more.info[c].begin(), more.info[c].end());
    std::set<std::string> workers;
    settled = true;
    for (const RoundInfo& i : more.info[0]) {
      workers.insert(i.worker_address);
      settled = settled && !i.substituted && i.worker_address != lost;
    }
    settled = settled && workers.size() == 2;
  }
  CHECK(settled);
  const Agreement a = Check(r);
  CHECK(a.disagree == 0);
  CHECK(consumers[0]->rounds_substituted() > 0);
}

TEST_CASE("coordinated reads: a consumer that stops for good holds the others back only until expiry",
          "[coordinated][cluster]") {
  TestCluster cluster(0);
  service::WorkerConfig config;
  config.buffer_bytes = 4096;  // the stopped consumer's untaken elements soon fill it
  config.round_expiry = absl::Milliseconds(300);
  cluster.set_worker_config(config);
  cluster.AddWorker();
  const std::string ds = cluster.Register("op { range { stop: 1000000000 } } op { repeat {} }");
  auto gone = NewConsumer(cluster, ds, 2, 1);
  auto stays = NewConsumer(cluster, ds, 2, 0);
  gone->Close();
  Element e;
  for (int k = 0; k < 3000; ++k) {
    auto more = stays->Next(&e);
    REQUIRE(more.ok());
    REQUIRE(*more);
  }
  auto ids = cluster.worker(0).worker()->TaskIds();
  REQUIRE(ids.size() == 1);
  auto stats = cluster.worker(0).worker()->Stats(ids[0]);
  REQUIRE(stats.ok());
  CHECK(stats->round_elements_dropped > 0);
}

TEST_CASE("coordinated reads: clear errors for bad options and finite pipelines", "[coordinated][cluster]") {
  TestCluster cluster(1);
  const std::string infinite = cluster.Register("op { range { stop: 10 } } op { repeat {} }");
  const std::string finite = cluster.Register("op { range { stop: 10 } }");
  auto create = [&](const std::string& ds, const std::string& job, int n, int i) {
    service::CoordinatedReadOptions o;
    o.dataset_id = ds;
    o.job_name = job;
    o.num_consumers = n;
    o.consumer_index = i;
    return CoordinatedReader::Create(o, cluster.NewDispatcherClient());
  };
  auto no_name = create(infinite, "", 2, 0);
  REQUIRE(absl::IsInvalidArgument(no_name.status()));
  CHECK(std::string(no_name.status().message()).find("--job-name") != std::string::npos);
  auto bounded = create(finite, "f", 2, 0);
  REQUIRE(absl::IsInvalidArgument(bounded.status()));
  CHECK(std::string(bounded.status().message()).find("must be infinite") != std::string::npos);
  CHECK(std::string(bounded.status().message()).find("10 element(s)") != std::string::npos);
  auto index = create(infinite, "j", 2, 2);
  REQUIRE(absl::IsInvalidArgument(index.status()));
  CHECK(std::string(index.status().message()).find("--consumer-index 2") != std::string::npos);
  auto first = create(infinite, "j", 2, 0);
  REQUIRE(first.ok());
  auto twice = create(infinite, "j", 2, 0);
  REQUIRE(absl::IsAlreadyExists(twice.status()));
  CHECK(std::string(twice.status().message()).find("consumer index 0") != std::string::npos);
  auto other_n = create(infinite, "j", 3, 1);
  REQUIRE(absl::IsInvalidArgument(other_n.status()));
  CHECK(std::string(other_n.status().message()).find("num_consumers 2") != std::string::npos);
  {
    service::CoordinatedReadOptions o;
    o.dataset_id = infinite;
    o.job_name = "static";
    o.num_consumers = 2;
    o.mode = service::SHARD_DATA;
    auto pinned = CoordinatedReader::Create(o, cluster.NewDispatcherClient());
    REQUIRE(absl::IsInvalidArgument(pinned.status()));
    CHECK(std::string(pinned.status().message()).find("parallel_epochs or distributed_epoch, not SHARD_DATA") !=
          std::string::npos);
  }
  // A plain reader of a coordinated job is refused the same way.
  auto plain = cluster.NewReader(infinite, "j");
  REQUIRE(absl::IsInvalidArgument(plain.status()));
}
