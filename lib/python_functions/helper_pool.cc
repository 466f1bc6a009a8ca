#include "lib/python_functions/helper_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/python_functions/protocol.h"
#include "spdlog/spdlog.h"

namespace tfdata::python_functions {
namespace {

// The descriptors a helper finds its socket and regions at (passed to tfdata._helper): the
// response regions follow from kResponseFd on.
constexpr int kSocketFd = 3, kRequestFd = 4, kResponseFd = 5;
constexpr int kLastFd = kResponseFd + kResponseRegions - 1;

// Held by the tensors that alias a response region: keeps the mapping, and the region pinned.
struct Pin {
  std::shared_ptr<void> mapping;
  std::shared_ptr<std::atomic<int>> pins;
  Pin(std::shared_ptr<void> m, std::shared_ptr<std::atomic<int>> p) : mapping(std::move(m)), pins(std::move(p)) {
    pins->fetch_add(1, std::memory_order_relaxed);
  }
  // Release: the reads of whoever held the results happen before the region is written again.
  ~Pin() { pins->fetch_sub(1, std::memory_order_release); }
};

std::string ErrnoText() { return std::strerror(errno); }

// Receives one message, waiting at most `timeout`. nullopt on time-out; "" when the peer closed.
// A message longer than `max` comes back as its first max + 1 bytes (the caller sees it is too long).
absl::StatusOr<std::optional<std::string>> Receive(int fd, absl::Duration timeout, size_t max = kMaxControlBytes) {
  pollfd p{fd, POLLIN, 0};
  const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(timeout), 1 << 30));
  int r;
  do {
    r = poll(&p, 1, std::max(ms, 0));
  } while (r < 0 && errno == EINTR);
  if (r < 0) return absl::InternalError("poll: " + ErrnoText());
  if (r == 0) return std::nullopt;
  std::string buf(max + 1, '\0');
  ssize_t n;
  do {
    n = recv(fd, buf.data(), buf.size(), MSG_TRUNC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if (errno == ECONNRESET) return std::string();
    return absl::InternalError("recv: " + ErrnoText());
  }
  buf.resize(std::min(static_cast<size_t>(n), buf.size()));
  return buf;
}

absl::Status Send(int fd, const std::string& message) {
  ssize_t n;
  do {
    n = send(fd, message.data(), message.size(), MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(message.size())) return absl::UnavailableError("send: " + ErrnoText());
  return absl::OkStatus();
}

// How a helper ended, for errors: "died from signal 11 (Segmentation fault)".
std::string Ending(pid_t pid) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  if (r != pid) return "ended";
  if (WIFSIGNALED(status)) {
    return fmt::format("died from signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

void KillAndReap(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGKILL);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

std::string DefaultPython() {
  const char* env = std::getenv("TFDATA_PYTHON");
  return env != nullptr && *env != '\0' ? env : "python3";
}

HelperPool::Helper::~Helper() {
  if (socket >= 0) close(socket);  // a live helper reads EOF and exits
  KillAndReap(pid);
}

absl::StatusOr<std::shared_ptr<HelperPool>> HelperPool::Start(HelperPoolOptions options) {
  if (options.python.empty()) options.python = DefaultPython();
  if (options.helpers < 0) return absl::InvalidArgumentError("python helpers must be 0 (one per core) or more");
  if (options.helpers == 0) options.helpers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--python-call-timeout must be positive");
  }
  std::shared_ptr<HelperPool> pool(new HelperPool(std::move(options)));
  pool->set_where(pool->options_.where);
  if (pool->options_.modules.empty()) return pool;
  // All helpers at once: each imports the modules (numpy, torch: seconds), in parallel.
  std::vector<absl::StatusOr<std::unique_ptr<Helper>>> started(pool->options_.helpers);
  std::vector<std::vector<std::string>> names(pool->options_.helpers);
  std::vector<std::thread> threads;
  for (int i = 0; i < pool->options_.helpers; ++i) {
    threads.emplace_back([&, i] { started[i] = pool->Spawn(&names[i]); });
  }
  for (auto& t : threads) t.join();
  absl::MutexLock lock(&pool->mu_);
  for (int i = 0; i < pool->options_.helpers; ++i) {
    if (!started[i].ok()) return started[i].status();
    pool->idle_.push_back(*std::move(started[i]));
    ++pool->live_;
  }
  pool->spawned_ = pool->options_.helpers;
  pool->functions_ = names[0];
  std::sort(pool->functions_.begin(), pool->functions_.end());
  return pool;
}

HelperPool::~HelperPool() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

void HelperPool::set_where(std::string where) {
  absl::MutexLock lock(&mu_);
  where_ = std::move(where);
}

std::string HelperPool::Where() const {
  absl::MutexLock lock(&mu_);
  return where_;
}

int64_t HelperPool::spawned() const {
  absl::MutexLock lock(&mu_);
  return spawned_;
}

absl::Status HelperPool::CheckLoaded(const std::string& name) const {
  if (std::binary_search(functions_.begin(), functions_.end(), name)) return absl::OkStatus();
  if (options_.modules.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "python function '{}' is not loaded on {}: it loads no Python modules (start it with --python-module "
        "MODULE, a module that registers the function with @tfdata.function(\"{}\"))",
        name, Where(), name));
  }
  return absl::FailedPreconditionError(fmt::format(
      "python function '{}' is not loaded on {}: its modules ({}) register {}", name, Where(),
      absl::StrJoin(options_.modules, ", "), functions_.empty() ? "none" : absl::StrJoin(functions_, ", ")));
}

absl::StatusOr<std::unique_ptr<HelperPool::Helper>> HelperPool::Spawn(std::vector<std::string>* functions) const {
  const std::string what = fmt::format("python helper ({} -m tfdata._helper)", options_.python);
  auto h = std::make_unique<Helper>();
  TFD_ASSIGN_OR_RETURN(h->request, SharedRegion::Create("tfdata-python-request", 1 << 20));
  for (Response& r : h->responses) {
    TFD_ASSIGN_OR_RETURN(r.region, SharedRegion::Create("tfdata-python-response", 1 << 20));
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError("socketpair: " + ErrnoText());
  }
  h->socket = sv[0];
  int exec_pipe[2];  // tells the parent why exec failed; closed by a successful exec
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) {
    close(sv[1]);
    return absl::InternalError("pipe: " + ErrnoText());
  }
  // Everything the child needs is made before fork: between fork and exec it may only make
  // system calls (the worker has other threads).
  std::vector<std::string> args = {options_.python,
                                   "-m",
                                   "tfdata._helper",
                                   "--socket",
                                   std::to_string(kSocketFd),
                                   "--request",
                                   std::to_string(kRequestFd),
                                   "--protocol",
                                   std::to_string(kProtocolVersion),
                                   "--parent",
                                   std::to_string(getpid())};
  for (int fd = kResponseFd; fd <= kLastFd; ++fd) {
    args.push_back("--response");
    args.push_back(std::to_string(fd));
  }
  for (const std::string& m : options_.modules) {
    args.push_back("--module");
    args.push_back(m);
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const int child_socket = sv[1], request_fd = h->request.fd();
  int response_fds[kResponseRegions];
  for (int i = 0; i < kResponseRegions; ++i) response_fds[i] = h->responses[i].region.fd();
  const pid_t pid = fork();
  if (pid < 0) {
    close(sv[1]);
    close(exec_pipe[0]);
    close(exec_pipe[1]);
    return absl::InternalError("fork: " + ErrnoText());
  }
  if (pid == 0) {
    // No PR_SET_PDEATHSIG: it fires when the forking *thread* ends (a map's thread). The helper
    // watches its parent instead (tfdata._helper --parent).
    if (getppid() != parent) _exit(127);
    // Out of the way of 3..kLastFd first, then into place (dup2 clears close-on-exec).
    const int p = fcntl(exec_pipe[1], F_DUPFD_CLOEXEC, 16);
    int moved[kResponseRegions + 2];
    moved[0] = fcntl(child_socket, F_DUPFD, 16);
    moved[1] = fcntl(request_fd, F_DUPFD, 16);
    for (int i = 0; i < kResponseRegions; ++i) moved[i + 2] = fcntl(response_fds[i], F_DUPFD, 16);
    if (p < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) _exit(127);
    for (int i = 0; i < kResponseRegions + 2; ++i) {
      if (moved[i] < 0 || dup2(moved[i], kSocketFd + i) < 0) _exit(127);
    }
    // Nothing else of the worker's (its sockets, files) goes to the helper: the descriptors
    // above kLastFd but the exec pipe (close-on-exec) are closed.
    if (syscall(SYS_close_range, kLastFd + 1, p - 1, 0) != 0 || syscall(SYS_close_range, p + 1, ~0u, 0) != 0) {
      for (int fd = kLastFd + 1; fd < 65536; ++fd) {
        if (fd != p) close(fd);
      }
    }
    execvp(argv[0], argv.data());
    const int e = errno;
    (void)!write(p, &e, sizeof(e));
    _exit(127);
  }
  close(sv[1]);
  close(exec_pipe[1]);
  h->pid = pid;
  int exec_errno = 0;
  const ssize_t got = read(exec_pipe[0], &exec_errno, sizeof(exec_errno));
  close(exec_pipe[0]);
  if (got == sizeof(exec_errno)) {
    return absl::FailedPreconditionError(
        fmt::format("{} could not start: {} (set --python to an interpreter that has the tfdata package)", what,
                    std::strerror(exec_errno)));
  }
  TFD_ASSIGN_OR_RETURN(std::optional<std::string> hello, Receive(h->socket, options_.start_timeout));
  if (!hello) {
    return absl::DeadlineExceededError(fmt::format("{} did not load its modules ({}) within {}", what,
                                                   absl::StrJoin(options_.modules, ", "),
                                                   absl::FormatDuration(options_.start_timeout)));
  }
  if (hello->empty()) {
    const pid_t dead = h->pid;
    h->pid = -1;
    return absl::FailedPreconditionError(fmt::format(
        "{} {} before it loaded its modules (its stderr is this process's; is the tfdata package installed for "
        "that interpreter?)",
        what, Ending(dead)));
  }
  if (hello->rfind("error\n", 0) == 0) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", what, hello->substr(6)));
  }
  if (hello->rfind("ok\n", 0) != 0) return absl::DataLossError(what + ": a bad hello");
  functions->clear();
  for (absl::string_view line : absl::StrSplit(hello->substr(3), '\n', absl::SkipEmpty())) {
    functions->emplace_back(line);
  }
  return h;
}

