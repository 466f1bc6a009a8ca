// Resumable reads (issue 22) as real processes: a `tfdata read --save-state` trainer SIGKILLed
// after its state was saved and after it read further, resumed with `--resume`; every element
// exactly once across the two runs, also with the fault-tolerant dispatcher killed and restarted
// in between, and with more workers after than before. Bad state files: an error, nothing read.
#include <chrono>
#include <sstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/service/client/read_state.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;
using Clock = std::chrono::steady_clock;

namespace {

// The first `n` lines of `text`.
std::string FirstLines(const std::string& text, int64_t n) {
  size_t end = 0;
  for (int64_t i = 0; i < n; ++i) {
    end = text.find('\n', end);
    REQUIRE(end != std::string::npos);
    ++end;
  }
  return text.substr(0, end);
}

int64_t LineCount(const std::string& text) {
  int64_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Waits until the state file at `path` says at least `elements` were handed out; returns it.
service::ReadState WaitForState(const std::string& path, int64_t elements) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    auto state = service::ReadReadStateFile(path);
    if (state.ok() && state->elements() >= elements) return *state;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("no read state with " << elements << " elements in " << path);
  return {};
}

}  // namespace

TEST_CASE("processes: resume: a trainer killed after it saved its state and read further resumes exactly",
          "[resume][process][journal]") {
  enum class Between { kNothing, kDispatcherRestart, kMoreWorkers };
  const Between between = GENERATE(Between::kNothing, Between::kDispatcherRestart, Between::kMoreWorkers);
  INFO("between the runs: " << static_cast<int>(between));
  TempDir dir;
  FaultTolerantDispatcher dispatcher(dir);
  const std::string addr = dispatcher.addr();
  auto workers = StartWorkers(dir, addr, 2);
  // batch and a seeded shuffle after the source; slow enough that the kill lands mid-read.
  const int64_t n = 40000;
  WriteFile(dir.Join("p.pbtxt"),
            "op { range { stop: 40000 } } op { map { fn { sleep { micros: 50 } } } } "
            "op { shuffle { buffer_size: 32 seed: 4 } } op { batch { batch_size: 4 } }");
  const std::string state_file = dir.Join("input.state");
  Process first({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--save-state",
                 state_file, "--save-state-every", "250", "-q"},
                dir.Join("r1"));
  WaitForState(state_file, 1000);
  // It reads on past its last state before it dies.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  first.Signal(SIGKILL);
  REQUIRE(first.Wait() == -SIGKILL);
  auto state = service::ReadReadStateFile(state_file);
  REQUIRE(state.ok());
  const std::string first_out = first.out();
  INFO(state->elements() << " elements in the state, " << LineCount(first_out) << " lines written");
  REQUIRE(LineCount(first_out) >= state->elements());
  if (between == Between::kDispatcherRestart) {
    dispatcher.Kill();
    dispatcher.Restart("d2");
  } else if (between == Between::kMoreWorkers) {
    for (int i = 0; i < 2; ++i) std::remove(dir.Join("w" + std::to_string(i) + ".port").c_str());
    auto more = StartWorkers(dir, addr, 1);
    workers.push_back(std::move(more.front()));
  }
  Process second({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--resume",
                  state_file, "--save-state", state_file, "-q"},
                 dir.Join("r2"));
  const int code = second.Wait();
  INFO(second.err());
  REQUIRE(code == 0);
  CheckEachOnce(FirstLines(first_out, state->elements()) + second.out(), n);
  // The state it left says everything was read.
  auto end_state = service::ReadReadStateFile(state_file);
  REQUIRE(end_state.ok());
  CHECK(end_state->elements() == state->elements() + LineCount(second.out()));
  CHECK(end_state->handed().epochs_size() == 0);
}

TEST_CASE("processes: resume: a truncated, corrupted, foreign or mismatched state file is an error, nothing read",
          "[resume][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 1);
  WriteFile(dir.Join("p.pbtxt"), "op { range { stop: 1000 } }");
  WriteFile(dir.Join("q.pbtxt"), "op { range { stop: 999 } }");
  const std::string state_file = dir.Join("s");
  Process take({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--save-state",
                state_file, "--take", "10", "-q"},
               dir.Join("take"));
  REQUIRE(take.Wait() == 0);
  auto state = service::ReadReadStateFile(state_file);
  REQUIRE(state.ok());
  CHECK(state->elements() == 10);  // --take N: the state after exactly N
  const std::string bytes = ReadFile(state_file);
  WriteFile(dir.Join("truncated"), bytes.substr(0, bytes.size() - 4));
  std::string flipped = bytes;
  flipped[flipped.size() - 12] ^= 0x01;
  WriteFile(dir.Join("flipped"), flipped);
  WriteFile(dir.Join("foreign"), "op { range { stop: 10 } }\n");
  struct Bad {
    std::string pipeline, file, message;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"p.pbtxt", "truncated", "not a tfdata read state"},
           {"p.pbtxt", "flipped", "corrupted read state"},
           {"p.pbtxt", "foreign", "not a tfdata read state"},
           {"p.pbtxt", "missing", "cannot open the read state file"},
           {"q.pbtxt", "s", "the read state is of another pipeline"},
       }) {
    INFO(bad.file);
    Process r({"read", "--dispatcher", addr, dir.Join(bad.pipeline), "--mode", "distributed_epoch", "--resume",
               dir.Join(bad.file)},
              dir.Join("bad"));
    CHECK(r.Wait() == 1);
    CHECK(r.out().empty());
    CHECK_THAT(r.err(), Catch::Contains(bad.message));
  }
  Process parallel({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--resume", state_file}, dir.Join("par"));
  CHECK(parallel.Wait() == 2);
  CHECK_THAT(parallel.err(),
             Catch::Contains("--save-state and --resume need --mode distributed_epoch or static sharding"));
}

TEST_CASE("processes: deterministic order: one worker, and three with one SIGKILLed mid-read, give one sequence",
          "[resume][deterministic][process]") {
  std::string first;
  for (int workers : {1, 3}) {
    INFO(workers << " workers");
    TempDir dir;
    FaultTolerantDispatcher dispatcher(dir, {"--worker-timeout", "1s"});
    const std::string addr = dispatcher.addr();
    auto procs = StartWorkers(dir, addr, workers);
    WriteFile(dir.Join("p.pbtxt"),
              "op { range { stop: 20000 } } op { map { fn { sleep { micros: 50 } } } } "
              "op { shuffle { buffer_size: 32 seed: 8 } } op { batch { batch_size: 4 } }");
    Process reader({"read", "--dispatcher", addr, dir.Join("p.pbtxt"), "--mode", "distributed_epoch", "--deterministic",
                    "--save-state", dir.Join("s"), "--save-state-every", "100", "-q"},
                   dir.Join("r"));
    if (workers > 1) {
      WaitForState(dir.Join("s"), 500);
      procs[1]->Signal(SIGKILL);
      procs[1]->Wait();
    }
    const int code = reader.Wait();
    INFO(reader.err());
    REQUIRE(code == 0);
    CheckEachOnce(reader.out(), 20000);
    if (first.empty()) {
      first = reader.out();
    } else {
      CHECK(reader.out() == first);
    }
  }
}
