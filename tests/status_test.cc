// The operator's view: the live worker estimate (pure model, and from a real cluster's traffic),
// the rate windows it reads, the readers' stall counters, and the three renderings of one
// DispatcherStatus (page, JSON, text) with the per-job metrics.
#include <catch2/catch.hpp>
#include <thread>

#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "lib/service/dispatcher/totals_window.h"
#include "lib/service/dispatcher/worker_estimate.h"
#include "lib/service/metrics/metrics.h"
#include "lib/service/metrics/status_page.h"
#include "tests/test_cluster.h"

using namespace tfdata;
using namespace tfdata::service;

TEST_CASE("worker estimate: the model", "[status]") {
  SECTION("readers that do not wait keep the current number, at least 1") {
    CHECK(EstimateWorkers(3, {{1000, 0, 0.01, 10}}).workers_recommended == 3);
    CHECK(EstimateWorkers(0, {{1000, 0, 0.0, 10}}).workers_recommended == 1);
    CHECK(*EstimateWorkers(3, {{1000, 0, 0.5, 10}}).stall_fraction == Approx(0.05));
  }
  SECTION("no reader window: no stall known, the current number") {
    const JobEstimate e = EstimateWorkers(2, {});
    CHECK_FALSE(e.stall_fraction.has_value());
    CHECK(e.workers_recommended == 2);
  }
  SECTION("one reader waiting half its time wants twice the workers") {
    const JobEstimate e = EstimateWorkers(2, {{1000, 4000, 5, 10}});
    CHECK(*e.stall_fraction == Approx(0.5));
    CHECK(e.elements_per_second == Approx(100));
    CHECK(e.bytes_per_second == Approx(400));
    CHECK(e.workers_recommended == 4);
  }
  SECTION("three quarters waiting: n / (1 - stall), rounded up") {
    CHECK(EstimateWorkers(3, {{100, 0, 7.5, 10}}).workers_recommended == 12);
    CHECK(EstimateWorkers(1, {{100, 0, 6.0, 10}}).workers_recommended == 3);  // 2.5 -> 3
  }
  SECTION("readers add up: a waiting reader and a fed one") {
    // Delivered 100 + 100 /s; demand 100/(10-8)*10... = 500 + 100/(10-0)*10 = 100 -> 600/200 = 3x.
    const JobEstimate e = EstimateWorkers(2, {{1000, 0, 8, 10}, {1000, 0, 0, 10}});
    CHECK(*e.stall_fraction == Approx(0.4));
    CHECK(e.workers_recommended == 6);
  }
  SECTION("a reader that only reads asks for much, within the ceiling") {
    CHECK(EstimateWorkers(1, {{100, 0, 10, 10}}).workers_recommended == 100);
    CHECK(EstimateWorkers(50, {{100, 0, 10, 10}}).workers_recommended == kMaxWorkersRecommended);
    CHECK(EstimateWorkers(2000, {{100, 0, 10, 10}}).workers_recommended == 2000);  // more than the ceiling already
  }
  SECTION("waiting with nothing delivered, or no worker: nothing to scale from") {
    CHECK(EstimateWorkers(2, {{0, 0, 9, 10}}).workers_recommended == 2);
    CHECK(EstimateWorkers(0, {{10, 0, 9, 10}}).workers_recommended == 1);
  }
}

