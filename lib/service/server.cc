#include "lib/service/server.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

absl::StatusOr<std::unique_ptr<grpc::Server>> BuildServer(grpc::Service* service, const std::string& host, int port,
                                                          int* bound_port) {
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.AddListeningPort(absl::StrCat(host, ":", port), grpc::InsecureServerCredentials(), bound_port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || *bound_port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", host, ":", port,
                                               " (port in use, or the host is not an address of this machine)"));
  }
  return server;
}

void Shutdown(std::unique_ptr<grpc::Server>& server) {
  if (server == nullptr) return;
  // Calls in flight get a short grace period, then are cancelled: shutdown stays well under 1 s.
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server->Wait();
  server.reset();
}

}  // namespace

absl::Status DispatcherServer::Start(const std::string& host, int port) {
  auto server = BuildServer(&service_, host, port, &port_);
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  dispatcher_.Start();
  return absl::OkStatus();
}

void DispatcherServer::Stop() {
  Shutdown(server_);
  dispatcher_.Stop();
}

absl::Status WorkerServer::Start() {
  auto dispatcher = std::make_unique<GrpcDispatcherClient>(options_.dispatcher_address);
  worker_ = std::make_shared<Worker>(options_.config, std::move(dispatcher));
  service_ = std::make_unique<GrpcWorkerService>(worker_.get());
  auto server = BuildServer(service_.get(), options_.host, options_.port, &port_);
  if (!server.ok()) return server.status();
  server_ = *std::move(server);
  // The address readers use is known only once the port is bound; no task (and so no call) can
  // reach the worker before its first heartbeat, which Start() sends with this address.
  address_ = absl::StrReplaceAll(options_.worker_address, {{"%port%", absl::StrCat(port_)}});
  worker_->SetAddress(address_);
  worker_->Start();
  spdlog::info("worker {}: serving, dispatcher {}", address_, options_.dispatcher_address);
  return absl::OkStatus();
}

void WorkerServer::Stop() {
  Shutdown(server_);
  if (worker_) worker_->Stop();
}

}  // namespace tfdata::service