absl::StatusOr<std::vector<PythonCallResult>> HelperPool::Call(const std::string& name, PythonCallKind kind,
                                                               std::vector<Element> inputs,
                                                               const PythonCallNames& names) const {
  TFD_RETURN_IF_ERROR(CheckLoaded(name));
  std::unique_ptr<Helper> h;
  bool spawn = false;
  {
    absl::MutexLock lock(&mu_);
    while (idle_.empty() && live_ >= options_.helpers) idle_cv_.Wait(&mu_);
    if (!idle_.empty()) {
      h = std::move(idle_.back());
      idle_.pop_back();
    } else {
      spawn = true;  // one was lost: replace it
      ++live_;
      ++spawned_;
    }
  }
  if (spawn) {
    std::vector<std::string> names;
    auto spawned = Spawn(&names);
    if (!spawned.ok()) {
      const std::string where = Where();
      absl::MutexLock lock(&mu_);
      --live_;
      idle_cv_.Signal();
      return absl::Status(spawned.status().code(),
                          fmt::format("python function '{}' on {}: starting a helper again: {}", name, where,
                                      std::string(spawned.status().message())));
    }
    h = *std::move(spawned);
  }
  bool broken = false;
  auto results = CallOn(*h, name, kind, inputs, names, &broken);
  if (broken) h.reset();  // killed and reaped, outside the lock
  absl::MutexLock lock(&mu_);
  if (broken) {
    --live_;
  } else {
    idle_.push_back(std::move(h));
  }
  idle_cv_.Signal();
  return results;
}

