#include "lib/service/shm/shm_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/service/shm/shm_frames.h"
#include "proto/shm.pb.h"
#include "spdlog/spdlog.h"

namespace tfdata::service::shm {
namespace {

constexpr absl::Duration kSendTimeout = absl::Seconds(10);
constexpr absl::Duration kHelloTimeout = absl::Seconds(10);

bool SameToken(const std::string& a, const std::string& b) {
  // Constant time in the contents, as the gRPC plane's check.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// A memfd of the worker's for a response that does not fit the reader's span.
absl::StatusOr<UniqueFd> WriteOverflow(const std::vector<Element>& elements, size_t bytes, ShmResponse* response) {
  const size_t size = std::max<size_t>(bytes, 1);  // a memfd of 0 bytes cannot be mapped
  auto fd = CreateSealedMemfd("tfdata-shm-response", size);
  if (!fd.ok()) return fd.status();
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory data plane: mapping ", bytes, " bytes: ", std::strerror(errno)));
  }
  absl::Status st = WriteFrames(elements, static_cast<uint8_t*>(p), response);
  munmap(p, size);
  if (!st.ok()) return st;
  response->set_overflow(true);
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmServer>> ShmServer::Start(LocalEndpoint* endpoint, std::string address,
                                                            std::string token, bool same_user_only) {
  auto listener = Listen(address);
  if (!listener.ok()) return listener.status();
  UniqueFd wake(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake) return absl::InternalError(absl::StrCat("shared-memory data plane: eventfd: ", std::strerror(errno)));
  std::unique_ptr<ShmServer> server(new ShmServer(endpoint, std::move(address), std::move(token), same_user_only,
                                                  *std::move(listener), std::move(wake)));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

ShmServer::ShmServer(LocalEndpoint* endpoint, std::string address, std::string token, bool same_user_only,
                     UniqueFd listener, UniqueFd wake)
    : endpoint_(endpoint),
      address_(std::move(address)),
      token_(std::move(token)),
      same_user_only_(same_user_only),
      listener_(std::move(listener)),
      wake_(std::move(wake)) {}

ShmServer::~ShmServer() { Stop(); }

void ShmServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    // Wakes every connection thread: a blocked receive sees the end of the stream.
    for (Connection& c : connections_) {
      if (c.socket) shutdown(c.socket.get(), SHUT_RDWR);
    }
  }
  const uint64_t one = 1;
  (void)!write(wake_.get(), &one, sizeof(one));
  if (accept_thread_.joinable()) accept_thread_.join();
  listener_ = UniqueFd();
  std::list<Connection> connections;
  {
    absl::MutexLock lock(&mu_);
    connections.splice(connections.end(), connections_);
  }
  for (Connection& c : connections) {
    if (c.thread.joinable()) c.thread.join();
  }
}

void ShmServer::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("worker {}: shared-memory data plane: poll: {}", address_, std::strerror(errno));
      return;
    }
    if (fds[1].revents != 0) return;
    UniqueFd socket(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!socket) continue;  // the reader gave up already, or a transient error: the next one
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    // Threads of connections that ended are joined here, so the list stays as long as the open ones.
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->done) {
        it->thread.join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    if (static_cast<int>(connections_.size()) >= kMaxConnections) {
      spdlog::warn("worker {}: shared-memory data plane: {} connections open, refusing one more", address_,
                   connections_.size());
      continue;  // closing it: the reader falls back to gRPC or retries
    }
    Connection& c = connections_.emplace_back();
    c.socket = std::move(socket);
    c.thread = std::thread([this, &c] { Serve(&c); });
  }
}

