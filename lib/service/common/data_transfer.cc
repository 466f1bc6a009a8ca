#include "lib/service/common/data_transfer.h"

#include "absl/strings/str_cat.h"
#include "lib/service/grpc/grpc_worker.h"
#include "lib/service/worker/worker.h"

namespace tfdata::service {
namespace {

// Calls a worker of this process directly. Holds only the address, so a worker that stops (or is
// replaced) is noticed on the next call.
class LocalDataTransferClient final : public DataTransferClient {
 public:
  explicit LocalDataTransferClient(std::string address) : address_(std::move(address)) {}
  absl::StatusOr<GetElementsResult> GetElements(const GetElementsRequest& req) override {
    std::shared_ptr<Worker> worker = Worker::FindLocal(address_);
    if (worker == nullptr) return absl::UnavailableError(absl::StrCat("worker ", address_, ": not running"));
    return worker->GetElements(req);
  }

 private:
  const std::string address_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DataTransferClient>> MakeDataTransferClient(const std::string& protocol,
                                                                           const std::string& address) {
  if (protocol == "grpc") return std::make_unique<GrpcDataTransferClient>(address);
  if (protocol == "local") {
    if (Worker::FindLocal(address) == nullptr) {
      return absl::NotFoundError(absl::StrCat("data transfer \"local\": no worker of this process at ", address));
    }
    return std::make_unique<LocalDataTransferClient>(address);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown data transfer protocol \"", protocol, "\" (expected grpc or local)"));
}

}  // namespace tfdata::service
