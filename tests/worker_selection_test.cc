// Worker tags and --target-workers, and compression through a real cluster.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <catch2/catch.hpp>

#include "lib/service/common/host_util.h"
#include "proto/service.grpc.pb.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

size_t AddTaggedWorker(TestCluster& cluster, std::vector<std::string> tags) {
  service::WorkerConfig config;
  config.tags = std::move(tags);
  cluster.set_worker_config(config);
  const size_t i = cluster.AddWorker();
  cluster.set_worker_config({});
  return i;
}

absl::StatusOr<std::vector<Element>> ReadWith(TestCluster& cluster, const std::string& ds, const std::string& tag,
                                              service::TargetWorkers target) {
  service::ReaderOptions o;
  o.dataset_id = ds;
  o.worker_tag = tag;
  o.target_workers = target;
  o.untargeted_timeout = absl::Milliseconds(300);
  auto r = cluster.NewReader(o);
  if (!r.ok()) return r.status();
  std::vector<Element> out;
  Element e;
  while (true) {
    auto more = (*r)->Next(&e);
    if (!more.ok()) return more.status();
    if (!*more) return out;
    out.push_back(e);
  }
}

}  // namespace

TEST_CASE("worker selection: readers can read only the workers with a tag", "[selection][cluster]") {
  TestCluster cluster(0);
  AddTaggedWorker(cluster, {"ssd", "rack1"});
  AddTaggedWorker(cluster, {"rack2"});
  cluster.AddWorker();
  const std::string ds = cluster.Register("op { range { stop: 10 } }");
  auto all = ReadWith(cluster, ds, "", service::TARGET_WORKERS_ANY);
  REQUIRE(all.ok());
  CHECK(all->size() == 30);
  auto ssd = ReadWith(cluster, ds, "ssd", service::TARGET_WORKERS_ANY);
  REQUIRE(ssd.ok());
  CHECK(Int64Scalars(*ssd) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto none = ReadWith(cluster, ds, "gpu", service::TARGET_WORKERS_ANY);
  REQUIRE(absl::IsFailedPrecondition(none.status()));
  CHECK(std::string(none.status().message()).find("with tag \"gpu\"") != std::string::npos);
}

TEST_CASE("worker selection: local and auto read this process's workers", "[selection][cluster]") {
  TestCluster cluster(2);
  const std::string ds = cluster.Register("op { range { stop: 10 } }");
  CHECK(service::ResolveTargetWorkers(service::TARGET_WORKERS_AUTO) == service::TARGET_WORKERS_LOCAL);
  CHECK(service::ResolveTargetWorkers(service::TARGET_WORKERS_ANY) == service::TARGET_WORKERS_ANY);
  for (auto target : {service::TARGET_WORKERS_LOCAL, service::TARGET_WORKERS_AUTO}) {
    auto local = ReadWith(cluster, ds, "", target);
    REQUIRE(local.ok());
    CHECK(local->size() == 20);
  }
}

TEST_CASE("worker selection: which addresses are local", "[selection]") {
  CHECK(service::IsThisHost("127.0.0.1:5000"));
  CHECK(service::IsThisHost("localhost:5000"));
  CHECK(service::IsThisHost("grpc://localhost:5000"));
  CHECK(service::IsThisHost("[::1]:5000"));
  CHECK_FALSE(service::IsThisHost("192.0.2.7:5000"));  // TEST-NET-1: never a real host
  CHECK_FALSE(service::IsThisHost("worker-17.example.com:5000"));
  CHECK(service::IsPeerOnThisHost("ipv4:127.0.0.1:43210"));
  CHECK(service::IsPeerOnThisHost("ipv6:[::1]:43210"));
  CHECK(service::IsPeerOnThisHost("ipv6:%5B::1%5D:43210"));
  CHECK(service::IsPeerOnThisHost("unix:/tmp/socket"));
  CHECK_FALSE(service::IsPeerOnThisHost("ipv4:192.0.2.7:43210"));
  // A reader on this host that reached the worker at one of the host's own interface addresses.
  ifaddrs* list = nullptr;
  REQUIRE(getifaddrs(&list) == 0);
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
    CHECK(service::IsPeerOnThisHost(std::string("ipv4:") + buf + ":43210"));
  }
  freeifaddrs(list);
  service::TaskInfo remote;
  remote.set_worker_address("192.0.2.7:5000");
  remote.add_worker_tags("ssd");
  CHECK(service::TaskTargeted(remote, service::TARGET_WORKERS_ANY, "ssd"));
  CHECK_FALSE(service::TaskTargeted(remote, service::TARGET_WORKERS_ANY, "hdd"));
  CHECK_FALSE(service::TaskTargeted(remote, service::TARGET_WORKERS_LOCAL, ""));
}

