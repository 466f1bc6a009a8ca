// The service as real processes started from the built binary: dispatcher, workers, readers;
// SIGKILL and SIGTERM.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/process_util.h"
#include "tests/test_util.h"

using namespace tfdata::testing;
using Clock = std::chrono::steady_clock;

TEST_CASE("processes: dispatcher, two workers, register and read", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"},
                     dir.Join("d"));
  const std::string addr = "localhost:" + WaitForPort(dir.Join("d.port"));
  CHECK_THAT(dispatcher.out(), Catch::Contains("dispatcher listening on grpc://127.0.0.1:"));
  Process w1(
      {"worker", "--dispatcher", "grpc://" + addr, "--port-file", dir.Join("w1.port"), "--heartbeat-interval", "100ms"},
      dir.Join("w1"));
  WaitForPort(dir.Join("w1.port"));

  auto reg = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr});
  REQUIRE(reg.exit_code == 0);
  CHECK(reg.out == "1\n");
  auto again = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr});
  CHECK(again.out == "1\n");
  auto chosen =
      RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--dataset-id", "r10"});
  CHECK(chosen.out == "r10\n");
  WriteFile(dir.Join("r5.pbtxt"), "op { range { stop: 5 } }");
  auto conflict = RunTfdata({"register", dir.Join("r5.pbtxt"), "--dispatcher", addr, "--dataset-id", "r10"});
  CHECK(conflict.exit_code == 1);
  CHECK_THAT(conflict.err, Catch::Contains("\"r10\" is already bound to a different pipeline"));

  // The seed example through the service.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the worker's first heartbeat
  auto read = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1"});
  CHECK(read.exit_code == 0);
  CHECK(read.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  CHECK_THAT(read.err, Catch::Contains("10 elements"));

  Process w2({"worker", "--dispatcher", addr, "--port-file", dir.Join("w2.port"), "--heartbeat-interval", "100ms"},
             dir.Join("w2"));
  WaitForPort(dir.Join("w2.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto twice = RunTfdata({"read", "--dispatcher", addr, SourcePath("examples/range.pbtxt"), "-q"});
  CHECK(twice.exit_code == 0);
  auto counts = LineCounts(twice.out);
  CHECK(counts.size() == 10);
  for (const auto& [line, n] : counts) CHECK(n == 2);

  auto unknown = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "nope"});
  CHECK(unknown.exit_code == 1);
  CHECK_THAT(unknown.err, Catch::Contains("unknown dataset \"nope\""));
  auto bad_mode = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--mode", "sideways"});
  CHECK(bad_mode.exit_code == 2);
  CHECK_THAT(bad_mode.err, Catch::Contains("--mode: unknown processing mode \"sideways\""));
  CHECK_THAT(dispatcher.err(), Catch::Contains("worker localhost:"));
  CHECK_THAT(dispatcher.err(), Catch::Contains("registered"));
}

