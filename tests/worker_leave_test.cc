// Workers leave cleanly (SIGTERM, Worker::Leave): the dispatcher removes them at once and gives
// the distributed_epoch splits they had not started to other workers; readers' reports of an
// unreachable worker make it suspected, so new jobs skip it. The dispatcher core is driven
// directly (no gRPC, journal on); then a real in-process cluster.
#include <set>

#include <catch2/catch.hpp>

#include "lib/service/dispatcher/dispatcher.h"
#include "tests/pipeline_util.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::service;
using tfdata::testing::TempDir;

namespace {

struct Core {
  explicit Core(const TempDir& dir) : dispatcher(Config(dir)) {
    REQUIRE(dispatcher.Recover().ok());
    auto loaded = ParsePipelineText("op { range { stop: 6400 } }");
    REQUIRE(loaded.ok());
    RegisterDatasetRequest reg;
    *reg.mutable_pipeline() = loaded->pipeline;
    RegisterDatasetResponse resp;
    REQUIRE(dispatcher.RegisterDataset(reg, &resp).ok());
    dataset_id = resp.dataset_id();
  }
  static DispatcherConfig Config(const TempDir& dir) {
    DispatcherConfig c;
    c.fault_tolerant = true;
    c.work_dir = dir.Join("work");
    c.worker_timeout = absl::InfiniteDuration();
    c.client_timeout = absl::InfiniteDuration();
    c.job_gc_timeout = absl::InfiniteDuration();
    return c;
  }
  WorkerHeartbeatResponse Beat(const std::string& worker, bool leaving = false,
                               std::vector<TaskProgress> progress = {}) {
    WorkerHeartbeatRequest req;
    req.set_worker_address(worker);
    req.set_leaving(leaving);
    for (const TaskProgress& p : progress) *req.add_task_progress() = p;
    WorkerHeartbeatResponse resp;
    REQUIRE(dispatcher.WorkerHeartbeat(req, &resp).ok());
    return resp;
  }
  int64_t NewClient(ProcessingMode mode) {
    GetOrCreateJobRequest req;
    req.set_dataset_id(dataset_id);
    req.set_mode(mode);
    GetOrCreateJobResponse resp;
    REQUIRE(dispatcher.GetOrCreateJob(req, &resp).ok());
    return resp.client_id();
  }
  ClientHeartbeatResponse ClientBeat(int64_t client, std::vector<std::string> unreachable = {}) {
    ClientHeartbeatRequest req;
    req.set_client_id(client);
    for (const std::string& w : unreachable) req.add_unreachable_workers(w);
    ClientHeartbeatResponse resp;
    REQUIRE(dispatcher.ClientHeartbeat(req, &resp).ok());
    return resp;
  }
  // The split indices of the next GetSplits answer (split i of range(6400) starts at i * 100).
  std::vector<int64_t> Splits(int64_t task, int64_t received, int max, bool* end = nullptr) {
    GetSplitsRequest req;
    req.set_task_id(task);
    req.set_epoch(0);
    req.set_max_splits(max);
    req.set_splits_received(received);
    GetSplitsResponse resp;
    REQUIRE(dispatcher.GetSplits(req, &resp).ok());
    if (end != nullptr) *end = resp.end_of_splits();
    std::vector<int64_t> out;
    for (const Split& s : resp.splits()) out.push_back(s.index());
    return out;
  }
  Dispatcher dispatcher;
  std::string dataset_id;
};

std::set<std::string> Workers(const ClientHeartbeatResponse& r) {
  std::set<std::string> out;
  for (const TaskInfo& t : r.tasks()) out.insert(t.worker_address());
  return out;
}

TaskProgress Progress(int64_t task, int64_t started, int64_t delivered) {
  TaskProgress p;
  p.set_task_id(task);
  p.set_splits_started(started);
  p.set_splits_delivered(delivered);
  return p;
}

}  // namespace