namespace {

int64_t MaxTask(service::Worker& worker) {
  int64_t task = 0;
  for (int64_t id : worker.TaskIds()) task = std::max(task, id);
  return task;
}

// The first task the worker starts with an id above `before` (a new job's).
int64_t NewTask(service::Worker& worker, int64_t before) {
  for (int i = 0; i < 400 && MaxTask(worker) <= before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(MaxTask(worker) > before);
  return MaxTask(worker);
}

// One GetElements call with the generated protobuf stub: shows what is on the wire.
service::GetElementsResponse RawGet(const std::string& address, int64_t task_id) {
  auto stub = service::WorkerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  service::GetElementsRequest req;
  req.set_task_id(task_id);
  req.set_max_elements(8);
  req.set_timeout_ms(2000);
  service::GetElementsResponse resp;
  grpc::ClientContext ctx;
  grpc::Status st = stub->GetElements(&ctx, req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp;
}

constexpr char kZeros[] =
    "op { range { stop: 1000000 } } op { map { fn { arith { op: MUL value: 0 } } } } "
    "op { batch { batch_size: 512 } }";

}  // namespace

TEST_CASE("compression: snappy datasets travel compressed and read back the same", "[compression][cluster]") {
  TestCluster cluster(1);
  const std::string plain = cluster.Register(kZeros);
  const std::string snappy = cluster.Register(kZeros, "", service::COMPRESSION_SNAPPY);
  const std::string automatic = cluster.Register(kZeros, "", service::COMPRESSION_AUTO);
  CHECK(plain != snappy);  // the compression is part of the dataset's identity
  CHECK(snappy != automatic);
  auto a = cluster.NewReader(plain);
  auto b = cluster.NewReader(snappy);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(ReadAll(**a) == ReadAll(**b));

  // On the wire: a fresh job of each, read with the plain protobuf stub.
  for (const auto& [ds, compressed] : {std::pair{snappy, true}, std::pair{automatic, false}, std::pair{plain, false}}) {
    service::ReaderOptions o;
    o.dataset_id = ds;
    o.job_name = "wire-" + ds;
    o.buffer_elements = 1;
    o.max_elements_per_request = 1;
    const int64_t before = MaxTask(*cluster.worker(0).worker());
    auto r = cluster.NewReader(o);
    REQUIRE(r.ok());
    const int64_t task = NewTask(*cluster.worker(0).worker(), before);
    auto resp = RawGet(cluster.worker(0).address(), task);
    INFO("dataset " << ds);
    // Loopback: auto never compresses; snappy always does.
    CHECK((resp.compressed_elements_size() > 0) == compressed);
    CHECK((resp.elements_size() > 0) == !compressed);
    auto stats = cluster.worker(0).worker()->Stats(task);
    REQUIRE(stats.ok());
    CHECK_FALSE(stats->auto_compress.has_value());  // nothing measured for a loopback reader
  }
}

TEST_CASE("compression: auto measures the stream and compresses for remote readers when it pays",
          "[compression][cluster]") {
  TestCluster cluster(0);
  service::WorkerConfig config;
  config.link_bytes_per_s = 1e6;  // a slow link: snappy beats it even on a loaded machine
  cluster.set_worker_config(config);
  cluster.AddWorker();
  const std::string zeros = cluster.Register(kZeros, "", service::COMPRESSION_AUTO);
  // Random-looking int64s: range values multiplied by a large odd constant.
  const std::string noise = cluster.Register(
      "op { range { stop: 100000 } } op { map { fn { arith { op: MUL value: 6364136223846793005 } } } } "
      "op { batch { batch_size: 512 } }",
      "", service::COMPRESSION_AUTO);
  service::Worker* worker = cluster.worker(0).worker();
  for (const auto& [ds, expect] : {std::pair{zeros, true}, std::pair{noise, false}}) {
    service::ReaderOptions o;
    o.dataset_id = ds;
    o.job_name = "auto-" + ds;
    o.buffer_elements = 1;
    o.max_elements_per_request = 1;
    const int64_t before = MaxTask(*worker);
    auto r = cluster.NewReader(o);
    REQUIRE(r.ok());
    const int64_t task = NewTask(*worker, before);
    service::GetElementsRequest req;
    req.set_task_id(task);
    req.set_max_elements(4);
    req.set_timeout_ms(2000);
    auto got = worker->GetElements(req, /*remote_peer=*/true);
    REQUIRE(got.ok());
    REQUIRE_FALSE(got->elements.empty());
    INFO("dataset " << ds);
    CHECK(got->compress == expect);
    auto stats = worker->Stats(task);
    REQUIRE(stats.ok());
    REQUIRE(stats->auto_compress.has_value());
    CHECK(*stats->auto_compress == expect);
  }
}
