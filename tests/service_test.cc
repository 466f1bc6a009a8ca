// The service in one process: a real dispatcher and real workers on loopback (TestCluster).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/service/common/address.h"
#include "lib/service/common/data_transfer.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

TEST_CASE("service: the seed example reads 0..9 through one worker", "[service][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 10 } }");
  for (const std::string& protocol : service::TransportNames()) {  // every transport: one conformance suite
    INFO(protocol);
    auto reader = cluster.NewReader(id, "", protocol);
    REQUIRE(reader.ok());
    CHECK(Int64Scalars(ReadAll(**reader)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  }
}

TEST_CASE("service: transports are a registry, and the tests run against every registered one", "[service][cluster]") {
  const auto names = service::TransportNames();
  CHECK(std::find(names.begin(), names.end(), "grpc") != names.end());
  CHECK(std::find(names.begin(), names.end(), "local") != names.end());
  auto unknown = service::MakeDataTransferClient("carrier-pigeon", "localhost:1");
  REQUIRE(!unknown.ok());
  CHECK(absl::IsInvalidArgument(unknown.status()));
  CHECK_THAT(std::string(unknown.status().message()),
             Catch::Contains("unknown data transfer protocol \"carrier-pigeon\""));
  // A transport registered by name is what a reader with that protocol uses.
  static std::atomic<int> calls{0};
  service::RegisterTransport(
      "counting", [](const std::string& address) -> absl::StatusOr<std::unique_ptr<service::DataTransferClient>> {
        struct Counting : service::DataTransferClient {
          std::unique_ptr<service::DataTransferClient> inner;
          absl::StatusOr<service::GetElementsResult> GetElements(const service::GetElementsRequest& req) override {
            ++calls;
            return inner->GetElements(req);
          }
        };
        auto inner = service::MakeDataTransferClient("local", address);
        if (!inner.ok()) return inner.status();
        auto c = std::make_unique<Counting>();
        c->inner = *std::move(inner);
        return c;
      });
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 10 } }");
  auto reader = cluster.NewReader(id, "", "counting");
  REQUIRE(reader.ok());
  CHECK(Int64Scalars(ReadAll(**reader)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(calls.load() > 0);
}

TEST_CASE("service: parallel_epochs with two workers gives each element twice", "[service][cluster]") {
  TestCluster cluster(2);
  const std::string id =
      cluster.Register("op { range { stop: 1000 } } op { batch { batch_size: 10 } } op { unbatch {} }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  auto counts = Counts(Int64Scalars(ReadAll(**reader)));
  REQUIRE(counts.size() == 1000);
  for (const auto& [v, n] : counts) CHECK(n == 2);
}

TEST_CASE("service: readers sharing a job name split the elements, none twice", "[service][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 20000 } }");
  auto a = cluster.NewReader(id, "shared");
  auto b = cluster.NewReader(id, "shared");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK((*a)->job_id() == (*b)->job_id());
  // Catch's macros are not thread-safe: the threads only collect.
  std::vector<Element> ea, eb;
  absl::Status sa, sb;
  auto collect = [](service::Reader& r, std::vector<Element>* out, absl::Status* st) {
    Element e;
    while (true) {
      auto more = r.Next(&e);
      if (!more.ok() || !*more) {
        *st = more.status();
        return;
      }
      out->push_back(e);
    }
  };
  std::thread ta(collect, std::ref(**a), &ea, &sa);
  std::thread tb(collect, std::ref(**b), &eb, &sb);
  ta.join();
  tb.join();
  REQUIRE(sa.ok());
  REQUIRE(sb.ok());
  auto values = Int64Scalars(ea);
  auto vb = Int64Scalars(eb);
  values.insert(values.end(), vb.begin(), vb.end());
  auto counts = Counts(values);
  REQUIRE(counts.size() == 20000);                  // the union is everything the two workers produced...
  for (const auto& [v, n] : counts) CHECK(n == 2);  // ...once per worker, none duplicated by sharing
  CHECK(!ea.empty());
  CHECK(!eb.empty());
}

TEST_CASE("service: one task's elements arrive in order with several requests in flight", "[service][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 30000 } }");
  for (const std::string& protocol : service::TransportNames()) {  // every transport: one conformance suite
    service::ReaderOptions options;
    options.dataset_id = id;
    options.protocol = protocol;
    options.max_requests_per_task = 3;
    options.max_elements_per_request = 7;  // many small responses racing each other
    auto reader = cluster.NewReader(options);
    REQUIRE(reader.ok());
    auto values = Int64Scalars(ReadAll(**reader));
    REQUIRE(values.size() == 30000);
    bool in_order = true;
    for (size_t i = 0; i < values.size(); ++i) in_order = in_order && values[i] == static_cast<int64_t>(i);
    INFO(protocol);
    CHECK(in_order);
  }
}