TEST_CASE("processes: tfdata bench --dispatcher measures through a live cluster", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  Process w1({"worker", "--dispatcher", addr, "--port-file", dir.Join("w1.port"), "--heartbeat-interval", "100ms"},
             dir.Join("w1"));
  WaitForPort(dir.Join("w1.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // range(10) also covers passes shorter than the bench's clock-check interval.
  auto bench = RunTfdata({"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--duration", "0.3",
                          "--warmup", "0.1", "--json"});
  INFO(bench.err);
  REQUIRE(bench.exit_code == 0);
  CHECK_THAT(bench.out, Catch::Contains("\"service\": {\"throughput\": {\"elements\": "));
  CHECK_THAT(bench.out, Catch::Contains("\"workers\": 1"));
  CHECK_THAT(bench.out, !Catch::Contains("\"service\": {\"throughput\": {\"elements\": 0,"));
  auto table = RunTfdata(
      {"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--duration", "0.2", "--warmup", "0"});
  CHECK(table.exit_code == 0);
  CHECK_THAT(table.out, Catch::Contains("through the service (1 worker(s))"));
  // The job's mode and the dataset's compression, for side-by-side benchmarks (bench/vs_tensorflow.sh).
  auto dynamic = RunTfdata({"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--duration", "0.2",
                            "--warmup", "0", "--mode", "distributed_epoch", "--compression", "snappy", "--json"});
  INFO(dynamic.err);
  CHECK(dynamic.exit_code == 0);
  CHECK_THAT(dynamic.out, !Catch::Contains("\"service\": {\"throughput\": {\"elements\": 0,"));
  auto status = RunTfdata({"status", "--dispatcher", addr, "--json"});
  CHECK_THAT(status.out, Catch::Contains("distributed_epoch") && Catch::Contains("snappy"));
  auto bad_mode = RunTfdata({"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--mode", "sideways"});
  CHECK(bad_mode.exit_code == 2);
  CHECK_THAT(bad_mode.err, Catch::Contains("--mode") && Catch::Contains("sideways"));
  auto bad_compression =
      RunTfdata({"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--compression", "zip"});
  CHECK(bad_compression.exit_code == 2);
  CHECK_THAT(bad_compression.err, Catch::Contains("zip"));
  auto unreachable = RunTfdata({"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", "127.0.0.1:1",
                                "--duration", "0.1", "--warmup", "0"});
  CHECK(unreachable.exit_code == 1);
  CHECK_THAT(unreachable.err, Catch::Contains("unreachable"));
}

TEST_CASE("processes: a worker killed with SIGKILL mid-job, the read finishes from the other", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--worker-timeout", "1s"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  Process w1({"worker", "--dispatcher", addr, "--port-file", dir.Join("w1.port"), "--heartbeat-interval", "100ms"},
             dir.Join("w1"));
  auto w2 = std::make_unique<Process>(std::vector<std::string>{"worker", "--dispatcher", addr, "--port-file",
                                                               dir.Join("w2.port"), "--heartbeat-interval", "100ms"},
                                      dir.Join("w2"));
  WaitForPort(dir.Join("w1.port"));
  WaitForPort(dir.Join("w2.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // 2000 elements at 1 ms each: about 2 s per worker.
  WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 2000 } } op { map { fn { sleep { micros: 1000 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("slow.pbtxt")}, dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  w2->Signal(SIGKILL);
  CHECK(w2->Wait() == -SIGKILL);
  CHECK(reader.Wait() == 4);  // 4: the read lost data (a task dropped)
  auto counts = LineCounts(reader.out());
  CHECK(counts.size() == 2000);  // the surviving worker's whole pass
  int total = 0;
  for (const auto& [line, n] : counts) total += n;
  CHECK(total < 4000);
  CHECK_THAT(reader.err(), Catch::Contains("1 task(s) dropped"));
}

TEST_CASE("processes: distributed_epoch over three workers, then with a worker killed by SIGKILL",
          "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--worker-timeout", "1s"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 3);

  // No faults: each element once.
  WriteFile(dir.Join("r.pbtxt"), "op { range { stop: 100000 } }");
  auto once = RunTfdata({"read", "--dispatcher", addr, dir.Join("r.pbtxt"), "--mode", "dynamic", "-q"});
  REQUIRE(once.exit_code == 0);
  auto counts = LineCounts(once.out);
  CHECK(counts.size() == 100000);
  bool each_once = true;
  for (const auto& [line, n] : counts) each_once = each_once && n == 1;
  CHECK(each_once);

  // A worker killed mid-epoch: nothing twice, the rest lost and counted.
  WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 6000 } } op { map { fn { sleep { micros: 1000 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("slow.pbtxt"), "--mode", "distributed_epoch"}, dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  workers[1]->Signal(SIGKILL);
  CHECK(workers[1]->Wait() == -SIGKILL);
  CHECK(reader.Wait() == 4);  // 4: the read lost data (a task dropped)
  auto slow = LineCounts(reader.out());
  int total = 0;
  bool no_duplicate = true;
  for (const auto& [line, n] : slow) {
    total += n;
    no_duplicate = no_duplicate && n == 1;
  }
  CHECK(no_duplicate);
  CHECK(total < 6000);
  CHECK(total > 1000);
  INFO(reader.err());
  CHECK_THAT(reader.err(), Catch::Contains("1 task(s) dropped: worker unreachable: localhost:"));
  CHECK_THAT(reader.err(), Catch::Contains(" split(s) lost)"));
}

TEST_CASE("processes: static sharding with a fixed worker list, and a worker not on it", "[service][process]") {
  TempDir dir;
  // Reserve a port for the listed worker by letting one worker pick it, then listing that address.
  Process probe({"worker", "--dispatcher", "127.0.0.1:1", "--port", "0", "--port-file", dir.Join("p.port"), "--host",
                 "127.0.0.1", "--worker-address", "127.0.0.1:%port%"},
                dir.Join("p"));
  const std::string port = WaitForPort(dir.Join("p.port"));
  probe.Signal(SIGTERM);
  probe.Wait();
  Process dispatcher(
      {"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--worker-addresses", "127.0.0.1:" + port},
      dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  Process listed({"worker", "--dispatcher", addr, "--port", port, "--host", "127.0.0.1", "--worker-address",
                  "127.0.0.1:%port%", "--heartbeat-interval", "100ms"},
                 dir.Join("w"));
  Process stranger({"worker", "--dispatcher", addr, "--port-file", dir.Join("s.port"), "--heartbeat-interval", "100ms"},
                   dir.Join("s"));
  WaitForPort(dir.Join("s.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  WriteFile(dir.Join("r.pbtxt"), "op { range { stop: 10 } }");
  auto read = RunTfdata({"read", "--dispatcher", addr, dir.Join("r.pbtxt"), "--mode", "data"});
  INFO(read.err);
  CHECK(read.exit_code == 0);
  CHECK(read.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  CHECK_THAT(stranger.err(), Catch::Contains("refused by the dispatcher"));
  CHECK_THAT(stranger.err(), Catch::Contains("is not in the dispatcher's fixed worker list"));
  CHECK_THAT(dispatcher.err(), Catch::Contains("refused worker localhost:"));
  auto bad = RunTfdata({"dispatcher", "--port", "0", "--worker-addresses", "a:1,nonsense"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--worker-addresses: \"nonsense\" is not an address"));
}

TEST_CASE("processes: a fault-tolerant dispatcher killed with SIGKILL mid-epoch and restarted, exactly once",
          "[service][process][journal]") {
  TempDir dir;
  FaultTolerantDispatcher dispatcher(dir);
  const std::string addr = dispatcher.addr();
  auto workers = StartWorkers(dir, addr, 3);
  // About 1.5 s of work per worker: 100000 elements, 45 us each, over 3 workers.
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 100000 } } op { map { fn { sleep { micros: 45 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "-q"},
                 dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  dispatcher.Kill();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  dispatcher.Restart("d2");
  INFO(reader.err());
  REQUIRE(reader.Wait() == 0);
  auto counts = LineCounts(reader.out());
  CHECK(counts.size() == 100000);
  bool each_once = true;
  for (const auto& [line, n] : counts) each_once = each_once && n == 1;
  CHECK(each_once);
  CHECK_THAT(dispatcher.process().err(), Catch::Contains("recovered "));
}

TEST_CASE("processes: --exit-when-idle ends a dispatcher and a worker once their job is done", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--exit-when-idle", "1s",
                      "--client-timeout", "1s", "--job-gc-timeout", "1s"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  Process worker({"worker", "--dispatcher", addr, "--port-file", dir.Join("w.port"), "--heartbeat-interval", "100ms",
                  "--exit-when-idle", "1s"},
                 dir.Join("w"));
  WaitForPort(dir.Join("w.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto read = RunTfdata({"read", "--dispatcher", addr, SourcePath("examples/range.pbtxt")});
  CHECK(read.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
  // The job ends with the read; the worker's task is dropped when the job is collected; both exit.
  CHECK(worker.Wait() == 0);
  CHECK(dispatcher.Wait() == 0);
  CHECK_THAT(worker.err(), Catch::Contains("exiting (--exit-when-idle)"));
  CHECK_THAT(dispatcher.err(), Catch::Contains("exiting (--exit-when-idle)"));
}

TEST_CASE("processes: restarts of a parallel_epochs dispatcher, fault-tolerant and not",
          "[service][process][journal]") {
  TempDir dir;
  for (const bool fault_tolerant : {true, false}) {
    INFO("fault tolerant: " << fault_tolerant);
    const std::string tag = fault_tolerant ? "ft" : "mem";
    std::vector<std::string> args = {"dispatcher", "--port",   "0", "--port-file", dir.Join(tag + ".port"),
                                     "--host",     "127.0.0.1"};
    if (fault_tolerant) {
      args.insert(args.end(), {"--work-dir", dir.Join("work"), "--fault-tolerant"});
    }
    auto dispatcher = std::make_unique<Process>(args, dir.Join(tag + "-d1"));
    const std::string port = WaitForPort(dir.Join(tag + ".port"));
    const std::string addr = "127.0.0.1:" + port;
    Process worker(
        {"worker", "--dispatcher", addr, "--port-file", dir.Join(tag + "-w.port"), "--heartbeat-interval", "100ms"},
        dir.Join(tag + "-w"));
    WaitForPort(dir.Join(tag + "-w.port"));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // About 2 s of elements from the one worker.
    WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 2000 } } op { map { fn { sleep { micros: 1000 } } } }");
    Process reader({"read", "--dispatcher", addr, dir.Join("slow.pbtxt"), "-q"}, dir.Join(tag + "-r"));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    dispatcher->Signal(SIGKILL);
    dispatcher->Wait();
    std::remove(dir.Join(tag + ".port").c_str());
    args[2] = port;
    dispatcher = std::make_unique<Process>(args, dir.Join(tag + "-d2"));
    WaitForPort(dir.Join(tag + ".port"));
    const int code = reader.Wait();
    INFO(reader.err());
    // The worker noticed the restart (a new incarnation id) and said what it means.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK_THAT(worker.err(),
               Catch::Contains(fault_tolerant ? "the dispatcher restarted (fault-tolerant: its jobs continue)"
                                              : "the dispatcher restarted (it kept no state)"));
    if (fault_tolerant) {
      // The job survived: the reader read the worker's whole pass, once.
      CHECK(code == 0);
      auto counts = LineCounts(reader.out());
      CHECK(counts.size() == 2000);
      bool once = true;
      for (const auto& [line, n] : counts) once = once && n == 1;
      CHECK(once);
    } else {
      // The job is gone: a clear error, and the worker registered again with the new dispatcher.
      CHECK(code == 1);
      CHECK_THAT(reader.err(), Catch::Contains("the dispatcher no longer knows this reader's job"));
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      auto again = RunTfdata({"read", "--dispatcher", addr, SourcePath("examples/range.pbtxt")});
      CHECK(again.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
      CHECK_THAT(dispatcher->err(), Catch::Contains("registered"));
    }
  }
}

TEST_CASE("processes: fault-tolerant dispatcher and a worker both killed mid-epoch, nothing twice, the loss counted",
          "[service][process][journal]") {
  TempDir dir;
  FaultTolerantDispatcher dispatcher(dir, {"--worker-timeout", "1s"});
  const std::string addr = dispatcher.addr();
  auto workers = StartWorkers(dir, addr, 3);
  const int n = 100000;
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 100000 } } op { map { fn { sleep { micros: 45 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch"}, dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  dispatcher.Kill();
  workers[2]->Signal(SIGKILL);
  workers[2]->Wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  dispatcher.Restart("d2");
  INFO(reader.err());
  REQUIRE(reader.Wait() == 4);  // 4: the read lost data (a task dropped)
  std::set<int64_t> seen;
  bool no_duplicate = true;
  std::istringstream lines(reader.out());
  for (std::string line; std::getline(lines, line);)
    no_duplicate = seen.insert(std::stoll(line)).second && no_duplicate;
  CHECK(no_duplicate);
  // The summary counts the splits lost with the killed worker; every missing element is in one.
  const std::string err = reader.err();
  const size_t at = err.find(" split(s) lost");
  REQUIRE(at != std::string::npos);
  const size_t from = err.rfind(' ', at - 1) + 1;
  const int64_t lost = std::stoll(err.substr(from, at - from));
  const int64_t split_size = (n + 63) / 64;
  std::set<int64_t> missing_splits;
  for (int64_t v = 0; v < n; ++v) {
    if (!seen.contains(v)) missing_splits.insert(v / split_size);
  }
  INFO(seen.size() << " delivered; " << missing_splits.size() << " splits with missing elements; " << lost
                   << " counted lost");
  CHECK(!missing_splits.empty());
  CHECK(static_cast<int64_t>(missing_splits.size()) <= lost);
}

TEST_CASE("processes: parallel_epochs, a worker killed and a new one started mid-job", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--worker-timeout", "1s"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto start = [&](const std::string& name) {
    auto w =
        std::make_unique<Process>(std::vector<std::string>{"worker", "--dispatcher", addr, "--port-file",
                                                           dir.Join(name + ".port"), "--heartbeat-interval", "100ms"},
                                  dir.Join(name));
    WaitForPort(dir.Join(name + ".port"));
    return w;
  };
  auto w1 = start("w1");
  auto w2 = start("w2");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 1500 } } op { map { fn { sleep { micros: 1000 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("slow.pbtxt"), "-q"}, dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  w1->Signal(SIGKILL);
  w1->Wait();
  // w1 restarted (a new port: a new worker to the dispatcher) joins while w2 is still producing,
  // and produces a whole pass from the beginning.
  auto w3 = start("w3");
  INFO(reader.err());
  CHECK(reader.Wait() == 4);  // 4: the read lost data (a task dropped)
  auto counts = LineCounts(reader.out());
  CHECK(counts.size() == 1500);
  int total = 0;
  bool twice = true;
  for (const auto& [line, k] : counts) {
    total += k;
    twice = twice && k >= 2 && k <= 3;  // w2 and w3 whole, w1 in part
  }
  CHECK(twice);
  CHECK(total < 4500);
}

TEST_CASE("processes: SIGTERM stops servers and readers promptly", "[service][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port")}, dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  Process worker({"worker", "--dispatcher", addr, "--port-file", dir.Join("w.port"), "--heartbeat-interval", "100ms"},
                 dir.Join("w"));
  WaitForPort(dir.Join("w.port"));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  WriteFile(dir.Join("inf.pbtxt"), "op { range { stop: 10 } } op { repeat {} }");
  Process reader({"read", "--dispatcher", addr, dir.Join("inf.pbtxt"), "--format", "null"}, dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (Process* p : {&reader, &worker, &dispatcher}) {
    const auto start = Clock::now();
    p->Signal(SIGTERM);
    const int code = p->Wait();
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    INFO("stopped in " << elapsed << " ms");
    CHECK((code == 0 || code == 130));
    // A hang would be tens of seconds (gRPC reconnect loops); this bound only separates prompt from stuck.
    CHECK(elapsed < 5000);
  }
  CHECK_THAT(reader.err(), Catch::Contains("(interrupted)"));
}

TEST_CASE("processes: unreachable addresses and bad flags fail fast with clear errors", "[service][process]") {
  auto read = RunTfdata({"read", "--dispatcher", "127.0.0.1:1", "--dataset-id", "1"});
  CHECK(read.exit_code == 1);
  CHECK_THAT(read.err, Catch::Contains("dispatcher 127.0.0.1:1"));
  CHECK_THAT(read.err, Catch::Contains("unreachable"));
  auto reg = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", "nonsense"});
  CHECK(reg.exit_code == 2);
  CHECK_THAT(reg.err, Catch::Contains("--dispatcher: \"nonsense\" is not an address"));
  auto dur = RunTfdata({"dispatcher", "--worker-timeout", "soon"});
  CHECK(dur.exit_code == 2);
  CHECK_THAT(dur.err, Catch::Contains("--worker-timeout: \"soon\" is not a duration"));
  auto local = RunTfdata({"local", SourcePath("examples/range.pbtxt"), "--workers", "2", "-q"});
  CHECK(local.exit_code == 0);
  auto counts = LineCounts(local.out);
  CHECK(counts.size() == 10);
  for (const auto& [line, n] : counts) CHECK(n == 2);
  auto seed = RunTfdata({"local", SourcePath("examples/range.pbtxt")});
  CHECK(seed.out == "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
}

TEST_CASE("processes: a worker stopped with SIGTERM leaves at once, and later reads do not ask it",
          "[service][process][leave]") {
  TempDir dir;
  // The default --worker-timeout (10 min): only the worker's own word can remove it this soon.
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port")}, dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  workers[1]->Signal(SIGTERM);
  CHECK(workers[1]->Wait() == 0);
  CHECK_THAT(workers[1]->err(), Catch::Contains("left the dispatcher"));
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 500 } }");
  for (int read = 0; read < 2; ++read) {
    auto r = RunTfdata({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--format", "null"});
    INFO(r.err);
    CHECK(r.exit_code == 0);  // the one worker's whole pass; nothing dropped, no warning
    CHECK_THAT(r.err, Catch::Contains("500 elements"));
    CHECK_THAT(r.err, !Catch::Contains("dropped"));
  }
  dispatcher.Signal(SIGTERM);
  dispatcher.Wait();
  CHECK_THAT(dispatcher.err(), Catch::Contains("left; its 0 task(s) removed"));
}

TEST_CASE(
    "processes: exactly-once: workers killed two at once and while the fault-tolerant dispatcher is down, "
    "every element once, exit 0",
    "[service][process][journal][exactly_once]") {
  TempDir dir;
  FaultTolerantDispatcher dispatcher(dir, {"--worker-timeout", "1s"});
  const std::string addr = dispatcher.addr();
  auto workers = StartWorkers(dir, addr, 4);
  const int64_t n = 100000;
  WriteFile(dir.Join("p.pbtxt"),
            "op { range { stop: 100000 } } op { map { fn { sleep { micros: 100 } } } } "
            "op { shuffle { buffer_size: 32 seed: 9 } } op { batch { batch_size: 4 } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--exactly-once"},
                 dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  // Two workers at once, mid-split.
  workers[0]->Signal(SIGKILL);
  workers[1]->Signal(SIGKILL);
  workers[0]->Wait();
  workers[1]->Wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  // The dispatcher, and a worker while it is down; then a new worker joins.
  dispatcher.Kill();
  workers[2]->Signal(SIGKILL);
  workers[2]->Wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  dispatcher.Restart("d2");
  std::remove(dir.Join("w0.port").c_str());  // the new worker writes its own
  auto late = StartWorkers(dir, addr, 1);
  INFO(reader.err());
  REQUIRE(reader.Wait() == 0);
  CheckEachOnce(reader.out(), n);
  CHECK_THAT(reader.err(), Catch::Contains("task(s) lost with their workers; their splits were produced again"));
}

TEST_CASE(
    "processes: exactly-once: the fault-tolerant dispatcher killed while a lost worker's splits wait to go "
    "out again, every element once",
    "[service][process][journal][exactly_once]") {
  TempDir dir;
  FaultTolerantDispatcher dispatcher(dir, {"--worker-timeout", "1s", "--log-level", "info"});
  const std::string addr = dispatcher.addr();
  auto workers = StartWorkers(dir, addr, 3);
  const int64_t n = 60000;
  WriteFile(dir.Join("p.pbtxt"),
            "op { range { stop: 60000 } } op { map { fn { sleep { micros: 100 } } } } "
            "op { shuffle { buffer_size: 32 seed: 4 } } op { batch { batch_size: 4 } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--exactly-once"},
                 dir.Join("r"));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  workers[0]->Signal(SIGKILL);
  workers[0]->Wait();
  // The moment the dispatcher pools the lost worker's splits, before the readers' reports let them
  // go out again: kill it there.
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (dispatcher.process().err().find("go to other workers (exactly once)") == std::string::npos &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  dispatcher.Kill();
  INFO(dispatcher.process().err());
  REQUIRE(dispatcher.process().err().find("go to other workers (exactly once)") != std::string::npos);
  dispatcher.Restart("d2");
  INFO(reader.err());
  REQUIRE(reader.Wait() == 0);
  CheckEachOnce(reader.out(), n);
}