TEST_CASE("totals window: changes over the last seconds", "[status]") {
  TotalsWindow w(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  CHECK_FALSE(w.Get(t0).has_value());
  w.Add(t0, {0, 0, 0, 0});
  CHECK_FALSE(w.Get(t0).has_value());
  w.Add(t0 + absl::Seconds(2), {100, 1000, 1, 2});
  const absl::Time now = t0 + absl::Seconds(2);
  REQUIRE(w.Get(now).has_value());
  CHECK(w.Get(now)->values[0] == 100);
  CHECK(w.Get(now)->over == absl::Seconds(2));
  // A sender silent for longer than the window has no current rate.
  CHECK_FALSE(w.Get(now + absl::Seconds(11)).has_value());
  // Samples older than the window go, but one at its start stays.
  for (int s = 3; s <= 30; ++s) w.Add(t0 + absl::Seconds(s), {100.0 * s, 0, 0, 0});
  const absl::Time later = t0 + absl::Seconds(30);
  CHECK(w.Get(later)->over == absl::Seconds(10));
  CHECK(w.Get(later)->values[0] == 1000);
  // A sender that restarted (totals went down) starts the window again.
  w.Add(t0 + absl::Seconds(31), {5, 0, 0, 0});
  CHECK_FALSE(w.Get(later + absl::Seconds(1)).has_value());
}

namespace {

// Reads from `reader` for about `duration` (at most `max_elements`), sleeping `pause` between calls.
int64_t ReadFor(Reader& reader, absl::Duration duration, absl::Duration pause, int64_t max_elements) {
  const absl::Time end = absl::Now() + duration;
  int64_t n = 0;
  while (absl::Now() < end && n < max_elements) {
    Element e;
    auto more = reader.Next(&e);
    REQUIRE(more.ok());
    if (!*more) break;
    ++n;
    if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
  }
  return n;
}

const JobStatus* FindJob(const DispatcherStatus& s, const std::string& name) {
  for (const JobStatus& j : s.jobs()) {
    if (j.name() == name) return &j;
  }
  return nullptr;
}

DispatcherStatus CurrentStatus(testing::TestCluster& cluster) {
  DispatcherStatus s;
  REQUIRE(cluster.dispatcher().GetStatus(GetStatusRequest(), &s).ok());
  return s;
}

}  // namespace

TEST_CASE("worker estimate: a fast reader of a sleep-bound pipeline asks for more workers", "[status][cluster]") {
  testing::TestCluster cluster(1);
  const std::string id =
      cluster.Register("op { range { stop: 1000000 } } op { map { fn { sleep { micros: 2000 } } } }");
  ReaderOptions options;
  options.dataset_id = id;
  options.job_name = "fast";
  auto reader = cluster.NewReader(options);
  REQUIRE(reader.ok());
  const int64_t n = ReadFor(**reader, absl::Seconds(2), absl::ZeroDuration(), 100000);
  CHECK(n > 0);
  const ReaderStats stats = (*reader)->Stats();
  CHECK(stats.elements() == n);
  CHECK(stats.bytes() == 8 * n);
  CHECK(StallFraction(stats) > 0.5);
  // Let a heartbeat carry the last of it.
  absl::SleepFor(absl::Milliseconds(300));
  const DispatcherStatus status = CurrentStatus(cluster);
  const JobStatus* job = FindJob(status, "fast");
  REQUIRE(job != nullptr);
  CHECK(job->workers() == 1);
  CHECK(job->readers() == 1);
  REQUIRE(job->has_stall_fraction());
  CHECK(job->stall_fraction() > 0.5);
  CHECK(job->elements_per_second() > 50);
  CHECK(job->workers_recommended() >= 2);
  REQUIRE(status.workers_size() == 1);
  CHECK(status.workers(0).elements_per_second() > 50);
  CHECK(status.workers(0).state() == "alive");
  // The gauge an autoscaler reads says the same.
  const std::string metrics = Metrics::ForDispatcher(&cluster.dispatcher())->Render();
  const std::string gauge = "tfdata_job_workers_recommended{job=\"fast\",mode=\"parallel_epochs\"} ";
  const size_t at = metrics.find(gauge);
  REQUIRE(at != std::string::npos);
  CHECK(std::stoi(metrics.substr(at + gauge.size())) >= 2);
  CHECK(metrics.find("tfdata_job_workers{job=\"fast\",mode=\"parallel_epochs\"} 1\n") != std::string::npos);
  CHECK(metrics.find("tfdata_job_stall_fraction{job=\"fast\",mode=\"parallel_epochs\"} 0.") != std::string::npos);
}

TEST_CASE("worker estimate: a slow reader keeps the current number", "[status][cluster]") {
  testing::TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 1000000 } }");
  ReaderOptions options;
  options.dataset_id = id;
  options.job_name = "slow";
  auto reader = cluster.NewReader(options);
  REQUIRE(reader.ok());
  // Long enough that the wait for the first element (a heartbeat or two) stays a few percent.
  ReadFor(**reader, absl::Seconds(3), absl::Milliseconds(10), 100000);
  CHECK(StallFraction((*reader)->Stats()) < 0.1);
  absl::SleepFor(absl::Milliseconds(300));
  const DispatcherStatus status = CurrentStatus(cluster);
  const JobStatus* job = FindJob(status, "slow");
  REQUIRE(job != nullptr);
  CHECK(job->workers() == 2);
  REQUIRE(job->has_stall_fraction());
  CHECK(job->stall_fraction() < 0.1);
  CHECK(job->workers_recommended() == 2);
}

