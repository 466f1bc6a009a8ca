// The in-process data plane's directory: the workers of this process, by the address they
// advertise. A worker adds itself when it starts and removes itself when it stops; the "local"
// transport and the readers' target-workers rule look workers up here, so that neither needs the
// Worker class (client/ does not depend on worker/). Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/service/common/data_transfer.h"

namespace tfdata::service {

// What the "local" transport calls: a worker of this process, without serialization or copies.
class LocalEndpoint {
 public:
  virtual ~LocalEndpoint() = default;
  virtual absl::StatusOr<GetElementsResult> GetElementsInProcess(const GetElementsRequest& req) = 0;
};

// The directory holds weak references: a worker that is destroyed without removing itself is
// simply not found.
void AddLocalWorker(const std::string& address, std::weak_ptr<LocalEndpoint> worker);
// Removes `address` when it names `worker` (or a worker that is gone): a newer worker at the same
// address stays.
void RemoveLocalWorker(const std::string& address, const LocalEndpoint* worker);
std::shared_ptr<LocalEndpoint> FindLocalWorker(const std::string& address);
// Whether this process runs any worker (target_workers auto reads locally then).
bool AnyLocalWorker();

}  // namespace tfdata::service