absl::StatusOr<std::vector<PythonCallResult>> HelperPool::CallOn(Helper& h, const std::string& name,
                                                                 PythonCallKind kind,
                                                                 const std::vector<Element>& inputs,
                                                                 const PythonCallNames& names, bool* broken) const {
  const auto count = static_cast<uint32_t>(inputs.size());
  auto fail = [&](const std::string& why) {
    *broken = true;
    return absl::InternalError(fmt::format("python function '{}' on {}: {}", name, Where(), why));
  };
  auto request_bytes = WriteRequest(inputs, &h.request);
  if (!request_bytes.ok()) return request_bytes.status();
  // A region whose earlier results are all released; else the last, copied out.
  int index = kResponseRegions - 1;
  for (int i = 0; i + 1 < kResponseRegions; ++i) {
    if (h.responses[i].pins->load(std::memory_order_relaxed) == 0) {
      std::atomic_thread_fence(std::memory_order_acquire);  // pairs with ~Pin's release
      index = i;
      break;
    }
  }
  Response& response = h.responses[index];
  Progress(response.region)->store(0, std::memory_order_relaxed);
  if (auto st = Send(h.socket, EncodeCall(kind, name, names, count, *request_bytes, index)); !st.ok()) {
    const pid_t pid = h.pid;
    h.pid = -1;
    return fail(fmt::format("its helper process (pid {}) {} before the call", pid, Ending(pid)));
  }
  uint64_t progress = 0;
  while (true) {
    auto message = Receive(h.socket, options_.call_timeout, sizeof(ReplyHeader));
    if (!message.ok()) return fail(std::string(message.status().message()));
    if (!*message) {
      // No reply in call_timeout: hung, unless it finished an input since the last look.
      const uint64_t now = Progress(response.region)->load(std::memory_order_relaxed);
      if (now > progress) {
        progress = now;
        continue;
      }
      return fail(fmt::format(
          "a call did not return within {} (--python-call-timeout) on input {} of {}; its helper process (pid {}) "
          "was killed",
          absl::FormatDuration(options_.call_timeout), progress, count, h.pid));
    }
    if ((*message)->empty()) {
      const pid_t pid = h.pid;
      h.pid = -1;
      return fail(fmt::format("its helper process (pid {}) {} during a call, on input {} of {}", pid, Ending(pid),
                              Progress(response.region)->load(std::memory_order_relaxed), count));
    }
    ReplyHeader reply;
    if ((*message)->size() != sizeof(reply)) return fail("a reply of the wrong size");
    std::memcpy(&reply, (*message)->data(), sizeof(reply));
    std::shared_ptr<const void> pin;
    if (index + 1 < kResponseRegions) {
      if (auto st = response.region.Map(reply.response_bytes, /*grow=*/false); !st.ok()) {
        return fail(std::string(st.message()));
      }
      pin = std::make_shared<Pin>(response.region.mapping(), response.pins);
    }
    auto results = ReadResponse(&response.region, reply, count, std::move(pin));
    if (!results.ok()) return fail(std::string(results.status().message()));
    return results;
  }
}

}  // namespace tfdata::python_functions