TEST_CASE("worker leave: the dispatcher removes it at once and gives its unstarted splits to another task",
          "[dispatcher][leave]") {
  TempDir dir;
  std::string snapshot_before_restart;
  {
    Core core(dir);
    core.Beat("a:1");
    core.Beat("b:1");
    const int64_t client = core.NewClient(DISTRIBUTED_EPOCH);
    const int64_t task_a = core.Beat("a:1").new_tasks(0).task_id();
    const int64_t task_b = core.Beat("b:1").new_tasks(0).task_id();
    CHECK(core.Splits(task_a, 0, 4) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK(core.Splits(task_b, 0, 2) == std::vector<int64_t>{4, 5});
    // a started splits 0 and 1 (0 delivered in full), and leaves: 2 and 3 go back, 1 is lost.
    core.Beat("a:1", /*leaving=*/true, {Progress(task_a, 2, 1)});
    const auto listed = core.ClientBeat(client);
    CHECK(Workers(listed) == std::set<std::string>{"b:1"});
    CHECK(core.dispatcher.NumWorkers() == 1);
    // b gets the returned splits first, then the rest in order, then the end.
    CHECK(core.Splits(task_b, 2, 16) == std::vector<int64_t>{2, 3});
    CHECK(core.Splits(task_b, 4, 3) == std::vector<int64_t>{6, 7, 8});
    // An answer lost in transit is sent again, for returned splits too.
    CHECK(core.Splits(task_b, 4, 3) == std::vector<int64_t>{6, 7, 8});
    bool end = false;
    std::vector<int64_t> all = {4, 5, 2, 3, 6, 7, 8};
    for (int64_t received = 7; !end;) {
      auto got = core.Splits(task_b, received, 16, &end);
      all.insert(all.end(), got.begin(), got.end());
      received += static_cast<int64_t>(got.size());
    }
    std::set<int64_t> unique(all.begin(), all.end());
    CHECK(unique.size() == all.size());  // nothing twice
    CHECK(unique.size() == 64 - 2);      // all but the ones a had: 0 delivered, 1 lost
    CHECK(!unique.contains(0));
    CHECK(!unique.contains(1));
  }
  // The journal replays to the same state, and through a snapshot too (the new fields included).
  auto contents = ReadJournal(dir.Join("work/journal"));
  REQUIRE(contents.ok());
  DispatcherState replayed;
  std::set<std::string> set;
  for (const Update& u : contents->updates) {
    REQUIRE(replayed.Apply(u).ok());
    const StateSnapshot s = replayed.Snapshot();
    for (const auto& t : s.tasks()) {
      if (t.last_indices_size() > 0) set.insert("last_indices");
      if (t.epochs_ended() > 0) set.insert("epochs_ended");
    }
    for (const auto& i : s.iterations()) {
      for (const auto& r : i.returned_splits()) {
        if (r.indices_size() > 0) set.insert("returned_splits");
      }
    }
  }
  CHECK(set == std::set<std::string>{"last_indices", "epochs_ended", "returned_splits"});
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = replayed.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == replayed.Snapshot().SerializeAsString());
}

TEST_CASE("worker leave: splits are not given back to an epoch every other task has ended", "[dispatcher][leave]") {
  TempDir dir;
  Core core(dir);
  core.Beat("a:1");
  core.Beat("b:1");
  core.NewClient(DISTRIBUTED_EPOCH);
  const int64_t task_a = core.Beat("a:1").new_tasks(0).task_id();
  const int64_t task_b = core.Beat("b:1").new_tasks(0).task_id();
  CHECK(core.Splits(task_a, 0, 2) == std::vector<int64_t>{0, 1});
  bool end = false;
  for (int64_t received = 0; !end;) received += static_cast<int64_t>(core.Splits(task_b, received, 16, &end).size());
  // b has been told the epoch is over: a's unstarted split would have no taker, so it is lost.
  core.Beat("a:1", /*leaving=*/true, {Progress(task_a, 1, 0)});
  CHECK(core.dispatcher.NumWorkers() == 1);
  CHECK(core.Splits(task_b, 62, 16, &end).empty());
  CHECK(end);
}

TEST_CASE("worker leave: a parallel_epochs worker leaving is removed from the readers' task lists",
          "[dispatcher][leave]") {
  TempDir dir;
  Core core(dir);
  core.Beat("a:1");
  core.Beat("b:1");
  const int64_t client = core.NewClient(PARALLEL_EPOCHS);
  CHECK(Workers(core.ClientBeat(client)) == std::set<std::string>{"a:1", "b:1"});
  core.Beat("b:1", /*leaving=*/true);
  CHECK(Workers(core.ClientBeat(client)) == std::set<std::string>{"a:1"});
  // A new job gets no task on it.
  CHECK(Workers(core.ClientBeat(core.NewClient(PARALLEL_EPOCHS))) == std::set<std::string>{"a:1"});
}