TEST_CASE("service: small elements handed out from the consumer's batch keep their order and exact stats",
          "[service][cluster]") {
  // Next() takes up to 256 buffered small elements at once and hands them out without the lock:
  // the count Stats() reports must still be what Next() returned, element by element.
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 5000 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  Element e;
  auto first = (*reader)->Next(&e);
  REQUIRE(first.ok());
  REQUIRE(*first);
  CHECK(e[0].values<int64_t>()[0] == 0);
  // Let the buffer fill, so that the next call takes a batch.
  absl::SleepFor(absl::Milliseconds(300));
  for (int64_t i = 1; i <= 10; ++i) {
    auto more = (*reader)->Next(&e);
    REQUIRE(more.ok());
    REQUIRE(*more);
    CHECK(e[0].values<int64_t>()[0] == i);
    CHECK((*reader)->Stats().elements() == i + 1);
    CHECK((*reader)->Stats().bytes() == 8 * (i + 1));
  }
  auto rest = Int64Scalars(ReadAll(**reader));
  REQUIRE(rest.size() == 5000 - 11);
  bool in_order = true;
  for (size_t i = 0; i < rest.size(); ++i) in_order = in_order && rest[i] == static_cast<int64_t>(i + 11);
  CHECK(in_order);
  CHECK((*reader)->Stats().elements() == 5000);
}

TEST_CASE("service: a worker added mid-job gets a task from the beginning", "[service][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 50000 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  Element e;
  for (int i = 0; i < 10; ++i) REQUIRE(*(*reader)->Next(&e));
  cluster.AddWorker();
  // The first task cannot end before the reader consumes more, so this is still mid-job.
  REQUIRE(WaitFor([&] { return (*reader)->num_tasks() == 2; }));
  auto rest = Int64Scalars(ReadAll(**reader));
  CHECK(rest.size() + 10 == 100000);
  auto counts = Counts(rest);
  CHECK(counts.size() == 50000);
}

TEST_CASE("service: a worker stopped mid-job is dropped and the read finishes from the others", "[service][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 50000 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  std::vector<Element> first(10);
  for (Element& e : first) REQUIRE(*(*reader)->Next(&e));
  cluster.StopWorker(1);
  auto rest = Int64Scalars(ReadAll(**reader));
  for (int64_t v : Int64Scalars(first)) rest.push_back(v);
  CHECK((*reader)->tasks_dropped() == 1);
  // Worker 0 delivered its whole pass; worker 1 only part of it.
  auto counts = Counts(rest);
  CHECK(counts.size() == 50000);
  CHECK(rest.size() < 100000);
  // The dispatcher declares the stopped worker lost after --worker-timeout.
  CHECK(WaitFor([&] { return cluster.dispatcher().NumWorkers() == 1; }));
}

