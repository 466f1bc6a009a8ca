#include "tests/process_util.h"

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

namespace tfdata::testing {

// Waits for a --port-file to appear; returns the port.
std::string WaitForPort(const std::string& path) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream in(path);
    std::string port;
    if (in >> port) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  FAIL("no port file " << path);
  return "";
}

// `n` worker processes (logs and port files w0, w1, ... in `dir`), registered with the dispatcher
// at `addr` by the time this returns.
std::vector<std::unique_ptr<Process>> StartWorkers(const TempDir& dir, const std::string& addr, int n,
                                                   const std::vector<std::string>& extra) {
  std::vector<std::unique_ptr<Process>> workers;
  for (int i = 0; i < n; ++i) {
    const std::string port = dir.Join("w" + std::to_string(i) + ".port");
    std::vector<std::string> args{"worker", "--dispatcher", addr, "--port-file", port, "--heartbeat-interval", "100ms"};
    args.insert(args.end(), extra.begin(), extra.end());
    workers.push_back(std::make_unique<Process>(args, dir.Join("w" + std::to_string(i))));
    WaitForPort(port);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // their first heartbeats
  return workers;
}

std::unique_ptr<Process> StartFaultTolerantDispatcher(const TempDir& dir, const std::string& work,
                                                      const std::string& port, const std::string& log,
                                                      const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"dispatcher", "--port",    port,         "--port-file", dir.Join("d.port"),
                                   "--host",     "127.0.0.1", "--work-dir", work,          "--fault-tolerant"};
  args.insert(args.end(), extra.begin(), extra.end());
  return std::make_unique<Process>(args, dir.Join(log));
}

FaultTolerantDispatcher::FaultTolerantDispatcher(const TempDir& dir, std::vector<std::string> extra)
    : dir_(dir), extra_(std::move(extra)) {
  process_ = StartFaultTolerantDispatcher(dir_, dir_.Join("work"), "0", "d1", extra_);
  port_ = WaitForPort(dir_.Join("d.port"));
  addr_ = "127.0.0.1:" + port_;
}

void FaultTolerantDispatcher::Kill() {
  process_->Signal(SIGKILL);
  CHECK(process_->Wait() == -SIGKILL);
}

void FaultTolerantDispatcher::Restart(const std::string& log) {
  std::remove(dir_.Join("d.port").c_str());
  process_ = StartFaultTolerantDispatcher(dir_, dir_.Join("work"), port_, log, extra_);
  WaitForPort(dir_.Join("d.port"));
}

void CheckEachOnce(const std::string& out, int64_t n) {
  std::map<int64_t, int> counts;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream values(line.substr(1, line.size() - 2));
    for (int64_t v; values >> v;) ++counts[v];
  }
  int64_t duplicates = 0;
  for (const auto& [v, c] : counts) duplicates += c > 1;
  CHECK(duplicates == 0);
  CHECK(static_cast<int64_t>(counts.size()) == n);
  REQUIRE_FALSE(counts.empty());
  CHECK(counts.begin()->first == 0);
  CHECK(counts.rbegin()->first == n - 1);
}

std::map<std::string, int> LineCounts(const std::string& text) {
  std::map<std::string, int> counts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++counts[text.substr(start, end - start)];
    start = end + 1;
  }
  return counts;
}

}  // namespace tfdata::testing
