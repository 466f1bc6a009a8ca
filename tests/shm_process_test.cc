// The shared-memory data plane between real processes: a reader or a worker killed with SIGKILL
// mid-stream leaves no segment behind, and the other side goes on (or says why it cannot).
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/process_util.h"
#include "tests/test_util.h"

using namespace tfdata::testing;

namespace {

// What `pid` holds of the shared-memory plane: descriptors and mappings of our memfds.
int ShmObjects(pid_t pid) {
  int n = 0;
  const std::string fd_dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fd_dir, ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), link_ec).string();
    if (target.find("memfd:tfdata-shm") != std::string::npos) ++n;
  }
  const std::string maps = ReadFile("/proc/" + std::to_string(pid) + "/maps");
  for (size_t at = maps.find("memfd:tfdata-shm"); at != std::string::npos; at = maps.find("memfd:tfdata-shm", at + 1)) {
    ++n;
  }
  return n;
}

size_t DevShmEntries() {
  size_t n = 0;
  std::error_code ec;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) ++n;
  return n;
}

}  // namespace

TEST_CASE("shm processes: a reader killed with SIGKILL mid-stream leaks nothing, the next reader reads",
          "[shm][process]") {
  TempDir dir;
  const size_t dev_shm_before = DevShmEntries();
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 1);
  Process& worker = *workers[0];
  REQUIRE(ShmObjects(worker.pid()) == 0);
  // 64 KiB elements, endless: the reader is mid-stream whenever it is killed.
  WriteFile(dir.Join("big.pbtxt"), "op { range { stop: 1000000000000 } } op { batch { batch_size: 8192 } }");
  {
    Process reader({"read", "--dispatcher", addr, dir.Join("big.pbtxt"), "--transfer", "shm", "--format", "null"},
                   dir.Join("r1"));
    // The worker maps the reader's region once the reader connects.
    REQUIRE(WaitFor([&] { return ShmObjects(worker.pid()) > 0; }, 20000));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    reader.Signal(SIGKILL);
    CHECK(reader.Wait() == -SIGKILL);
  }
  // The worker notices the closed connection and lets the region go: nothing of it stays.
  CHECK(WaitFor([&] { return ShmObjects(worker.pid()) == 0; }, 10000));
  CHECK(DevShmEntries() == dev_shm_before);  // the plane names nothing in /dev/shm at all
  // And it serves the next reader through shared memory.
  auto next = RunTfdata(
      {"read", "--dispatcher", addr, dir.Join("big.pbtxt"), "--transfer", "shm", "--format", "null", "--take", "500"});
  INFO(next.err);
  CHECK(next.exit_code == 0);
  CHECK_THAT(next.err, Catch::Contains("500 elements"));
}

TEST_CASE("shm processes: a worker killed with SIGKILL mid-stream, the reader goes on from the other",
          "[shm][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--worker-timeout", "1s"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 2);
  Process* w2 = workers[1].get();
  // 2000 elements at 1 ms each: about 2 s per worker.
  WriteFile(dir.Join("slow.pbtxt"), "op { range { stop: 2000 } } op { map { fn { sleep { micros: 1000 } } } }");
  Process reader({"read", "--dispatcher", addr, dir.Join("slow.pbtxt"), "--transfer", "shm"}, dir.Join("r"));
  REQUIRE(WaitFor([&] { return ShmObjects(w2->pid()) > 0; }, 20000));
  w2->Signal(SIGKILL);
  CHECK(w2->Wait() == -SIGKILL);
  CHECK(reader.Wait() == 4);  // 4: the read lost data (a task dropped), as over gRPC
  auto counts = LineCounts(reader.out());
  CHECK(counts.size() == 2000);  // the surviving worker's whole pass
  CHECK_THAT(reader.err(), Catch::Contains("1 task(s) dropped"));
}

TEST_CASE("shm processes: --transfer shm to a worker without the plane names the reason, and auto uses gRPC",
          "[shm][process]") {
  TempDir dir;
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 1, {"--no-shared-memory"});
  WriteFile(dir.Join("r.pbtxt"), "op { range { stop: 1000 } }");
  auto shm = RunTfdata({"read", "--dispatcher", addr, dir.Join("r.pbtxt"), "--transfer", "shm", "-q"});
  CHECK(shm.exit_code == 1);  // its one task dropped: nothing read
  CHECK_THAT(shm.err, Catch::Contains("no shared-memory data plane on this host"));
  // The final error says why, not only that the worker could not be reached.
  const size_t error_at = shm.err.find("tfdata: error: no element was read");
  REQUIRE(error_at != std::string::npos);
  CHECK_THAT(shm.err.substr(error_at), Catch::Contains("no shared-memory data plane on this host"));
  auto any = RunTfdata({"read", "--dispatcher", addr, dir.Join("r.pbtxt"), "-q"});
  INFO(any.err);
  CHECK(any.exit_code == 0);
  CHECK(LineCounts(any.out).size() == 1000);
  auto bad = RunTfdata({"read", "--dispatcher", addr, dir.Join("r.pbtxt"), "--transfer", "carrier-pigeon"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Catch::Contains("--transfer"));
}
