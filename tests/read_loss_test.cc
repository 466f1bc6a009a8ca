// No silent loss at the end of a read: a read that got nothing because every worker it was given
// is unreachable is an error, and one that lost part of its data says so (tfdata read: exit 4).
#include <catch2/catch.hpp>

#include "absl/status/status.h"
#include "spdlog/sinks/ringbuffer_sink.h"
#include "spdlog/spdlog.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// Workers stay registered for long after they die, as with the default --worker-timeout.
service::DispatcherConfig SlowToForget() {
  service::DispatcherConfig c = TestCluster::FastConfig();
  c.worker_timeout = absl::Minutes(10);
  return c;
}

}  // namespace

TEST_CASE("read loss: every worker unreachable is an error naming them, not an empty clean end",
          "[read_loss][cluster]") {
  TestCluster cluster(1, SlowToForget());
  const std::string ds = cluster.Register("op { range { stop: 10 } }");
  cluster.StopWorker(0);  // dead, but still registered
  auto reader = cluster.NewReader(ds);
  REQUIRE(reader.ok());
  Element e;
  auto more = (*reader)->Next(&e);
  INFO(more.status().ToString());
  REQUIRE(!more.ok());
  CHECK(absl::IsUnavailable(more.status()));
  CHECK_THAT(std::string(more.status().message()),
             Catch::Contains("no element was read: all 1 task(s) were dropped because their workers could not be "
                             "reached (127.0.0.1:"));
  CHECK((*reader)->tasks_dropped() == 1);
}

TEST_CASE("read loss: tfdata read exits 4 naming the lost worker when part of the data was lost, 1 when all was",
          "[read_loss][cluster][cli]") {
  TestCluster cluster(2, SlowToForget());
  TempDir dir;
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 10 } }");
  const std::string ds = cluster.Register("op { range { stop: 10 } }");
  auto whole = RunTfdata({"read", "--dispatcher", cluster.dispatcher_address(), "--dataset-id", ds, "-q"});
  CHECK(whole.exit_code == 0);
  cluster.StopWorker(1);
  auto part = RunTfdata({"read", "--dispatcher", cluster.dispatcher_address(), "--dataset-id", ds});
  INFO(part.err);
  CHECK(part.exit_code == 4);
  CHECK(part.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");  // parallel_epochs: the live worker's pass
  CHECK_THAT(part.err, Catch::Contains("tfdata: warning: the read lost data: (1 task(s) dropped: worker unreachable: "
                                       "127.0.0.1:"));
  cluster.StopWorker(0);
  auto none = RunTfdata({"read", "--dispatcher", cluster.dispatcher_address(), "--dataset-id", ds});
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.err, Catch::Contains("no element was read: all 2 task(s) were dropped"));
}

TEST_CASE("read loss: a dead worker is warned about once per process, not once per read", "[read_loss][cluster]") {
  TestCluster cluster(2, SlowToForget());
  const std::string ds = cluster.Register("op { range { stop: 10 } }");
  cluster.StopWorker(1);
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(1000);
  spdlog::default_logger()->sinks().push_back(sink);
  for (int i = 0; i < 3; ++i) {
    auto reader = cluster.NewReader(ds);
    REQUIRE(reader.ok());
    CHECK(ReadAll(**reader).size() == 10);
    // The first two reads give the dead worker up and report it; two reports make the
    // dispatcher suspect it, so the third read gets no task on it.
    CHECK((*reader)->tasks_dropped() == (i < 2 ? 1 : 0));
  }
  spdlog::default_logger()->sinks().pop_back();
  int warnings = 0;
  for (const std::string& line : sink->last_formatted()) {
    if (line.find("giving up") != std::string::npos && line.find("warn") != std::string::npos) ++warnings;
  }
  CHECK(warnings == 1);
}