TEST_CASE("worker suspicion: two reports of an unreachable worker keep new jobs off it until it heartbeats",
          "[dispatcher][leave]") {
  TempDir dir;
  Core core(dir);
  core.Beat("a:1");
  core.Beat("dead:1");
  const int64_t c1 = core.NewClient(PARALLEL_EPOCHS);
  CHECK(Workers(core.ClientBeat(c1, {"dead:1"})) == std::set<std::string>{"a:1", "dead:1"});
  // One report is not enough (one reader's bad luck).
  CHECK(Workers(core.ClientBeat(core.NewClient(PARALLEL_EPOCHS))) == std::set<std::string>{"a:1", "dead:1"});
  const int64_t c2 = core.NewClient(PARALLEL_EPOCHS);
  core.ClientBeat(c2, {"dead:1", "unknown:1"});  // unknown workers are ignored
  CHECK(Workers(core.ClientBeat(core.NewClient(PARALLEL_EPOCHS))) == std::set<std::string>{"a:1"});
  // It heartbeats again: no longer suspected, and it gets the tasks it missed.
  CHECK(core.Beat("dead:1").new_tasks_size() >= 1);
  CHECK(Workers(core.ClientBeat(core.NewClient(PARALLEL_EPOCHS))) == std::set<std::string>{"a:1", "dead:1"});
}

TEST_CASE("worker leave: a distributed_epoch read over workers that leave mid-epoch, nothing twice, the loss counted",
          "[service][cluster][leave]") {
  testing::TestCluster cluster(3);
  const int64_t n = 200000;
  const std::string id = cluster.Register("op { range { stop: 200000 } } op { map { fn { sleep { micros: 5 } } } }");
  service::ReaderOptions options;
  options.dataset_id = id;
  options.mode = DISTRIBUTED_EPOCH;
  auto reader = cluster.NewReader(options);
  REQUIRE(reader.ok());
  std::vector<Element> elements;
  Element e;
  while (true) {
    auto more = (*reader)->Next(&e);
    REQUIRE(more.ok());
    if (!*more) break;
    elements.push_back(e);
    if (elements.size() == 20000) {
      cluster.LeaveWorker(1);
      CHECK(cluster.dispatcher().NumWorkers() == 2);  // at once, not after --worker-timeout
    }
  }
  const std::vector<int64_t> values = testing::Int64Scalars(elements);
  auto counts = testing::Counts(values);
  bool no_duplicate = true;
  for (const auto& [v, c] : counts) no_duplicate = no_duplicate && c == 1;
  CHECK(no_duplicate);
  // What is missing lies in the splits counted lost (those the leaver had started, at most).
  const int64_t split_size = (n + 63) / 64;
  std::set<int64_t> missing_splits;
  for (int64_t v = 0; v < n; ++v) {
    if (!counts.contains(v)) missing_splits.insert(v / split_size);
  }
  INFO(values.size() << " delivered; " << missing_splits.size() << " splits with missing elements; "
                     << (*reader)->splits_lost() << " counted lost");
  CHECK(static_cast<int64_t>(missing_splits.size()) <= (*reader)->splits_lost());
  CHECK((*reader)->tasks_dropped() == 1);
}

TEST_CASE("worker suspicion: readers report a crashed worker, and after two reports new reads skip it",
          "[service][cluster][leave]") {
  service::DispatcherConfig config = testing::TestCluster::FastConfig();
  config.worker_timeout = absl::Hours(1);  // only the readers' reports can keep new jobs off it
  testing::TestCluster cluster(2, config);
  const std::string id = cluster.Register("op { range { stop: 100 } }");
  cluster.StopWorker(1);  // a crash: the dispatcher still lists it
  for (int read = 0; read < 2; ++read) {
    auto reader = cluster.NewReader(id);
    REQUIRE(reader.ok());
    CHECK(testing::ReadAll(**reader).size() == 100);
    CHECK((*reader)->tasks_dropped() == 1);  // gave up on the dead worker, and reported it
  }
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  CHECK(testing::ReadAll(**reader).size() == 100);
  CHECK((*reader)->tasks_dropped() == 0);  // no task on the suspected worker
  CHECK((*reader)->num_tasks() == 1);
  CHECK(cluster.dispatcher().NumWorkers() == 2);  // still registered: only its timeout removes it
}
