// CheckDeterministic: which pipelines give the same elements in the same order on every run.
#include <catch2/catch.hpp>

#include "lib/pipeline/determinism.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;

namespace {

std::string Check(const std::string& text) {
  const absl::Status st = CheckDeterministic(testing::ParsedPipeline(text), "exactly-once reads");
  if (!st.ok()) CHECK(absl::IsInvalidArgument(st));
  return std::string(st.message());
}

}  // namespace

TEST_CASE("determinism: seeded and order-keeping pipelines pass", "[determinism]") {
  for (const char* text : {
           "op { range { stop: 10 } }",
           "op { range { stop: 10 } } op { shuffle { buffer_size: 4 seed: 7 } } op { batch { batch_size: 2 } }",
           "op { range { stop: 10 } } op { map { num_parallel_calls: 4 fn { arith { op: ADD value: 1 } } } }",
           "op { range { stop: 10 } } op { map { num_parallel_calls: -1 deterministic: true fn { sleep {} } } }",
           "op { range { stop: 10 } } op { interleave { cycle_length: 2 num_parallel_calls: 2 pipeline { op { repeat { "
           "count: 2 } } } } }",
           "op { list_files { pattern: \"/tmp/*\" shuffle: true seed: 3 } }",
           "op { range { stop: 3 } } op { map { fn { random_flip_left_right { seed: 1 } } } }",
       }) {
    INFO(text);
    CHECK(Check(text).empty());
  }
}

TEST_CASE("determinism: the first non-deterministic op is named, nested ones too", "[determinism]") {
  CHECK(Check("op { range { stop: 10 } } op { shuffle { buffer_size: 4 } }") ==
        "op 1 (shuffle): exactly-once reads need a deterministic pipeline: a shuffle without a `seed` has a new "
        "order on every run");
  CHECK(Check("op { list_files { pattern: \"/tmp/*\" shuffle: true } }") ==
        "op 0 (list_files): exactly-once reads need a deterministic pipeline: shuffle without a `seed` lists the "
        "files in a new order on every run");
  CHECK(Check("op { range { stop: 10 } } op { map { num_parallel_calls: 2 deterministic: false fn { sleep {} } } }") ==
        "op 1 (map): exactly-once reads need a deterministic pipeline: parallel calls with `deterministic: false` let "
        "elements overtake each other");
  // Sequential: `deterministic: false` changes nothing.
  CHECK(Check("op { range { stop: 10 } } op { map { deterministic: false fn { sleep {} } } }").empty());
  CHECK(Check("op { range { stop: 3 } } op { interleave { cycle_length: 2 num_parallel_calls: -1 deterministic: "
              "false pipeline { op { repeat { count: 2 } } } } }") ==
        "op 1 (interleave): exactly-once reads need a deterministic pipeline: parallel calls with `deterministic: "
        "false` let inputs overtake each other");
  CHECK(Check("op { range { stop: 3 } } op { map { fn { arith { op: ADD value: 1 } } fn { random_crop { height: 1 "
              "width: 1 } } } }") ==
        "op 1 (map) > fn 1 (random_crop): exactly-once reads need a deterministic pipeline: give it a `seed`");
  CHECK(Check("op { range { stop: 3 } } op { filter { fn { plugin { library: \"x.so\" function: \"f\" } } } }") ==
        "op 1 (filter) > fn 0 (plugin): exactly-once reads need a deterministic pipeline: a plugin's output cannot be "
        "known to be deterministic");
  CHECK(Check("op { zip { input { op { range { stop: 3 } } } input { op { range { stop: 3 } } op { shuffle { "
              "buffer_size: 2 } } } } }") ==
        "op 0 (zip) > input 1 > op 1 (shuffle): exactly-once reads need a deterministic pipeline: a shuffle without "
        "a `seed` has a new order on every run");
  CHECK_THAT(Check("op { range { stop: 3 } } op { interleave { cycle_length: 1 pipeline { op { repeat { count: 2 } } "
                   "op { map { fn { random_flip_left_right {} } } } } } }"),
             Catch::StartsWith("op 1 (interleave) > op 1 (map) > fn 0 (random_flip_left_right): "));
}
