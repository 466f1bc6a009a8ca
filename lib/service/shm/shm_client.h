// The reader's side of the shared-memory data plane: the "shm" DataTransferClient, and "auto",
// which picks the fastest plane that reaches a worker: "local" (a worker of this process), else
// "shm" (a worker of this host that serves it), else "grpc".
//
// A client holds one connection to its worker, with its region (shm_region.h), and makes one call
// at a time: concurrent calls wait their turn. That keeps what the gRPC plane's single HTTP/2
// connection gives: a worker serves a request only after the reader received the response before
// it, so a split the worker counts delivered (it served an element of a later split) did reach
// the reader, and a worker killed mid-stream loses no more than the splits it counts lost. (Two
// connections could send a later response before an earlier one, and a worker killed between
// them would lose elements of a split it had counted delivered.) Calls cost microseconds here, so
// little is lost by not overlapping them. A connection that fails is dropped and the call returns
// UNAVAILABLE (the worker is gone) or DEADLINE_EXCEEDED; the next call connects again.
// Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/shm/shm_region.h"
#include "lib/service/shm/shm_socket.h"

namespace tfdata::service::shm {

// What a reader presents and expects.
struct ShmCredentials {
  std::string token;  // the worker's auth token ("" when it has none)
  // The reader holds a client certificate (mutual TLS): a worker that would refuse this reader
  // for its user (SameUserOrRoot, shm_socket.h) is not offered shared memory; "auto" then picks
  // gRPC, where the certificate is checked.
  bool same_user_only = false;
};

class ShmDataTransferClient final : public DataTransferClient {
 public:
  // Each connection's region: room for four default-sized responses (Reader asks for 16 MiB).
  static constexpr size_t kDefaultRegionBytes = 64 << 20;

  // Connects once, to check that the worker serves this plane on this host (UNAVAILABLE when it
  // does not, or is on another host; PERMISSION_DENIED when `credentials.same_user_only` and the
  // worker runs as another user); keeps that connection for the first call. Does not wait for
  // the worker: the hello (token, region) goes with the first call, so a worker that hangs
  // cannot hold up the reader's heartbeat, which makes clients. A wrong token is then that
  // call's UNAUTHENTICATED.
  static absl::StatusOr<std::unique_ptr<ShmDataTransferClient>> Connect(const std::string& address,
                                                                        ShmCredentials credentials,
                                                                        size_t region_bytes = kDefaultRegionBytes);
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) override;

 private:
  struct Connection {
    UniqueFd socket;
    std::shared_ptr<ReaderRegion> region;  // null until the hello was answered
  };
  ShmDataTransferClient(std::string address, ShmCredentials credentials, size_t region_bytes)
      : address_(std::move(address)), credentials_(std::move(credentials)), region_bytes_(region_bytes) {}
  absl::StatusOr<std::unique_ptr<Connection>> Open() const;
  absl::Status Hello(Connection& c) const;
  absl::StatusOr<GetElementsResult> Call(Connection& c, const GetElementsRequest& req, bool* broken) const;
  absl::StatusOr<GetElementsResult> GetElementsLocked(const GetElementsRequest& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string address_;
  const ShmCredentials credentials_;
  const size_t region_bytes_;
  absl::Mutex mu_;                                               // held through each call
  std::unique_ptr<Connection> connection_ ABSL_GUARDED_BY(mu_);  // null: connect at the next call
};

// Registers "shm" and "auto" (DataTransferClient's registry). `credentials` gives what to present
// (called for each new client). Idempotent: the last registration wins.
void RegisterShmTransports(std::function<ShmCredentials()> credentials);

}  // namespace tfdata::service::shm