TEST_CASE("status: page, JSON and text from one DispatcherStatus", "[status][cluster]") {
  testing::TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 100000 } } op { batch { batch_size: 10 } }");
  ReaderOptions options;
  options.dataset_id = id;
  options.job_name = "epoch<job>";
  options.mode = DISTRIBUTED_EPOCH;
  auto reader = cluster.NewReader(options);
  REQUIRE(reader.ok());
  ReadFor(**reader, absl::Milliseconds(300), absl::ZeroDuration(), 50);
  const DispatcherStatus status = CurrentStatus(cluster);
  REQUIRE(status.workers_size() == 2);
  REQUIRE(status.datasets_size() == 1);
  CHECK(status.datasets(0).ops() == "range -> batch");
  REQUIRE(status.jobs_size() == 1);
  const JobStatus& job = status.jobs(0);
  CHECK(job.mode() == "distributed_epoch");
  CHECK(job.splits_per_epoch() > 0);
  CHECK(job.splits_handed_out() > 0);
  CHECK(job.splits_handed_out() <= job.splits_per_epoch());

  const std::string html = StatusHtml(status);
  CHECK(html.find("<meta http-equiv=\"refresh\" content=\"5\">") != std::string::npos);
  for (const WorkerStatus& w : status.workers()) {
    CHECK(html.find("data-address=\"" + w.address() + "\"") != std::string::npos);
  }
  CHECK(html.find("data-job=\"" + std::to_string(job.id()) + "\"") != std::string::npos);
  // Names from users are escaped, never markup.
  CHECK(html.find("epoch&lt;job&gt;") != std::string::npos);
  CHECK(html.find("<job>") == std::string::npos);

  DispatcherStatus parsed;
  REQUIRE(google::protobuf::util::JsonStringToMessage(StatusJson(status), &parsed).ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(parsed, status));
  CHECK(StatusJson(status).find("\"workers_recommended\":") != std::string::npos);

  const std::string text = StatusText(status);
  CHECK(text.find("WORKERS (2)") != std::string::npos);
  CHECK(text.find(status.workers(0).address()) != std::string::npos);
  CHECK(text.find("epoch<job>") != std::string::npos);
  CHECK(text.find("distributed_epoch") != std::string::npos);
  CHECK(text.find("JOURNAL\n  off") != std::string::npos);
}

TEST_CASE("status: a worker's rate and state, and a finished job", "[status][cluster]") {
  testing::TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 5 } }");
  auto reader = cluster.NewReader(id, "short");
  REQUIRE(reader.ok());
  CHECK(ReadFor(**reader, absl::Seconds(5), absl::ZeroDuration(), 100) == 5);
  CHECK((*reader)->Stats().elements() == 5);
  DispatcherStatus status;
  for (int i = 0; i < 100; ++i) {
    status = CurrentStatus(cluster);
    const JobStatus* job = FindJob(status, "short");
    if (job != nullptr && job->finished()) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  const JobStatus* job = FindJob(status, "short");
  REQUIRE(job != nullptr);
  CHECK(job->finished());
  CHECK(job->mode() == "parallel_epochs");
  CHECK(status.workers(0).tasks() == 1);
  CHECK(status.workers(0).seconds_since_heartbeat() >= 0);
  CHECK(status.workers(0).seconds_since_heartbeat() < 5);
}
