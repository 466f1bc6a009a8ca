// The data plane: how a reader fetches elements from a worker. Transports are registered by name
// (a registry, as Arrow Flight's TransportRegistry):
//   "grpc"   a remote worker's WorkerService (lib/service/grpc/grpc_worker.cc registers it)
//   "local"  a worker in this process, called directly: no serialization, no copies (built in;
//            workers list themselves in local_workers.h)
//   "shm"    a worker on this host, through shared memory (lib/service/shm; registered with "grpc")
//   "auto"   the first of local, shm, grpc that reaches the worker
// MakeDataTransferClient picks one by name; the transport tests run against every registered one.
//
// Clients are thread-safe; each call is bounded in time by the request's timeout plus a margin.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/tensor.h"
#include "proto/service.pb.h"

namespace tfdata::service {

struct GetElementsResult {
  std::vector<Element> elements;
  bool end_of_sequence = false;
  // Position of elements[0] in the task's stream (see GetElementsResponse.first_index).
  int64_t first_index = 0;
  // Cross-trainer cache: elements the reader's cursor skipped (they had left the window).
  int64_t elements_skipped = 0;
  // Exactly-once tasks: where the elements come from (GetElementsResponse.split_runs).
  std::vector<SplitRun> split_runs;
  // Set by the worker: the transport should send the elements compressed (the "local" data plane
  // ignores it: it copies nothing).
  bool compress = false;
};

class DataTransferClient {
 public:
  virtual ~DataTransferClient() = default;
  // UNAVAILABLE when the worker cannot be reached; NOT_FOUND when it does not (or no longer) run the task.
  virtual absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) = 0;
};

// A client of the registered transport `protocol` ("grpc", "local", ...). InvalidArgument for a
// name not registered; NotFound for "local" when no worker of this process listens at `address`.
absl::StatusOr<std::unique_ptr<DataTransferClient>> MakeDataTransferClient(const std::string& protocol,
                                                                           const std::string& address);

// Makes a client of one transport for the worker at `address`.
using TransportFactory = std::function<absl::StatusOr<std::unique_ptr<DataTransferClient>>(const std::string& address)>;
// Registers (or replaces) the transport `name`. Thread-safe; usually run at static initialization.
void RegisterTransport(const std::string& name, TransportFactory factory);
// The registered transports' names, sorted.
std::vector<std::string> TransportNames();

}  // namespace tfdata::service
