// Memory budgets: every size a pipeline asks for is checked before it is allocated, and a pipeline
// that needs more than its budget fails with an error naming the op, not a crash.
#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "lib/core/memory_budget.h"
#include "lib/pipeline/builder.h"
#include "lib/pipeline/loader.h"
#include "tests/pipeline_util.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// Builds `text` against `budget` and collects up to `limit` elements.
absl::StatusOr<std::vector<Element>> RunWithBudget(const std::string& text, std::shared_ptr<MemoryBudget> budget,
                                                   int64_t limit = -1) {
  auto loaded = ParsePipelineText(text, "test.pbtxt");
  if (!loaded.ok()) return loaded.status();
  BuildOptions options;
  options.memory = std::move(budget);
  auto ds = BuildDataset(loaded->pipeline, options, loaded->source());
  if (!ds.ok()) return ds.status();
  return Collect(**ds, limit);
}

std::shared_ptr<MemoryBudget> Budget(int64_t bytes) {
  return std::make_shared<MemoryBudget>(bytes, "the test's limit");
}

}  // namespace

TEST_CASE("memory budget: take, give, and an error that names what and where", "[memory]") {
  MemoryBudget b(1000, "the task's memory limit");
  CHECK(b.Take(600, "op 1 (batch)", "a batch").ok());
  CHECK(b.held() == 600);
  const absl::Status over = b.Take(500, "op 1 (batch)", "a batch of 7 int64[] elements");
  CHECK(absl::IsResourceExhausted(over));
  CHECK(std::string(over.message()) ==
        "op 1 (batch): a batch of 7 int64[] elements needs 500 B, over the task's memory limit of 1000 B "
        "(600 B already held by the pipeline)");
  CHECK(b.held() == 600);  // a refused request takes nothing
  b.Give(600);
  CHECK(b.held() == 0);
  CHECK(b.CheckAllocation(1000, "x", "y").ok());
  CHECK(absl::IsResourceExhausted(b.CheckAllocation(1001, "x", "y")));
  CHECK(absl::IsResourceExhausted(b.CheckAllocation(-1, "x", "y")));  // an overflowed size
  CHECK(FormatBytes(800LL << 30) == "800.0 GiB");
  CHECK(FormatBytes(1023) == "1023 B");
  CHECK(MachineMemoryBytes() > 0);
  CHECK(DefaultTaskMemoryLimit() >= (int64_t{256} << 20));
}

TEST_CASE("memory budget: a batch larger than its input is one short batch, as in TF", "[memory]") {
  auto budget = Budget(4 << 20);
  auto got = RunWithBudget("op { range { stop: 10 } } op { batch { batch_size: 99999999999 } }", budget);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0][0] == Tensor::Vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  CHECK(budget->held() == 0);
  // Unknown input size (after a filter): the batch grows as elements come, still one short batch.
  got = RunWithBudget(
      "op { range { stop: 100000 } } op { filter { fn { compare { op: GE value: 0 } } } } "
      "op { batch { batch_size: 99999999999 } }",
      budget);
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0][0].num_elements() == 100000);
  CHECK((*got)[0][0].values<int64_t>()[99999] == 99999);
  CHECK(budget->held() == 0);
}

TEST_CASE("memory budget: a batch that can never fit fails at once, naming the op, the size and the limit",
          "[memory]") {
  auto budget = Budget(int64_t{4} << 30);
  auto got =
      RunWithBudget("op { range { stop: 10 } } op { repeat {} } op { batch { batch_size: 99999999999 } }", budget, 1);
  REQUIRE(absl::IsResourceExhausted(got.status()));
  CHECK(std::string(got.status().message()) ==
        "op 2 (batch): a batch of 99999999999 int64[] elements needs 745.1 GiB, over the test's limit of 4.0 GiB");
  CHECK(budget->held() == 0);
}

TEST_CASE("memory budget: a growing batch of unknown size stops at the limit", "[memory]") {
  auto budget = Budget(64 << 20);
  auto got = RunWithBudget(
      "op { range { stop: 9000000000000000000 } } op { filter { fn { compare { op: GE value: 0 } } } } "
      "op { batch { batch_size: 99999999999 } }",
      budget, 1);
  REQUIRE(absl::IsResourceExhausted(got.status()));
  const std::string msg(got.status().message());
  CHECK_THAT(msg, Catch::StartsWith("op 2 (batch): a batch of up to 99999999999 int64[] elements"));
  CHECK_THAT(msg, Catch::Contains("over the test's limit of 64.0 MiB"));
  CHECK(budget->held() == 0);
}

