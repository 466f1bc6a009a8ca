#include "lib/service/grpc_worker.h"

#include "absl/strings/str_cat.h"
#include "lib/core/element_codec.h"
#include "lib/service/grpc_util.h"

namespace tfdata::service {

grpc::Status GrpcWorkerService::GetElements(grpc::ServerContext*, const GetElementsRequest* req,
                                            GetElementsResponse* resp) {
  auto result = worker_->GetElements(*req);
  if (!result.ok()) return ToGrpcStatus(result.status());
  for (const Element& e : result->elements) {
    std::string* frame = resp->add_elements();
    frame->reserve(EncodedSize(e));
    if (auto st = EncodeElement(e, frame); !st.ok()) return ToGrpcStatus(st);
  }
  resp->set_end_of_sequence(result->end_of_sequence);
  return grpc::Status::OK;
}

GrpcDataTransferClient::GrpcDataTransferClient(const std::string& address)
    : address_(address), stub_(WorkerService::NewStub(MakeChannel(address))) {}

absl::StatusOr<GetElementsResult> GrpcDataTransferClient::GetElements(const GetElementsRequest& req) {
  grpc::ClientContext ctx;
  // The worker may wait up to the request's timeout for an element; allow for transfer on top.
  SetTimeout(&ctx, absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000) + absl::Seconds(10));
  GetElementsResponse resp;
  if (auto st = FromGrpcStatus(stub_->GetElements(&ctx, req, &resp), "worker " + address_); !st.ok()) return st;
  GetElementsResult result;
  result.elements.reserve(resp.elements_size());
  for (int i = 0; i < resp.elements_size(); ++i) {
    auto e = DecodeElement(std::string_view(resp.elements(i)));
    if (!e.ok()) {
      return absl::DataLossError(absl::StrCat("worker ", address_, ": element ", i, " of a response: ",
                                              e.status().message()));
    }
    result.elements.push_back(*std::move(e));
  }
  result.end_of_sequence = resp.end_of_sequence();
  return result;
}

}  // namespace tfdata::service
