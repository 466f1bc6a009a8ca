// Cancelling a pass: a pipeline stuck inside one Next() (reading input that it never turns into
// an element) ends with CancelledError once its Cancellation is set, and a worker can stop or
// drop a task whose pipeline is stuck like that.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "lib/pipeline/dataset.h"
#include "tests/pipeline_util.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;

namespace {

// range(2^63 - 1): every op below reads it without producing an element for longer than any test.
constexpr const char* kEndless = "op { range { stop: 9223372036854775807 } } ";

// The stuck pipelines, one per op loop that consumes input without producing.
const char* kStuck[] = {
    "op { filter { fn { compare { op: EQ value: -1 } } } }",
    "op { skip { count: 9223372036854775807 } }",
    "op { shard { num_shards: 4611686018427387904 index: 4611686018427387903 } }",
    "op { interleave { cycle_length: 2 pipeline { op { take { count: 0 } } } } }",
    "op { filter { fn { compare { op: EQ value: -1 } } } } op { batch { batch_size: 4 } }",
    "op { filter { fn { compare { op: EQ value: -1 } } } } op { shuffle { buffer_size: 8 seed: 1 } }",
    "op { filter { fn { compare { op: EQ value: -1 } } } } op { prefetch { buffer_size: 2 } }",
    "op { filter { fn { compare { op: EQ value: -1 } } } } op { map { num_parallel_calls: 2 fn { sleep {} } } }",
};

}  // namespace

TEST_CASE("cancellation: a pass stuck inside Next() ends with CancelledError when cancelled", "[ops][cancel]") {
  for (const char* op : kStuck) {
    const std::string text = std::string(kEndless) + op;
    INFO(text);
    auto ds = testing::BuildText(text);
    REQUIRE(ds.ok());
    auto cancellation = std::make_shared<Cancellation>();
    auto it = (*ds)->MakeIterator(IteratorContext{.cancellation = cancellation});
    REQUIRE(it.ok());
    auto next = std::async(std::launch::async, [&] {
      Element e;
      return (*it)->Next(&e);
    });
    // Still inside Next() a moment later: it would never return on its own.
    CHECK(next.wait_for(std::chrono::milliseconds(200)) == std::future_status::timeout);
    cancellation->Cancel();
    // Bounded: a hang here is the bug (the test then fails at ctest's time-out instead).
    REQUIRE(next.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    const absl::StatusOr<bool> r = next.get();
    CHECK(absl::IsCancelled(r.status()));
  }
}

TEST_CASE("cancellation: a pass without a Cancellation runs as before", "[ops][cancel]") {
  auto r = testing::RunText("op { range { stop: 10 } } op { filter { fn { compare { op: LT value: 3 } } } }");
  REQUIRE(r.ok());
  CHECK(r->size() == 3);
}

// Found by tests/fuzz/worker_rpc_fuzz (regressions/worker_rpc_fuzz/worker_stop_hangs_on_filter).
TEST_CASE("cancellation: a worker whose task is stuck in its pipeline leaves, and drops a released job's task",
          "[service][cluster][cancel]") {
  testing::TestCluster cluster(2);
  const std::string stuck = cluster.Register(std::string(kEndless) + kStuck[0]);
  {
    auto reader = cluster.NewReader(stuck);
    REQUIRE(reader.ok());
    // Both workers run the task (stuck in the filter); the reader asks and waits.
    for (int i = 0;
         i < 200 && (cluster.worker(0).worker()->NumTasks() == 0 || cluster.worker(1).worker()->NumTasks() == 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(cluster.worker(0).worker()->NumTasks() == 1);
    REQUIRE(cluster.worker(1).worker()->NumTasks() == 1);
    auto leave = std::async(std::launch::async, [&] { cluster.LeaveWorker(1); });
    REQUIRE(leave.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  }
  // The reader is gone: its job is collected (job_gc_timeout 2 s) and worker 0 drops the stuck
  // task at a heartbeat, which must not block on the task's pipeline.
  for (int i = 0; i < 500 && cluster.worker(0).worker()->NumTasks() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(cluster.worker(0).worker()->NumTasks() == 0);
  // The worker still serves: a new read gets every element from it.
  const std::string small = cluster.Register("op { range { stop: 100 } }");
  auto reader = cluster.NewReader(small);
  REQUIRE(reader.ok());
  CHECK(testing::ReadAll(**reader).size() == 100);
}