TEST_CASE("memory budget: shuffle, prefetch and cache buffers hold what the budget allows", "[memory]") {
  auto budget = Budget(16 << 20);
  auto shuffle = RunWithBudget(
      "op { range { stop: 9000000000000000000 } } op { shuffle { buffer_size: 100000000000 seed: 1 } } "
      "op { take { count: 1 } }",
      budget);
  REQUIRE(absl::IsResourceExhausted(shuffle.status()));
  CHECK_THAT(std::string(shuffle.status().message()),
             Catch::StartsWith("op 1 (shuffle): the shuffle buffer (buffer_size 100000000000), holding "));
  CHECK(budget->held() == 0);
  // A shuffle buffer that fits works as before.
  auto fits = RunWithBudget("op { range { stop: 1000 } } op { shuffle { buffer_size: 100000000000 seed: 1 } }", budget);
  REQUIRE(fits.ok());
  CHECK(fits->size() == 1000);

  auto cache = RunWithBudget("op { range { stop: 1000000 } } op { cache {} }", budget);
  REQUIRE(absl::IsResourceExhausted(cache.status()));
  CHECK_THAT(std::string(cache.status().message()), Catch::StartsWith("op 1 (cache): the in-memory cache, holding "));
  CHECK(budget->held() == 0);

  // One element (a batch of 300k int64, 2.3 MiB) held by the batch and then by the prefetch
  // buffer passes a 4 MiB budget whatever the timing.
  auto small = Budget(4 << 20);
  auto prefetch = RunWithBudget(
      "op { range { stop: 300000 } } op { batch { batch_size: 300000 } } op { prefetch { buffer_size: 1000000 } }",
      small);
  REQUIRE(absl::IsResourceExhausted(prefetch.status()));
  CHECK_THAT(std::string(prefetch.status().message()), Catch::StartsWith("op 2 (prefetch): the prefetch buffer"));
  CHECK(small->held() == 0);
}

TEST_CASE("memory budget: an in-memory cache keeps its bytes while the dataset lives", "[memory]") {
  auto budget = Budget(16 << 20);
  auto loaded = ParsePipelineText("op { range { stop: 1000 } } op { cache {} }");
  REQUIRE(loaded.ok());
  BuildOptions options;
  options.memory = budget;
  auto ds = BuildDataset(loaded->pipeline, options);
  REQUIRE(ds.ok());
  REQUIRE(Collect(**ds).ok());
  CHECK(budget->held() >= 1000 * 128);  // the cached elements
  REQUIRE(Collect(**ds).ok());          // replayed: nothing more taken
  const int64_t held = budget->held();
  REQUIRE(Collect(**ds).ok());
  CHECK(budget->held() == held);
  ds->reset();
  CHECK(budget->held() == 0);
}

TEST_CASE("memory budget: padded shapes, resize, tokenize and threads are checked before they allocate", "[memory]") {
  auto budget = Budget(64 << 20);
  auto padded =
      RunWithBudget("op { range { stop: 4 } } op { padded_batch { batch_size: 2 padded_shape { } } }", budget);
  REQUIRE(padded.ok());  // scalars: nothing to pad
  padded = RunWithBudget(
      "op { range { stop: 4 } } op { batch { batch_size: 2 } } "
      "op { padded_batch { batch_size: 2 padded_shape { dim: 1000000000000 } } }",
      budget);
  REQUIRE(absl::IsResourceExhausted(padded.status()));
  CHECK_THAT(std::string(padded.status().message()),
             Catch::StartsWith("op 2 (padded_batch): component 0 padded to int64 [2, 1000000000000] needs"));
  padded = RunWithBudget(
      "op { range { stop: 4 } } op { batch { batch_size: 2 } } "
      "op { padded_batch { batch_size: 2 padded_shape { dim: 4611686018427387904 } } }",
      budget);
  REQUIRE(absl::IsResourceExhausted(padded.status()));
  CHECK_THAT(std::string(padded.status().message()), Catch::Contains("needs more than 8 EiB"));
  CHECK(budget->held() == 0);

  auto resize = RunWithBudget(
      "op { from_tensor_slices { tensor { dtype: STRING string_values: [\"x\"] } } } "
      "op { map { fn { resize { height: 16000 width: 16000 } } } }",
      budget);
  REQUIRE(absl::IsResourceExhausted(resize.status()));
  CHECK_THAT(std::string(resize.status().message()),
             Catch::Contains("op 1 (map) > fn 0 (resize): a resized float32 [16000, 16000, C] image needs 976.6 MiB"));

  auto tokenize = RunWithBudget(
      "op { from_tensor_slices { tensor { dtype: STRING string_values: [\"a b\"] } } } "
      "op { map { fn { tokenize { max_length: 60000000 } } } }",
      budget);
  REQUIRE(absl::IsResourceExhausted(tokenize.status()));
  CHECK_THAT(std::string(tokenize.status().message()), Catch::Contains("fn 0 (tokenize): max_length 60000000 tokens"));

  CHECK_THAT(BuildError("op { range { stop: 4 } } op { map { fn { arith { op: ADD value: 1 } } "
                        "num_parallel_calls: 1000000 } }"),
             Catch::Contains("op 1 (map): num_parallel_calls 1000000 is more than the 1024 threads"));
  CHECK_THAT(BuildError("op { range { stop: 4 } } op { interleave { cycle_length: 100000000000 "
                        "pipeline { op { repeat { count: 2 } } } } }"),
             Catch::Contains("cycle_length 100000000000 is more than the 65536 inputs"));
  CHECK_THAT(BuildError("op { range { stop: 4 } } op { interleave { cycle_length: 5000 num_parallel_calls: -1 "
                        "pipeline { op { repeat { count: 2 } } } } }"),
             Catch::Contains("cycle_length 5000 with parallel calls is more than the 1024 threads"));
  CHECK_THAT(BuildError("op { from_tensor_slices { tensor { dtype: INT64 shape: [4294967296, 4294967296, 0] } } }"),
             Catch::Contains("is too large"));
}

