// The worker's side of the shared-memory data plane: serves GetElements to readers on the
// worker's own host over its abstract Unix socket (shm_socket.h), writing the elements into each
// reader's region (shm_region.h) or, when they do not fit, into a memfd of its own.
//
// One thread accepts; each connection has a thread (readers hold one connection per task they
// read, and a call may wait for elements). Connections beyond kMaxConnections are refused.
//
// Ownership and lifetime: the server calls `endpoint` (the worker) from its threads, so the
// endpoint must outlive it; Stop() (also run by the destructor) closes every connection and joins
// every thread. Stop the worker first: calls waiting for elements then return at once.
// Start and Stop are called by one owner; the rest is internal.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/shm/shm_socket.h"

namespace tfdata::service::shm {

class ShmServer {
 public:
  static constexpr int kMaxConnections = 256;
  // The largest region a reader may offer (its memfd is mapped for the connection's life).
  static constexpr size_t kMaxRegionBytes = size_t{1} << 30;

  // Listens under the name for `address` (the address the worker advertises) and serves calls
  // with `endpoint`. `token`: the auth token a reader's hello must carry ("" accepts any reader
  // of this host, as a plaintext gRPC port on loopback does). `same_user_only` (the worker
  // requires client certificates): refuse readers that SameUserOrRoot (shm_socket.h) does not pass.
  static absl::StatusOr<std::unique_ptr<ShmServer>> Start(LocalEndpoint* endpoint, std::string address,
                                                          std::string token, bool same_user_only = false);
  ~ShmServer();
  ShmServer(const ShmServer&) = delete;
  ShmServer& operator=(const ShmServer&) = delete;
  void Stop();

 private:
  struct Connection {
    UniqueFd socket;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  ShmServer(LocalEndpoint* endpoint, std::string address, std::string token, bool same_user_only, UniqueFd listener,
            UniqueFd wake);
  void AcceptLoop();
  void Serve(Connection* c);
  // The hello; returns the reader's region mapped writable, or why not (sent to the reader too).
  absl::StatusOr<std::shared_ptr<uint8_t>> Handshake(int socket, size_t* region_bytes);

  LocalEndpoint* const endpoint_;
  const std::string address_;
  const std::string token_;
  const bool same_user_only_;
  UniqueFd listener_;    // closed by Stop(): a stopped worker refuses connections at once
  const UniqueFd wake_;  // an eventfd: Stop() makes the accept loop return
  std::thread accept_thread_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tfdata::service::shm
