// Tests with real processes started from the built binary: a background process with its output
// in files, port files, a set of workers. Not thread-safe: one test thread drives them.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace tfdata::testing {

// A tfdata process in the background; stdout and stderr go to files. Killed (SIGKILL) by the
// destructor if still running.
class Process {
 public:
  Process(const std::vector<std::string>& args, const std::string& log_prefix)
      : out_(log_prefix + ".out"), err_(log_prefix + ".err") {
    RequireTestKind("process");
    pid_ = fork();
    if (pid_ == 0) {
      int in = open("/dev/null", O_RDONLY);
      int out = open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(in, 0);
      dup2(out, 1);
      dup2(err, 2);
      std::vector<char*> argv;
      std::string bin = TFDATA_BINARY;
      argv.push_back(bin.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(bin.c_str(), argv.data());
      _exit(127);
    }
  }
  ~Process() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      Wait();
    }
  }
  void Signal(int sig) { kill(pid_, sig); }
  pid_t pid() const { return pid_; }
  // Exit code, or -signal.
  int Wait() {
    if (!exited_) {
      int status = 0;
      waitpid(pid_, &status, 0);
      exited_ = true;
      code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    return code_;
  }
  std::string out() const { return ReadFile(out_); }
  std::string err() const { return ReadFile(err_); }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int code_ = 0;
};

// Waits for a --port-file to appear; returns the port.
std::string WaitForPort(const std::string& path);

// `n` worker processes (logs and port files w0, w1, ... in `dir`), registered with the dispatcher
// at `addr` by the time this returns; `extra` flags go to every worker.
std::vector<std::unique_ptr<Process>> StartWorkers(const TempDir& dir, const std::string& addr, int n,
                                                   const std::vector<std::string>& extra = {});

// A --fault-tolerant dispatcher on 127.0.0.1:`port` (0: any) keeping its journal in `work`; its
// port goes to dir/d.port, its output to dir/`log`.*.
std::unique_ptr<Process> StartFaultTolerantDispatcher(const TempDir& dir, const std::string& work,
                                                      const std::string& port, const std::string& log,
                                                      const std::vector<std::string>& extra);

// A --fault-tolerant dispatcher process on 127.0.0.1 (journal in dir/work, port in dir/d.port),
// to be killed and started again on the same port, as an operator's restart would. Not
// thread-safe; owns its process (killed on destruction).
class FaultTolerantDispatcher {
 public:
  // Started on any port, logging to dir/d1.*; `extra` flags go to every start. Returns once it
  // listens.
  explicit FaultTolerantDispatcher(const TempDir& dir, std::vector<std::string> extra = {});
  // SIGKILLs it and waits for it to die.
  void Kill();
  // Starts it again (after Kill) on the same port and work dir, logging to dir/`log`.*; returns
  // once it listens.
  void Restart(const std::string& log);

  Process& process() { return *process_; }
  const std::string& port() const { return port_; }
  const std::string& addr() const { return addr_; }

 private:
  const TempDir& dir_;
  const std::vector<std::string> extra_;
  std::unique_ptr<Process> process_;
  std::string port_, addr_;
};

// How many times each line of `text` occurs.
std::map<std::string, int> LineCounts(const std::string& text);

// `out` is `tfdata read`'s text output of batches ("[a b c d]" per line): CHECKs that it holds
// each of 0 .. n-1 exactly once.
void CheckEachOnce(const std::string& out, int64_t n);

}  // namespace tfdata::testing