TEST_CASE("service: a worker restarted mid-job rejoins as a new worker and reads from the beginning",
          "[service][cluster]") {
  TestCluster cluster(2);
  const std::string id = cluster.Register("op { range { stop: 50000 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  std::vector<Element> first(10);
  for (Element& e : first) REQUIRE(*(*reader)->Next(&e));
  cluster.StopWorker(1);
  cluster.RestartWorker(1);
  // Neither task can end before the reader consumes more, so the restart is mid-job.
  REQUIRE(WaitFor([&] { return (*reader)->num_tasks() == 3; }));
  auto rest = Int64Scalars(ReadAll(**reader));
  for (int64_t v : Int64Scalars(first)) rest.push_back(v);
  CHECK((*reader)->tasks_dropped() == 1);  // the stopped worker's task
  // Worker 0 and the restarted worker each delivered a whole pass; the stopped one part of one.
  auto counts = Counts(rest);
  REQUIRE(counts.size() == 50000);
  bool at_least_twice = true;
  for (const auto& [v, n] : counts) at_least_twice = at_least_twice && n >= 2 && n <= 3;
  CHECK(at_least_twice);
  CHECK(rest.size() < 150000);
  CHECK(WaitFor([&] { return cluster.dispatcher().NumWorkers() == 2; }));
}

TEST_CASE("service: registering datasets: same pipeline same id, chosen ids, conflicts", "[service][cluster]") {
  TestCluster cluster(0);
  const std::string a = cluster.Register("op { range { stop: 10 } }");
  CHECK(cluster.Register("op { range { stop: 10 } }") == a);
  CHECK(cluster.Register("op { range { stop: 11 } }") != a);
  CHECK(cluster.Register("op { range { stop: 10 } }", "mine") == "mine");
  CHECK(cluster.Register("op { range { stop: 10 } }", "mine") == "mine");
  auto client = cluster.NewDispatcherClient();
  service::RegisterDatasetRequest req;
  req.mutable_pipeline()->add_op()->mutable_range()->set_stop(99);
  req.set_dataset_id("mine");
  service::RegisterDatasetResponse resp;
  auto st = client->RegisterDataset(req, &resp);
  CHECK(absl::IsAlreadyExists(st));
  CHECK_THAT(std::string(st.message()), Catch::Contains("\"mine\" is already bound to a different pipeline"));
  req.set_dataset_id("bad id!");
  CHECK(absl::IsInvalidArgument(client->RegisterDataset(req, &resp)));
  req.clear_pipeline();
  req.clear_dataset_id();
  CHECK(absl::IsInvalidArgument(client->RegisterDataset(req, &resp)));
}

TEST_CASE("service: job names: another dataset is an error, a finished job warns", "[service][cluster]") {
  TestCluster cluster(1);
  const std::string a = cluster.Register("op { range { stop: 3 } }");
  const std::string b = cluster.Register("op { range { stop: 4 } }");
  auto first = cluster.NewReader(a, "job");
  REQUIRE(first.ok());
  CHECK(Int64Scalars(ReadAll(**first)).size() == 3);
  auto other = cluster.NewReader(b, "job");
  REQUIRE(absl::IsInvalidArgument(other.status()));
  CHECK_THAT(std::string(other.status().message()), Catch::Contains("job name \"job\" is used by job 1"));
  CHECK(WaitFor([&] {
    service::ClientHeartbeatRequest req;
    req.set_client_id((*first)->client_id());
    service::ClientHeartbeatResponse resp;
    return cluster.NewDispatcherClient()->ClientHeartbeat(req, &resp).ok() && resp.iteration_finished();
  }));
  auto again = cluster.NewReader(a, "job");
  REQUIRE(again.ok());
  CHECK_THAT((*again)->warning(), Catch::Contains("has already finished"));
  CHECK(ReadAll(**again).empty());
}

TEST_CASE("service: released jobs are garbage-collected and workers drop their tasks", "[service][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 1000000 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  Element e;
  REQUIRE(*(*reader)->Next(&e));
  CHECK(cluster.worker(0).worker()->NumTasks() == 1);
  (*reader)->Close();
  CHECK(WaitFor([&] { return cluster.worker(0).worker()->NumTasks() == 0; }, 6000));
}

TEST_CASE("service: an unreachable dispatcher is a clear error in bounded time", "[service]") {
  const auto start = std::chrono::steady_clock::now();
  service::ReaderOptions options;
  options.dataset_id = "1";
  auto reader = service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>("127.0.0.1:1"));
  REQUIRE(!reader.ok());
  CHECK(absl::IsUnavailable(reader.status()));
  CHECK_THAT(std::string(reader.status().message()), Catch::Contains("dispatcher 127.0.0.1:1"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(6));  // the client deadline, not a hang
}

TEST_CASE("service: a pipeline error on a worker reaches the reader", "[service][cluster]") {
  TestCluster cluster(1);
  TempDir dir;
  WriteFile(dir.Join("bad.tfrecord"), "not a tfrecord");
  const std::string id = cluster.Register("op { tfrecord { file: \"" + dir.Join("bad.tfrecord") + "\" } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  Element e;
  auto st = (*reader)->Next(&e);
  REQUIRE(!st.ok());
  CHECK_THAT(std::string(st.status().message()), Catch::Contains("bad.tfrecord"));
}

TEST_CASE("service: addresses", "[service]") {
  CHECK(*service::ParseAddress("grpc://host:5050") == "host:5050");
  CHECK(*service::ParseAddress("localhost:1") == "localhost:1");
  CHECK(*service::ParseAddress("[::1]:80") == "[::1]:80");
  for (const char* bad : {"host", "host:", ":80", "host:0", "host:70000", "host:x"}) {
    INFO(bad);
    CHECK(absl::IsInvalidArgument(service::ParseAddress(bad, "--dispatcher").status()));
  }
}
