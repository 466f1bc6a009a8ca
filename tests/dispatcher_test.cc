// The dispatcher core without gRPC, with time driven by the test through CheckTimeouts(now).
#include <catch2/catch.hpp>

#include <limits>

#include "lib/io/path_policy.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::service;

namespace {

struct Fixture {
  explicit Fixture(DispatcherConfig config) : dispatcher(config) {
    RegisterDatasetRequest reg;
    auto loaded = ParsePipelineText("op { range { stop: 10 } }");
    REQUIRE(loaded.ok());
    *reg.mutable_pipeline() = loaded->pipeline;
    RegisterDatasetResponse reg_resp;
    REQUIRE(dispatcher.RegisterDataset(reg, &reg_resp).ok());
    dataset_id = reg_resp.dataset_id();
  }

  int64_t NewClient() {
    GetOrCreateJobRequest req;
    req.set_dataset_id(dataset_id);
    req.set_mode(PARALLEL_EPOCHS);
    GetOrCreateJobResponse resp;
    REQUIRE(dispatcher.GetOrCreateJob(req, &resp).ok());
    return resp.client_id();
  }

  WorkerHeartbeatResponse Heartbeat(const std::vector<int64_t>& current) {
    WorkerHeartbeatRequest req;
    req.set_worker_address("w:1");
    for (int64_t t : current) req.add_current_tasks(t);
    WorkerHeartbeatResponse resp;
    REQUIRE(dispatcher.WorkerHeartbeat(req, &resp).ok());
    return resp;
  }

  absl::Status ClientHeartbeat(int64_t client) {
    ClientHeartbeatRequest req;
    req.set_client_id(client);
    ClientHeartbeatResponse resp;
    return dispatcher.ClientHeartbeat(req, &resp);
  }

  Dispatcher dispatcher;
  std::string dataset_id;
};

DispatcherConfig Config(absl::Duration client_timeout, absl::Duration job_gc_timeout) {
  DispatcherConfig c;
  c.worker_timeout = absl::InfiniteDuration();  // the fake worker "w:1" heartbeats only when told
  c.client_timeout = client_timeout;
  c.job_gc_timeout = job_gc_timeout;
  return c;
}

}  // namespace

TEST_CASE("dispatcher: a silent client is released after --client-timeout, then its job is collected", "[dispatcher]") {
  Fixture f(Config(absl::Seconds(10), absl::Seconds(30)));
  const int64_t client = f.NewClient();
  auto first = f.Heartbeat({});
  REQUIRE(first.new_tasks_size() == 1);
  const int64_t task = first.new_tasks(0).task_id();
  const absl::Time t0 = absl::Now();

  f.dispatcher.CheckTimeouts(t0 + absl::Seconds(5));  // not yet
  CHECK(f.ClientHeartbeat(client).ok());
  const absl::Time t1 = absl::Now();
  f.dispatcher.CheckTimeouts(t1 + absl::Seconds(11));  // silent for longer than 10 s: released
  CHECK(absl::IsNotFound(f.ClientHeartbeat(client)));
  // The job has no client now, but lives until --job-gc-timeout.
  CHECK(f.Heartbeat({task}).tasks_to_delete_size() == 0);
  f.dispatcher.CheckTimeouts(t1 + absl::Seconds(11 + 25));
  CHECK(f.Heartbeat({task}).tasks_to_delete_size() == 0);
  f.dispatcher.CheckTimeouts(t1 + absl::Seconds(11 + 31));
  auto gone = f.Heartbeat({task});
  REQUIRE(gone.tasks_to_delete_size() == 1);
  CHECK(gone.tasks_to_delete(0) == task);
}

TEST_CASE("dispatcher: a client that heartbeats is never released, and an infinite job-gc-timeout never collects",
          "[dispatcher]") {
  Fixture f(Config(absl::Seconds(10), absl::InfiniteDuration()));
  const int64_t client = f.NewClient();
  auto first = f.Heartbeat({});
  REQUIRE(first.new_tasks_size() == 1);
  const int64_t task = first.new_tasks(0).task_id();
  for (int i = 0; i < 5; ++i) {
    REQUIRE(f.ClientHeartbeat(client).ok());
    f.dispatcher.CheckTimeouts(absl::Now() + absl::Seconds(8));
  }
  CHECK(f.ClientHeartbeat(client).ok());
  f.dispatcher.CheckTimeouts(absl::Now() + absl::Hours(24 * 365));
  CHECK(absl::IsNotFound(f.ClientHeartbeat(client)));
  // Released, but with an infinite job-gc-timeout the job (and its task) stays.
  CHECK(f.Heartbeat({task}).tasks_to_delete_size() == 0);
}

