#include "lib/service/shm/shm_client.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/shm/shm_frames.h"
#include "proto/shm.pb.h"

namespace tfdata::service::shm {
namespace {

constexpr absl::Duration kHelloTimeout = absl::Seconds(10);
// The worker may wait up to the request's timeout for an element; allow for the answer on top
// (the gRPC plane's margin).
constexpr absl::Duration kCallMargin = absl::Seconds(10);

absl::Status Prefixed(const std::string& address, const absl::Status& st) {
  return absl::Status(st.code(), absl::StrCat("worker ", address, " (shared memory): ", st.message()));
}

// Maps a worker's overflow memfd; the Buffer unmaps it when the last tensor goes.
absl::StatusOr<std::shared_ptr<Buffer>> MapOverflow(int fd) {
  auto size = CheckSealedMemfd(fd, 0);
  if (!size.ok()) return size.status();
  if (*size == 0) return Buffer::Allocate(0);
  // Private and writable: a consumer may change its tensors in place (copy on write).
  void* p = mmap(nullptr, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("mapping a response of ", *size, " bytes: ", std::strerror(errno)));
  }
  const size_t n = *size;
  std::shared_ptr<const void> mapping(p, [n](const void* q) { munmap(const_cast<void*>(q), n); });
  return Buffer::Wrap(static_cast<const uint8_t*>(p), n, std::move(mapping));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShmDataTransferClient>> ShmDataTransferClient::Connect(const std::string& address,
                                                                                      ShmCredentials credentials,
                                                                                      size_t region_bytes) {
  std::unique_ptr<ShmDataTransferClient> client(
      new ShmDataTransferClient(address, std::move(credentials), region_bytes));
  auto c = client->Open();
  if (!c.ok()) return c.status();
  absl::MutexLock lock(&client->mu_);
  client->connection_ = *std::move(c);
  return client;
}

absl::StatusOr<std::unique_ptr<ShmDataTransferClient::Connection>> ShmDataTransferClient::Open() const {
  auto c = std::make_unique<Connection>();
  auto socket = shm::Connect(address_);
  if (!socket.ok()) return socket.status();
  c->socket = *std::move(socket);
  if (credentials_.same_user_only) {
    auto worker = PeerUid(c->socket.get());
    if (!worker.ok()) return Prefixed(address_, worker.status());
    if (!SameUserOrRoot(geteuid(), *worker)) {
      return absl::PermissionDeniedError(absl::StrCat(
          "worker ", address_, " (shared memory): it runs as uid ", *worker, " and this reader as uid ", geteuid(),
          ": with a client certificate (mutual TLS), shared memory is only for the worker's user or root; read over "
          "gRPC (--transfer grpc or auto)"));
    }
  }
  return c;
}

absl::Status ShmDataTransferClient::Hello(Connection& c) const {
  auto region = ReaderRegion::Create(region_bytes_);
  if (!region.ok()) return Prefixed(address_, region.status());
  ShmHello hello;
  hello.set_version(kShmProtocolVersion);
  hello.set_auth_token(credentials_.token);
  hello.set_region_bytes(static_cast<int64_t>((*region)->size()));
  if (auto st = Send(c.socket.get(), hello, (*region)->fd(), kHelloTimeout); !st.ok()) return Prefixed(address_, st);
  ShmHelloResponse response;
  if (auto st = Receive(c.socket.get(), &response, nullptr, kHelloTimeout); !st.ok()) return Prefixed(address_, st);
  if (!response.error().empty()) {
    const auto code = static_cast<absl::StatusCode>(response.code());
    return Prefixed(address_, absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kFailedPrecondition : code,
                                           response.error()));
  }
  c.region = *std::move(region);
  return absl::OkStatus();
}

absl::StatusOr<GetElementsResult> ShmDataTransferClient::GetElements(const GetElementsRequest& req) {
  absl::MutexLock lock(&mu_);
  return GetElementsLocked(req);
}

absl::StatusOr<GetElementsResult> ShmDataTransferClient::GetElementsLocked(const GetElementsRequest& req) {
  if (connection_ == nullptr) {
    auto opened = Open();
    if (!opened.ok()) return opened.status();
    connection_ = *std::move(opened);
  }
  if (connection_->region == nullptr) {
    if (auto st = Hello(*connection_); !st.ok()) {
      connection_.reset();
      return st;
    }
  }
  bool broken = false;
  absl::StatusOr<GetElementsResult> result = Call(*connection_, req, &broken);
  if (broken) connection_.reset();
  return result;
}

absl::StatusOr<GetElementsResult> ShmDataTransferClient::Call(Connection& c, const GetElementsRequest& req,
                                                              bool* broken) const {
  const size_t want = req.max_bytes() > 0 ? static_cast<size_t>(req.max_bytes()) + (64 << 10) : c.region->size();
  const ReaderRegion::Span span = c.region->Reserve(want);
  ShmRequest request;
  *request.mutable_request() = req;
  request.set_offset(static_cast<int64_t>(span.offset));
  request.set_capacity(static_cast<int64_t>(span.capacity));
  const absl::Duration timeout = absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000) + kCallMargin;
  ShmResponse response;
  UniqueFd overflow;
  absl::Status st = Send(c.socket.get(), request, -1, kCallMargin);
  if (st.ok()) st = Receive(c.socket.get(), &response, &overflow, timeout);
  if (!st.ok()) {
    *broken = true;  // out of step with the worker, or the worker is gone
    return Prefixed(address_, st);
  }
  if (response.code() != 0) {
    // The worker's own error (a pipeline's, NOT_FOUND for a task): its message as is, as gRPC
    // passes it on.
    const auto code = static_cast<absl::StatusCode>(response.code());
    return absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code, response.message());
  }
  std::shared_ptr<Buffer> frames;
  if (response.overflow()) {
    if (!overflow)
      return absl::DataLossError(absl::StrCat("worker ", address_, ": an overflow response without its memfd"));
    auto mapped = MapOverflow(overflow.get());
    if (!mapped.ok()) return Prefixed(address_, mapped.status());
    frames = *std::move(mapped);
  } else {
    if (overflow) return absl::DataLossError(absl::StrCat("worker ", address_, ": an unexpected memfd"));
    auto used = FramesExtent(response, span.capacity);
    if (!used.ok()) {
      *broken = true;  // a worker that writes outside its span is not to be trusted with the region again
      return Prefixed(address_, used.status());
    }
    frames = *used > 0 ? c.region->Commit(span.offset, *used) : Buffer::Allocate(0);
  }
  auto result = DecodeShmResponse(response, std::move(frames));
  if (!result.ok()) return Prefixed(address_, result.status());
  return result;
}

void RegisterShmTransports(std::function<ShmCredentials()> credentials) {
  RegisterTransport("shm",
                    [credentials](const std::string& address) -> absl::StatusOr<std::unique_ptr<DataTransferClient>> {
                      auto c = ShmDataTransferClient::Connect(address, credentials());
                      if (!c.ok()) return c.status();
                      return std::unique_ptr<DataTransferClient>(*std::move(c));
                    });
  RegisterTransport("auto",
                    [credentials](const std::string& address) -> absl::StatusOr<std::unique_ptr<DataTransferClient>> {
                      if (FindLocalWorker(address) != nullptr) return MakeDataTransferClient("local", address);
                      auto c = ShmDataTransferClient::Connect(address, credentials());
                      if (c.ok()) return std::unique_ptr<DataTransferClient>(*std::move(c));
                      return MakeDataTransferClient("grpc", address);
                    });
}

}  // namespace tfdata::service::shm
