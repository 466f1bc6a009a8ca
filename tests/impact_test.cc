// The arithmetic of the bench impact estimate.
#include <catch2/catch.hpp>

#include "lib/bench/impact.h"
#include "tests/pipeline_util.h"

using namespace tfdata;

static Throughput Rate(double per_s) { return Throughput{static_cast<int64_t>(per_s * 10), 0, 10.0}; }

TEST_CASE("an input-bound job: speedup and workers", "[impact]") {
  // Pipeline 100/s, model 250/s, replay 1e6/s: 2.5x faster with 3 workers.
  ImpactReport r = ComputeImpact(Rate(100), Rate(1e6), 250.0, 2);
  CHECK(r.input_bound);
  CHECK(r.training_rate_now == Approx(100));
  CHECK(r.training_rate_service == Approx(250));
  CHECK(r.speedup == Approx(2.5));
  CHECK(r.workers_needed == 3);
}

TEST_CASE("a model-bound job gains nothing", "[impact]") {
  ImpactReport r = ComputeImpact(Rate(1000), Rate(1e6), 200.0, 2);
  CHECK_FALSE(r.input_bound);
  CHECK(r.speedup == Approx(1.0));
  CHECK(r.workers_needed == 1);
}

TEST_CASE("the consumer ceiling caps the estimate", "[impact]") {
  // The replayed element only reaches 300/s: the service cannot beat that.
  ImpactReport r = ComputeImpact(Rate(100), Rate(300), 1000.0, 2);
  CHECK(r.training_rate_service == Approx(300));
  CHECK(r.speedup == Approx(3.0));
  CHECK(r.workers_needed == 3);
  CHECK_THAT(FormatImpactJson(r), Catch::Contains("\"workers_needed\": 3"));
}

TEST_CASE("the replay pipeline appends take(1), cache(), repeat()", "[impact]") {
  auto loaded = tfdata::ParsePipelineText("op { range { stop: 5 } }");
  REQUIRE(loaded.ok());
  auto p = WithReplayFirstElement(loaded->pipeline);
  REQUIRE(p.op_size() == 4);
  CHECK(p.op(1).take().count() == 1);
  CHECK(p.op(2).has_cache());
  CHECK(p.op(3).has_repeat());
  CHECK_FALSE(p.op(3).repeat().has_count());
  auto ds = BuildDataset(p, BuildOptions{});
  REQUIRE(ds.ok());
  auto t = MeasureThroughput(**ds, 0, 0.05);
  REQUIRE(t.ok());
  CHECK(t->elements > 0);
}

TEST_CASE("bench: a pipeline shorter than the clock-check interval still ends its warm-up", "[bench]") {
  // range(10): no pass reaches 64 elements; the warm-up once never ended (an endless loop).
  auto loaded = ParsePipelineText("op { range { stop: 10 } }");
  REQUIRE(loaded.ok());
  auto ds = BuildDataset(loaded->pipeline, BuildOptions{});
  REQUIRE(ds.ok());
  auto t = MeasureThroughput(**ds, 0.02, 0.02);
  REQUIRE(t.ok());
  CHECK(t->elements > 0);
  CHECK(t->seconds < 5);
}

TEST_CASE("bench: MeasureReads counts after the warm-up and stops at the end of the data", "[bench]") {
  int64_t i = 0;
  auto next = [&](Element* e) -> absl::StatusOr<bool> {
    if (i == 1000) return false;
    *e = {Tensor::Scalar<int64_t>(i++)};
    return true;
  };
  auto t = MeasureReads(next, 0, 60);
  REQUIRE(t.ok());
  CHECK(t->elements == 1000);
  CHECK(t->bytes == 8000);
  i = 0;
  auto failing = [&](Element*) -> absl::StatusOr<bool> { return absl::UnavailableError("worker gone"); };
  CHECK(absl::IsUnavailable(MeasureReads(failing, 0, 1).status()));
}