absl::StatusOr<std::shared_ptr<uint8_t>> ShmServer::Handshake(int socket, size_t* region_bytes) {
  ShmHello hello;
  UniqueFd memfd;
  if (auto st = Receive(socket, &hello, &memfd, kHelloTimeout); !st.ok()) return st;
  absl::Status refused;
  // The peer's uid matters only under mutual TLS: otherwise no syscall, and no way to fail.
  const absl::StatusOr<uid_t> peer = same_user_only_ ? PeerUid(socket) : absl::StatusOr<uid_t>(geteuid());
  if (!peer.ok()) {
    refused = peer.status();
  } else if (!SameUserOrRoot(*peer, geteuid())) {
    refused = absl::PermissionDeniedError(
        absl::StrCat("the reader runs as uid ", *peer, ": with mutual TLS only the worker's user (uid ", geteuid(),
                     ") or root may read through shared memory, which skips the client certificate; read over gRPC"));
  } else if (hello.version() != kShmProtocolVersion) {
    refused = absl::FailedPreconditionError(
        absl::StrCat("protocol version ", hello.version(), " (the worker speaks ", kShmProtocolVersion, ")"));
  } else if (!token_.empty() && !SameToken(hello.auth_token(), token_)) {
    refused = absl::UnauthenticatedError("missing or wrong auth token");
  } else if (!memfd || hello.region_bytes() <= 0 || static_cast<uint64_t>(hello.region_bytes()) > kMaxRegionBytes) {
    refused = absl::InvalidArgumentError(
        absl::StrCat("a region of ", hello.region_bytes(), " bytes (at most ", kMaxRegionBytes, ", with its memfd)"));
  } else if (auto size = CheckSealedMemfd(memfd.get(), static_cast<size_t>(hello.region_bytes())); !size.ok()) {
    refused = size.status();
  }
  std::shared_ptr<uint8_t> region;
  if (refused.ok()) {
    *region_bytes = static_cast<size_t>(hello.region_bytes());
    void* p = mmap(nullptr, *region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    if (p == MAP_FAILED) {
      refused = absl::ResourceExhaustedError(absl::StrCat("mapping the region: ", std::strerror(errno)));
    } else {
      const size_t n = *region_bytes;
      region = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [n](uint8_t* q) { munmap(q, n); });
    }
  }
  ShmHelloResponse response;
  response.set_version(kShmProtocolVersion);
  if (!refused.ok()) {
    response.set_error(std::string(refused.message()));
    response.set_code(static_cast<int>(refused.code()));
  }
  if (auto st = Send(socket, response, -1, kSendTimeout); !st.ok()) return st;
  if (!refused.ok()) return refused;
  return region;
}

void ShmServer::Serve(Connection* c) {
  const int socket = c->socket.get();
  size_t region_bytes = 0;
  auto region = Handshake(socket, &region_bytes);
  if (!region.ok()) {
    spdlog::warn("worker {}: shared-memory reader refused: {}", address_, region.status().ToString());
  }
  while (region.ok()) {
    ShmRequest request;
    // No deadline: a reader may pause; Stop() and the reader's exit end the wait.
    if (!Receive(socket, &request, nullptr, absl::InfiniteDuration()).ok()) break;
    GetElementsRequest req = request.request();
    if (req.max_elements() <= 0 || req.max_elements() > kMaxElementsPerResponse) {
      req.set_max_elements(kMaxElementsPerResponse);
    }
    ShmResponse response;
    UniqueFd overflow;
    absl::StatusOr<GetElementsResult> result = endpoint_->GetElementsInProcess(req);
    absl::Status st = result.status();
    if (st.ok()) {
      response.set_end_of_sequence(result->end_of_sequence);
      response.set_first_index(result->first_index);
      response.set_elements_skipped(result->elements_skipped);
      for (const SplitRun& run : result->split_runs) *response.add_split_runs() = run;
      const size_t bytes = FramesBytes(result->elements);
      const bool fits = request.offset() >= 0 && request.capacity() >= 0 &&
                        static_cast<uint64_t>(request.offset()) <= region_bytes &&
                        static_cast<uint64_t>(request.capacity()) <= region_bytes - request.offset() &&
                        bytes <= static_cast<uint64_t>(request.capacity()) && request.offset() % 8 == 0;
      if (fits) {
        st = WriteFrames(result->elements, region->get() + request.offset(), &response);
      } else if (!result->elements.empty()) {
        auto fd = WriteOverflow(result->elements, bytes, &response);
        if (fd.ok()) overflow = *std::move(fd);
        st = fd.status();
      }
    }
    if (!st.ok()) {
      response = ShmResponse();
      response.set_code(static_cast<int>(st.code()));
      response.set_message(std::string(st.message()));
    }
    if (!Send(socket, response, overflow.get(), kSendTimeout).ok()) break;
  }
  // The reader's region is unmapped with `region`; the socket is closed now (an idle worker holds
  // no descriptor of a reader that left). Under the lock: Stop() shuts sockets down.
  if (region.ok()) region->reset();
  absl::MutexLock lock(&mu_);
  c->socket = UniqueFd();
  c->done = true;
}

}  // namespace tfdata::service::shm