TEST_CASE("memory budget: a task over its budget fails with the op's error, and the worker goes on",
          "[memory][cluster]") {
  TestCluster cluster(0);
  service::WorkerConfig config;
  config.max_task_memory = 64 << 20;
  cluster.set_worker_config(config);
  cluster.AddWorker();
  const std::string bad =
      cluster.Register("op { range { stop: 10 } } op { repeat {} } op { batch { batch_size: 99999999999 } }");
  auto reader = cluster.NewReader(bad);
  REQUIRE(reader.ok());
  Element e;
  auto more = (*reader)->Next(&e);
  REQUIRE(!more.ok());
  CHECK(absl::IsResourceExhausted(more.status()));
  CHECK_THAT(std::string(more.status().message()),
             Catch::Contains("op 2 (batch): a batch of 99999999999 int64[] elements needs 745.1 GiB, over the task's "
                             "memory limit (worker --max-task-memory) of 64.0 MiB"));
  // The same worker serves the next dataset.
  const std::string good = cluster.Register("op { range { stop: 10 } }");
  auto next = cluster.NewReader(good);
  REQUIRE(next.ok());
  CHECK(ReadAll(**next).size() == 10);
}

TEST_CASE("tfdata run: the pipelines that used to abort or be OOM-killed exit 1 with the op's error", "[memory][cli]") {
  TempDir dir;
  WriteFile(dir.Join("batch.pbtxt"),
            "op { range { stop: 10 } } op { repeat {} } op { batch { batch_size: 99999999999 } }");
  auto batch = RunTfdata({"run", dir.Join("batch.pbtxt")});
  CHECK(batch.exit_code == 1);
  CHECK_THAT(batch.err, Catch::Contains("op 2 (batch): a batch of 99999999999 int64[] elements needs 745.1 GiB"));
  WriteFile(dir.Join("short.pbtxt"), "op { range { stop: 10 } } op { batch { batch_size: 99999999999 } }");
  auto short_batch = RunTfdata({"run", dir.Join("short.pbtxt")});
  CHECK(short_batch.exit_code == 0);
  CHECK(short_batch.out == "[0 1 2 3 4 5 6 7 8 9]\n");
  WriteFile(dir.Join("shuffle.pbtxt"),
            "op { range { stop: 9000000000000000000 } } op { shuffle { buffer_size: 100000000000 } } "
            "op { take { count: 1 } }");
  auto shuffle = RunTfdata({"run", dir.Join("shuffle.pbtxt"), "--max-memory", "64MiB"});
  CHECK(shuffle.exit_code == 1);
  CHECK_THAT(shuffle.err, Catch::Contains("op 1 (shuffle): the shuffle buffer (buffer_size 100000000000)"));
  CHECK_THAT(shuffle.err, Catch::Contains("over the memory limit (run --max-memory) of 64.0 MiB"));
  auto bad_flag = RunTfdata({"run", dir.Join("shuffle.pbtxt"), "--max-memory", "lots"});
  CHECK(bad_flag.exit_code == 2);
  CHECK_THAT(bad_flag.err, Catch::Contains("--max-memory"));
}