// Found while writing tests/fuzz/dispatcher_rpc_fuzz.cc: the infinity check of coordinated reads built
// the pipeline with default options, so a client could make the dispatcher list any directory
// past --allowed-path, or load any shared library as a plugin.
TEST_CASE("dispatcher: coordinated reads check the pipeline under the dispatcher's --allowed-path, without plugins",
          "[dispatcher]") {
  tfdata::testing::TempDir allowed;
  DispatcherConfig config = Config(absl::Seconds(10), absl::Seconds(30));
  auto policy = PathPolicy::Create({allowed.path()}, "--allowed-path");
  REQUIRE(policy.ok());
  config.build_options.paths = std::make_shared<const PathPolicy>(*std::move(policy));
  CHECK_FALSE(config.build_options.functions.allow_plugins);  // the default
  Fixture f(config);
  auto coordinated = [&](const char* text, const char* name) {
    RegisterDatasetRequest reg;
    auto loaded = ParsePipelineText(text);
    REQUIRE(loaded.ok());
    *reg.mutable_pipeline() = loaded->pipeline;
    RegisterDatasetResponse reg_resp;
    REQUIRE(f.dispatcher.RegisterDataset(reg, &reg_resp).ok());
    GetOrCreateJobRequest req;
    req.set_dataset_id(reg_resp.dataset_id());
    req.set_mode(PARALLEL_EPOCHS);
    req.set_job_name(name);
    req.set_num_consumers(2);
    GetOrCreateJobResponse resp;
    return f.dispatcher.GetOrCreateJob(req, &resp);
  };
  const absl::Status listed = coordinated(R"(op { list_files { pattern: "/etc/*" } })", "a");
  CHECK(absl::IsInvalidArgument(listed));
  CHECK_THAT(std::string(listed.message()), Catch::Contains("outside the allowed paths"));
  const absl::Status plugin = coordinated(
      R"(op { range { stop: 10 } } op { map { fn { plugin { library: "/nonexistent/libp.so" function: "f" } } } })",
      "b");
  CHECK(absl::IsInvalidArgument(plugin));
  CHECK_THAT(std::string(plugin.message()), Catch::Contains("allow-plugins"));
}

// Found with tests/fuzz/dispatcher_rpc_fuzz.cc (reproducer: tests/fuzz/regressions/dispatcher_rpc_fuzz/):
// max_splits was not bounded, so one request for 2^31 splits of a huge range ate the dispatcher's memory.
TEST_CASE("dispatcher: GetSplits hands out at most kMaxSplitsPerRequest splits, whatever max_splits asks",
          "[dispatcher]") {
  Dispatcher dispatcher(Config(absl::Seconds(10), absl::Seconds(30)));
  RegisterDatasetRequest reg;
  // 5000 splits of 65536 elements.
  auto loaded = ParsePipelineText("op { range { stop: 327680000 } }");
  REQUIRE(loaded.ok());
  *reg.mutable_pipeline() = loaded->pipeline;
  RegisterDatasetResponse reg_resp;
  REQUIRE(dispatcher.RegisterDataset(reg, &reg_resp).ok());
  GetOrCreateJobRequest job;
  job.set_dataset_id(reg_resp.dataset_id());
  job.set_mode(DISTRIBUTED_EPOCH);
  GetOrCreateJobResponse job_resp;
  REQUIRE(dispatcher.GetOrCreateJob(job, &job_resp).ok());
  WorkerHeartbeatRequest hb;
  hb.set_worker_address("w:1");
  WorkerHeartbeatResponse hb_resp;
  REQUIRE(dispatcher.WorkerHeartbeat(hb, &hb_resp).ok());
  REQUIRE(hb_resp.new_tasks_size() == 1);

  GetSplitsRequest req;
  req.set_task_id(hb_resp.new_tasks(0).task_id());
  req.set_max_splits(std::numeric_limits<int32_t>::max());
  GetSplitsResponse first;
  REQUIRE(dispatcher.GetSplits(req, &first).ok());
  REQUIRE(first.splits_size() == Dispatcher::kMaxSplitsPerRequest);
  CHECK(first.splits(0).index() == 0);
  // The next request goes on where the first stopped; a negative max_splits asks for one.
  req.set_splits_received(first.splits_size());
  req.set_max_splits(-5);
  GetSplitsResponse second;
  REQUIRE(dispatcher.GetSplits(req, &second).ok());
  REQUIRE(second.splits_size() == 1);
  CHECK(second.splits(0).index() == Dispatcher::kMaxSplitsPerRequest);
}
