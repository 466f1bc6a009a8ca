#include "lib/service/common/data_transfer.h"

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "lib/service/common/local_workers.h"

namespace tfdata::service {
namespace {

// Calls a worker of this process directly. Holds only the address, so a worker that stops (or is
// replaced) is noticed on the next call.
class LocalDataTransferClient final : public DataTransferClient {
 public:
  explicit LocalDataTransferClient(std::string address) : address_(std::move(address)) {}
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) override {
    std::shared_ptr<LocalEndpoint> worker = FindLocalWorker(address_);
    if (worker == nullptr) return absl::UnavailableError(absl::StrCat("worker ", address_, ": not running"));
    return worker->GetElementsInProcess(req);
  }

 private:
  const std::string address_;
};

absl::StatusOr<std::unique_ptr<DataTransferClient>> MakeLocal(const std::string& address) {
  if (FindLocalWorker(address) == nullptr) {
    return absl::NotFoundError(absl::StrCat("data transfer \"local\": no worker of this process at ", address));
  }
  return std::make_unique<LocalDataTransferClient>(address);
}

absl::Mutex g_mu;
// A function-local static, so that registrations from other files' static initializers find it.
std::map<std::string, TransportFactory>& Registry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  static auto* registry = new std::map<std::string, TransportFactory>{{"local", MakeLocal}};  // never destroyed
  return *registry;
}

}  // namespace

void RegisterTransport(const std::string& name, TransportFactory factory) {
  absl::MutexLock lock(&g_mu);
  Registry()[name] = std::move(factory);
}

std::vector<std::string> TransportNames() {
  absl::MutexLock lock(&g_mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

absl::StatusOr<std::unique_ptr<DataTransferClient>> MakeDataTransferClient(const std::string& protocol,
                                                                           const std::string& address) {
  TransportFactory factory;
  {
    absl::MutexLock lock(&g_mu);
    auto it = Registry().find(protocol);
    if (it == Registry().end()) {
      std::vector<std::string> names;
      for (const auto& [name, f] : Registry()) names.push_back(name);
      return absl::InvalidArgumentError(absl::StrCat("unknown data transfer protocol \"", protocol, "\" (expected ",
                                                     absl::StrJoin(names, " or "), ")"));
    }
    factory = it->second;
  }
  return factory(address);
}

}  // namespace tfdata::service
