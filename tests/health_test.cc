// The standard gRPC health service on dispatcher and worker (lib/service/grpc/server.h), called
// as a probe would (a generic stub and the health protocol's bytes: no tfdata code on the client
// side): NOT_SERVING while a fault-tolerant dispatcher replays its journal (and its RPCs
// UNAVAILABLE), SERVING once it serves, for "" and for the tfdata services.
#include <catch2/catch.hpp>
#include <future>

#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/grpc/server.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::service;

namespace {

// grpc.health.v1.HealthCheckResponse.ServingStatus
constexpr int kServing = 1, kNotServing = 2;

// Calls grpc.health.v1.Health/Check for `service`: its status, or the call's error code.
// HealthCheckRequest is `string service = 1`; the response `ServingStatus status = 1`.
absl::StatusOr<int> HealthCheck(const std::string& address, const std::string& service) {
  std::string request;
  if (!service.empty()) {
    request.push_back(0x0A);
    request.push_back(static_cast<char>(service.size()));
    request += service;
  }
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(request);
  grpc::ByteBuffer req(&slice, 1), resp;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &req, &resp,
                 [&](grpc::Status s) { done.set_value(std::move(s)); });
  grpc::Status status = done.get_future().get();
  if (!status.ok()) return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  std::vector<grpc::Slice> slices;
  if (!resp.Dump(&slices).ok()) return absl::DataLossError("unreadable response");
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes)) return absl::DataLossError("not a protobuf message");
  for (int i = 0; i < fields.field_count(); ++i) {
    if (fields.field(i).number() == 1) return static_cast<int>(fields.field(i).varint());
  }
  return 0;  // UNKNOWN: the default value is not sent
}

}  // namespace

TEST_CASE("health: a fault-tolerant dispatcher is NOT_SERVING while it replays its journal, then SERVING",
          "[health][cluster]") {
  testing::TempDir dir;
  DispatcherConfig config = testing::TestCluster::FastConfig();
  config.work_dir = dir.path() + "/work";
  config.fault_tolerant = true;
  std::string dataset_id;
  {
    DispatcherServer first(config);
    REQUIRE(first.Start("127.0.0.1", 0).ok());
    GrpcDispatcherClient client("127.0.0.1:" + std::to_string(first.port()));
    RegisterDatasetRequest req;
    req.mutable_pipeline()->add_op()->mutable_range()->set_stop(3);
    RegisterDatasetResponse resp;
    REQUIRE(client.RegisterDataset(req, &resp).ok());
    dataset_id = resp.dataset_id();
  }
  DispatcherServer server(config);
  REQUIRE(server.Listen("127.0.0.1", 0).ok());
  const std::string address = "127.0.0.1:" + std::to_string(server.port());
  CHECK(HealthCheck(address, "").value_or(-1) == kNotServing);
  CHECK(HealthCheck(address, "tfdata.service.DispatcherService").value_or(-1) == kNotServing);
  GrpcDispatcherClient client(address);
  GetDatasetRequest get;
  get.set_dataset_id(dataset_id);
  GetDatasetResponse got;
  const absl::Status replaying = client.GetDataset(get, &got);
  CHECK(absl::IsUnavailable(replaying));
  CHECK(replaying.message().find("replaying its journal") != std::string::npos);

  REQUIRE(server.Serve().ok());
  CHECK(HealthCheck(address, "").value_or(-1) == kServing);
  CHECK(HealthCheck(address, "tfdata.service.DispatcherService").value_or(-1) == kServing);
  CHECK(absl::IsNotFound(HealthCheck(address, "no.such.Service").status()));
  CHECK(client.GetDataset(get, &got).ok());  // the replayed dataset
  server.Stop();
  CHECK_FALSE(HealthCheck(address, "").ok());
}

TEST_CASE("health: a worker is SERVING for its service", "[health][cluster]") {
  testing::TestCluster cluster(1);
  const std::string address = cluster.worker(0).address();
  CHECK(HealthCheck(address, "").value_or(-1) == kServing);
  CHECK(HealthCheck(address, "tfdata.service.WorkerService").value_or(-1) == kServing);
  CHECK(HealthCheck(cluster.dispatcher_address(), "").value_or(-1) == kServing);
}
