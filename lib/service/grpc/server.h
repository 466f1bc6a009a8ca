// Servers: a Dispatcher or Worker core together with the gRPC server that exposes it. Used by the
// `dispatcher`, `worker` and `local` subcommands and by the tests' in-process cluster.
//
// Start() binds (port 0 picks a free port) and returns once the server accepts calls; Stop() (also
// run by the destructor) shuts the gRPC server down, cancelling calls in flight, then stops the
// core. Not thread-safe: one owner starts and stops.
//
// Security (security.h; null: plaintext, no token): a server with a certificate speaks TLS only,
// with a CA it also requires client certificates, and with a token it refuses calls without it.
//
// A worker also serves readers on its own host through shared memory (WorkerServerOptions
// .shared_memory; the "shm" plane, lib/service/shm), with the same token.
//
// Both servers also serve the standard gRPC health service (grpc.health.v1.Health, for probes:
// SERVING for "" and for the tfdata service once it answers, NOT_SERVING while a dispatcher
// replays its journal and once Stop begins) and server reflection (grpc.reflection.v1alpha, so
// that grpcurl and similar tools can call the RPCs). Neither asks for the token; TLS applies.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/grpc/grpc_worker.h"
#include "lib/service/shm/shm_server.h"
#include "lib/service/worker/worker.h"

namespace tfdata::service {

class DispatcherServer {
 public:
  explicit DispatcherServer(DispatcherConfig config, std::shared_ptr<const Security> security = nullptr)
      : dispatcher_(config), security_(std::move(security)), service_(&dispatcher_, security_) {}
  ~DispatcherServer() { Stop(); }

  // `host` is the interface to bind ("0.0.0.0", "127.0.0.1", "[::]"). Listen, then Serve.
  absl::Status Start(const std::string& host, int port);
  // Binds and answers: health NOT_SERVING, every tfdata RPC UNAVAILABLE (callers retry).
  absl::Status Listen(const std::string& host, int port);
  // Replays the journal (fault-tolerant dispatchers), then serves: health SERVING. On an error
  // the server keeps answering NOT_SERVING; Stop it.
  absl::Status Serve();
  void Stop();
  int port() const { return port_; }
  Dispatcher& dispatcher() { return dispatcher_; }
  // Before Start: every RPC's method and status code go to `observer` (metrics).
  void set_rpc_observer(GrpcDispatcherService::RpcObserver observer) { service_.set_rpc_observer(std::move(observer)); }

 private:
  Dispatcher dispatcher_;
  const std::shared_ptr<const Security> security_;
  GrpcDispatcherService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

struct WorkerServerOptions {
  std::string dispatcher_address;  // host:port
  std::string host = "0.0.0.0";    // interface to bind
  int port = 0;
  // The address readers use, with "%port%" standing for the bound port.
  std::string worker_address = "localhost:%port%";
  WorkerConfig config;  // its worker_address is filled in by Start()
  // Both roles: the worker's server, and its client of the dispatcher (the CA verifies the
  // dispatcher, the certificate is presented to it, the token is sent).
  std::shared_ptr<const Security> security;
  // Also serve readers of this host through shared memory (lib/service/shm), under the
  // advertised address. When another process holds that name, the worker serves gRPC only.
  bool shared_memory = true;
};

class WorkerServer {
 public:
  explicit WorkerServer(WorkerServerOptions options) : options_(std::move(options)) {}
  ~WorkerServer() { Stop(); }

  absl::Status Start();
  // Stops at once, as a crash would look to the dispatcher (Worker::Stop).
  void Stop();
  // Leaves the cluster first (Worker::Leave: the dispatcher removes it at once), then stops.
  void Leave();
  int port() const { return port_; }
  const std::string& address() const { return address_; }
  Worker* worker() { return worker_.get(); }

 private:
  WorkerServerOptions options_;
  std::shared_ptr<Worker> worker_;
  std::unique_ptr<GrpcWorkerService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<shm::ShmServer> shm_server_;
  int port_ = 0;
  std::string address_;
};

}  // namespace tfdata::service
