#include "lib/service/grpc/grpc_worker.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "lib/core/status_macros.h"
#include "lib/service/common/elements_wire.h"
#include "lib/service/common/host_util.h"
#include "lib/service/grpc/grpc_util.h"
#include "lib/service/shm/shm_client.h"

namespace tfdata::service {
namespace {

constexpr int kInitialThreads = 4;
constexpr int kMaxThreads = 64;
constexpr char kGetElementsMethod[] = "/tfdata.service.WorkerService/GetElements";

// Small messages (requests) as one contiguous string.
std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// A slice that references bytes kept alive by `owner` rather than copying them.
grpc::Slice ReferenceSlice(const void* data, size_t size, const std::shared_ptr<const void>& owner) {
  return grpc::Slice(
      const_cast<void*>(data), size, [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); },
      new std::shared_ptr<const void>(owner));
}

}  // namespace

// One incoming call: its tag comes back from the queue when it is matched, then when it finished.
class GrpcWorkerService::Call {
 public:
  grpc::ServerContext ctx;
  grpc::ByteBuffer request;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder{&ctx};
  bool finishing = false;
};

GrpcWorkerService::~GrpcWorkerService() { Shutdown(); }

void GrpcWorkerService::Start(std::unique_ptr<grpc::ServerCompletionQueue> cq) {
  cq_ = std::move(cq);
  absl::MutexLock lock(&mu_);
  for (int i = 0; i < kInitialThreads; ++i) AddThreadLocked();
}

void GrpcWorkerService::AddThreadLocked() {
  if (shutting_down_) return;
  AcceptOneLocked();  // one call waiting to be matched per thread
  threads_.emplace_back([this] { Loop(); });
}

void GrpcWorkerService::AcceptOneLocked() {
  if (shutting_down_) return;
  auto* call = new Call();
  ++live_calls_;
  RequestGetElements(&call->ctx, &call->request, &call->responder, cq_.get(), cq_.get(), call);
}

void GrpcWorkerService::Shutdown() {
  if (cq_ == nullptr) return;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    // After grpc::Server::Shutdown every queued tag comes back (unmatched calls with ok=false), so
    // once no Call is left nothing can be queued any more and the queue may be shut down.
    auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return live_calls_ == 0; };
    mu_.Await(absl::Condition(&drained));
    threads.swap(threads_);
  }
  cq_->Shutdown();
  for (auto& t : threads) t.join();
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
  }
  cq_.reset();
}

void GrpcWorkerService::Loop() {
  void* tag;
  bool ok;
  while (cq_->Next(&tag, &ok)) {
    auto* call = static_cast<Call*>(tag);
    if (!ok || call->finishing) {
      delete call;
      absl::MutexLock lock(&mu_);
      --live_calls_;
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      AcceptOneLocked();  // keep a call waiting while this one is served
      if (++busy_ == static_cast<int>(threads_.size()) && busy_ < kMaxThreads) AddThreadLocked();
    }
    Serve(call);
    absl::MutexLock lock(&mu_);
    --busy_;
  }
}

void GrpcWorkerService::Serve(Call* call) {
  call->finishing = true;
  if (grpc::Status auth = CheckAuthToken(call->ctx, security_.get()); !auth.ok()) {
    return call->responder.FinishWithError(auth, call);
  }
  GetElementsRequest req;
  if (!req.ParseFromString(Flatten(call->request))) {
    call->responder.FinishWithError(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "malformed GetElementsRequest"),
                                    call);
    return;
  }
  auto result = worker_->GetElements(req, /*remote_peer=*/!IsPeerOnThisHost(call->ctx.peer()));
  if (!result.ok()) return call->responder.FinishWithError(ToGrpcStatus(result.status()), call);
  auto encoded = EncodeElements(*std::move(result));
  if (!encoded.ok()) return call->responder.FinishWithError(ToGrpcStatus(encoded.status()), call);
  if (const auto& c = encoded->compression; c.tried) {
    worker_->CountCompression(c.sent_compressed, c.plain_bytes, c.compressed_bytes);
  }
  std::vector<grpc::Slice> slices;
  slices.reserve(encoded->ranges.size());
  for (const auto& [data, size] : encoded->ranges) slices.push_back(ReferenceSlice(data, size, encoded->keep_alive));
  grpc::ByteBuffer response(slices.data(), slices.size());
  call->responder.Finish(response, grpc::Status::OK, call);
}

GrpcDataTransferClient::GrpcDataTransferClient(const std::string& address, std::shared_ptr<const Security> security)
    : address_(address), security_(std::move(security)), stub_(MakeChannel(address, security_.get())) {}

absl::StatusOr<GetElementsResult> GrpcDataTransferClient::GetElements(const GetElementsRequest& req) {
  grpc::ClientContext ctx;
  // The worker may wait up to the request's timeout for an element; allow for transfer on top.
  SetTimeout(&ctx, absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000) + absl::Seconds(10));
  AddAuthToken(&ctx, security_.get());
  grpc::Slice request_slice(req.SerializeAsString());
  grpc::ByteBuffer request(&request_slice, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub_.UnaryCall(&ctx, kGetElementsMethod, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (auto st = FromGrpcStatus(status, "worker " + address_); !st.ok())
    return ExplainSecurityError(st, security_.get());
  std::vector<grpc::Slice> slices;
  if (response.Valid() && !response.Dump(&slices).ok()) {
    return absl::DataLossError(absl::StrCat("worker ", address_, ": unreadable response"));
  }
  std::vector<std::span<const uint8_t>> pieces;
  pieces.reserve(slices.size());
  for (const grpc::Slice& s : slices) pieces.emplace_back(s.begin(), s.size());
  auto result = DecodeElements(pieces);
  if (!result.ok()) return absl::DataLossError(absl::StrCat("worker ", address_, ": ", result.status().message()));
  return result;
}

void RegisterGrpcTransport() {
  // Once: a function-local static is initialized exactly once, even with concurrent callers.
  static const bool registered = [] {
    RegisterTransport("grpc", [](const std::string& address) -> absl::StatusOr<std::unique_ptr<DataTransferClient>> {
      return std::make_unique<GrpcDataTransferClient>(address, GetClientSecurity());
    });
    // "shm" and "auto" present the same token as gRPC calls; a reader with a client certificate
    // expects mutual TLS, which shared memory cannot check (ShmCredentials).
    shm::RegisterShmTransports([] {
      auto security = GetClientSecurity();
      shm::ShmCredentials credentials;
      if (security) {
        credentials.token = security->token;
        credentials.same_user_only = !security->cert_pem.empty();
      }
      return credentials;
    });
    return true;
  }();
  (void)registered;
}

namespace {

// Also at static initialization, for programs that link this file for its servers alone.
const bool kGrpcTransportRegistered = (RegisterGrpcTransport(), true);

}  // namespace

}  // namespace tfdata::service
