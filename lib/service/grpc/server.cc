#include "lib/service/grpc/server.h"

#include <functional>
#include <mutex>

#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "lib/core/status_macros.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

// `cq`, when set, receives a completion queue for the services' async methods.
absl::StatusOr<std::unique_ptr<grpc::Server>> BuildServer(grpc::Service* service, const Security* security,
                                                          const std::string& host, int port, int* bound_port,
                                                          std::unique_ptr<grpc::ServerCompletionQueue>* cq = nullptr) {
  // Process-wide settings that the builder reads: every server gets the health and reflection services.
  static std::once_flag once;
  std::call_once(once, [] {
    grpc::EnableDefaultHealthCheckService(true);
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  });
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  // gRPC sets SO_REUSEPORT by default: a second server on a port in use would then start and
  // silently share the port with the first. Binding must fail instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(absl::StrCat(host, ":", port), MakeServerCredentials(security), bound_port);
  builder.RegisterService(service);
  if (cq != nullptr) *cq = builder.AddCompletionQueue();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    if (cq != nullptr && *cq != nullptr) {
      (*cq)->Shutdown();
      void* tag;
      bool ok;
      while ((*cq)->Next(&tag, &ok)) {
      }
      cq->reset();
    }
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (port in use, or the host is not an address of this machine)"));
  }
  return server;
}

// The health service's answer for "" and for `service` (its full name).
void SetServing(grpc::Server* server, const std::string& service, bool serving) {
  if (server == nullptr || server->GetHealthCheckService() == nullptr) return;
  server->GetHealthCheckService()->SetServingStatus("", serving);
  server->GetHealthCheckService()->SetServingStatus(service, serving);
}

// `drain` runs between grpc::Server::Shutdown and the server's destruction: async services drain
// their completion queues there (the server's own queued tags refer to it).
void Shutdown(std::unique_ptr<grpc::Server>& server, const std::function<void()>& drain = nullptr) {
  if (server == nullptr) return;
  // Probes see NOT_SERVING from here on (and a load balancer stops sending new calls).
  if (server->GetHealthCheckService() != nullptr) server->GetHealthCheckService()->Shutdown();
  // Calls in flight get a short grace period, then are cancelled: shutdown stays well under 1 s.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  if (drain) drain();
  server->Wait();
  server.reset();
}

}  // namespace

absl::Status DispatcherServer::Start(const std::string& host, int port) {
  TFD_RETURN_IF_ERROR(Listen(host, port));
  return Serve();
}

absl::Status DispatcherServer::Listen(const std::string& host, int port) {
  // Nobody sees the state half-recovered: the RPCs answer UNAVAILABLE until the replay is done.
  service_.set_serving(false);
  TFD_ASSIGN_OR_RETURN(server_, BuildServer(&service_, security_.get(), host, port, &port_));
  SetServing(server_.get(), DispatcherService::service_full_name(), false);
  return absl::OkStatus();
}

absl::Status DispatcherServer::Serve() {
  TFD_RETURN_IF_ERROR(dispatcher_.Recover());
  dispatcher_.Start();
  service_.set_serving(true);
  SetServing(server_.get(), DispatcherService::service_full_name(), true);
  return absl::OkStatus();
}

void DispatcherServer::Stop() {
  Shutdown(server_);
  dispatcher_.Stop();
}

absl::Status WorkerServer::Start() {
  auto dispatcher = std::make_unique<GrpcDispatcherClient>(options_.dispatcher_address, options_.security);
  worker_ = std::make_shared<Worker>(options_.config, std::move(dispatcher));
  service_ = std::make_unique<GrpcWorkerService>(worker_.get(), options_.security);
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  TFD_ASSIGN_OR_RETURN(server_,
                       BuildServer(service_.get(), options_.security.get(), options_.host, options_.port, &port_, &cq));
  service_->Start(std::move(cq));
  SetServing(server_.get(), WorkerService::service_full_name(), true);
  // The address readers use is known only once the port is bound; no task (and so no call) can
  // reach the worker before its first heartbeat, which Start() sends with this address.
  address_ = absl::StrReplaceAll(options_.worker_address, {{"%port%", absl::StrCat(port_)}});
  worker_->SetAddress(address_);
  if (options_.shared_memory) {
    // With mutual TLS, shared memory is only for readers that could read the worker's key anyway.
    const Security* security = options_.security.get();
    auto shm = shm::ShmServer::Start(worker_.get(), address_, security ? security->token : "",
                                     security && security->server_tls() && !security->ca_pem.empty());
    if (shm.ok()) {
      shm_server_ = *std::move(shm);
    } else {
      spdlog::warn("worker {}: no shared-memory data plane: {}", address_, std::string(shm.status().message()));
    }
  }
  worker_->Start();
  spdlog::info("worker {}: serving{}, dispatcher {}", address_, DescribeServerSecurity(options_.security.get()),
               options_.dispatcher_address);
  return absl::OkStatus();
}

void WorkerServer::Leave() {
  if (worker_) worker_->Leave();
  Stop();
}

void WorkerServer::Stop() {
  // The core first: its tasks stop, so calls waiting for elements return at once.
  if (worker_) worker_->Stop();
  if (shm_server_) shm_server_->Stop();
  Shutdown(server_, [this] { service_->Shutdown(); });
}

}  // namespace tfdata::service
