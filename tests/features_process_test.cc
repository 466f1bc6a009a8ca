// Coordinated reads, the cross-trainer cache, compression and worker tags through the binary.
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/process_util.h"
#include "tests/test_util.h"

using namespace tfdata::testing;

namespace {

struct Cluster {
  TempDir dir;
  std::unique_ptr<Process> dispatcher;
  std::string addr;
  std::vector<std::unique_ptr<Process>> workers;

  explicit Cluster(int n, const std::vector<std::string>& worker_flags = {}) {
    dispatcher = std::make_unique<Process>(std::vector<std::string>{"dispatcher", "--port", "0", "--port-file",
                                                                    dir.Join("d.port"), "--worker-timeout", "1s"},
                                           dir.Join("d"));
    addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
    workers = StartWorkers(dir, addr, n, worker_flags);
  }
  std::string Register(const std::string& pipeline, const std::vector<std::string>& flags = {}) {
    WriteFile(dir.Join("p.pbtxt"), pipeline);
    std::vector<std::string> args{"register", dir.Join("p.pbtxt"), "--dispatcher", addr};
    args.insert(args.end(), flags.begin(), flags.end());
    auto r = RunTfdata(args);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    return r.out.substr(0, r.out.find('\n'));
  }
  CommandResult Read(const std::string& ds, const std::vector<std::string>& flags) {
    std::vector<std::string> args{"read", "--dispatcher", addr, "--dataset-id", ds};
    args.insert(args.end(), flags.begin(), flags.end());
    return RunTfdata(args);
  }
};

int Lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

}  // namespace

TEST_CASE("processes: coordinated reads through tfdata read, and their flag errors", "[service][process]") {
  Cluster c(2);
  const std::string ds = c.Register("op { range { stop: 1000000 } } op { repeat {} }");
  // Consumers never wait for each other, so they can run one after the other.
  for (const char* i : {"0", "1"}) {
    auto r = c.Read(ds, {"--job-name", "coord", "--num-consumers", "2", "--consumer-index", i, "--take", "12", "-q"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(Lines(r.out) == 12);
  }
  // distributed_epoch: the two workers share the splits, so the consumers' values never repeat.
  std::set<std::string> values;
  for (const char* i : {"0", "1"}) {
    auto r = c.Read(ds, {"--job-name", "dyn", "--mode", "distributed_epoch", "--num-consumers", "2", "--consumer-index",
                         i, "--take", "12", "-q"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK(Lines(r.out) == 12);
    std::istringstream lines(r.out);
    for (std::string v; std::getline(lines, v);) CHECK(values.insert(v).second);
  }
  auto pinned = c.Read(ds, {"--job-name", "s", "--mode", "data", "--num-consumers", "2"});
  CHECK(pinned.exit_code == 2);
  CHECK_THAT(pinned.err, Catch::Contains("parallel_epochs or distributed_epoch"));
  const std::string finite = c.Register("op { range { stop: 5 } }");
  auto bounded = c.Read(finite, {"--job-name", "f", "--num-consumers", "2", "--consumer-index", "0"});
  CHECK(bounded.exit_code != 0);
  CHECK_THAT(bounded.err, Catch::Contains("must be infinite"));
  auto no_job = c.Read(ds, {"--num-consumers", "2"});
  CHECK(no_job.exit_code == 2);
  CHECK_THAT(no_job.err, Catch::Contains("--job-name"));
  auto index = c.Read(ds, {"--job-name", "x", "--num-consumers", "2", "--consumer-index", "2"});
  CHECK(index.exit_code == 2);
  CHECK_THAT(index.err, Catch::Contains("outside [0, --num-consumers 2)"));
  auto lone_index = c.Read(ds, {"--consumer-index", "1"});
  CHECK(lone_index.exit_code == 2);
}

TEST_CASE("processes: two trainers share a job through the cross-trainer cache", "[service][process]") {
  Cluster c(1, {"--cross-trainer-cache-size", "1MiB"});
  const std::string ds = c.Register("op { range { stop: 1000000 } } op { repeat {} }");
  auto a = c.Read(ds, {"--job-name", "t", "--cross-trainer-cache", "--trainer-id", "a", "--take", "200", "-q"});
  auto b = c.Read(ds, {"--job-name", "t", "--cross-trainer-cache", "--trainer-id", "b", "--take", "200", "-q"});
  INFO(a.err << b.err);
  REQUIRE(a.exit_code == 0);
  REQUIRE(b.exit_code == 0);
  CHECK(Lines(a.out) == 200);
  CHECK(a.out == b.out);  // the second trainer read the same elements from the window
  auto no_id = c.Read(ds, {"--job-name", "t", "--cross-trainer-cache"});
  CHECK(no_id.exit_code == 2);
  CHECK_THAT(no_id.err, Catch::Contains("--trainer-id"));
  auto bad_size = RunTfdata({"worker", "--dispatcher", c.addr, "--cross-trainer-cache-size", "lots"});
  CHECK(bad_size.exit_code == 2);
  CHECK_THAT(bad_size.err, Catch::Contains("--cross-trainer-cache-size"));
}

TEST_CASE("processes: worker tags, --worker-tag and --compression", "[service][process]") {
  Cluster c(1, {"--tag", "ssd"});
  std::rename(c.dir.Join("w0.port").c_str(), c.dir.Join("tagged.port").c_str());  // StartWorkers reuses the name
  auto untagged = StartWorkers(c.dir, c.addr, 1);
  const std::string plain = c.Register("op { range { stop: 10 } }");
  auto all = c.Read(plain, {"-q"});
  CHECK(Lines(all.out) == 20);
  auto tagged = c.Read(plain, {"--worker-tag", "ssd", "-q"});
  INFO(tagged.err);
  CHECK(tagged.exit_code == 0);
  CHECK(tagged.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  const std::string snappy = c.Register("op { range { stop: 10 } }", {"--compression", "snappy"});
  CHECK(snappy != plain);
  auto compressed = c.Read(snappy, {"--worker-tag", "ssd", "-q"});
  CHECK(compressed.out == tagged.out);
  WriteFile(c.dir.Join("q.pbtxt"), "op { range { stop: 3 } }");
  auto bad = RunTfdata({"register", c.dir.Join("q.pbtxt"), "--dispatcher", c.addr, "--compression", "zip"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("none, snappy or auto"));
  auto target = c.Read(plain, {"--target-workers", "nearby"});
  CHECK(target.exit_code == 2);
  CHECK_THAT(target.err, Catch::Contains("any, local, auto"));
}

TEST_CASE("processes: the feature examples under examples/service run", "[service][process][examples]") {
  for (const char* name : {"coordinated_reads", "cross_trainer_cache", "compression", "worker_tags"}) {
    INFO(name);
    auto r = RunCommand({"/bin/bash", "-c",
                         std::string("cd '") + TFDATA_SOURCE_DIR + "' && TFDATA='" + TFDATA_BINARY +
                             "' bash examples/service/" + name + ".sh"});
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(r.out.empty());
    CHECK(r.err.find("error") == std::string::npos);
  }
}
