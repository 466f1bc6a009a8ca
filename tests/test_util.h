// Helpers shared by the tests: temporary directories, file I/O, running the built binary.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "lib/core/tensor.h"

namespace tfdata::testing {

// A fresh directory under $TMPDIR, removed (recursively) by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  // path() + "/" + name
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void WriteFile(const std::string& path, const std::string& contents);
std::string ReadFile(const std::string& path);

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};
// Runs `args` (args[0] is the program) with no stdin, capturing stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& args);
// Runs the built tfdata binary with these arguments.
CommandResult RunTfdata(const std::vector<std::string>& args);

// Fails the running test when ctest runs it under a lighter label than what it does (ctest sets
// TFDATA_TEST_KIND from the label, CMakeLists.txt): "cluster" for the in-process test cluster
// (tag the test [cluster]), "process" for a tfdata process or any other program (tag [process]).
// Run by hand (no TFDATA_TEST_KIND), anything goes.
void RequireTestKind(const std::string& needs);

// How many times each value occurs (exactly-once and at-most-once checks).
inline std::map<int64_t, int> Counts(const std::vector<int64_t>& values) {
  std::map<int64_t, int> counts;
  for (int64_t v : values) ++counts[v];
  return counts;
}

// Polls `pred` every 5 ms until it holds or `ms` have passed; returns its last value. For state
// that another thread changes (a worker registering, a task ending); never a measure of time.
template <typename Pred>
bool WaitFor(Pred pred, int ms = 5000) {
  for (int i = 0; i < ms / 5; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return pred();
}

// A path under the source tree, e.g. SourcePath("examples/range.pbtxt").
std::string SourcePath(const std::string& relative);

// int64 scalars of each element's first component.
std::vector<int64_t> Int64Scalars(const std::vector<Element>& elements);

}  // namespace tfdata::testing
