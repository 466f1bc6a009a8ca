// The data-plane conformance suite: every registered transport ("grpc", "local", and any later
// one) against a real worker of the in-process cluster, through the DataTransferClient interface
// alone. A new transport passes these before a reader may use it.
#include <catch2/catch.hpp>

#include "lib/service/common/data_transfer.h"
#include "lib/service/common/dispatcher_client.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

namespace {

// The transports under test: the registry's, less those tests register for themselves.
std::vector<std::string> Transports() {
  std::vector<std::string> names;
  for (const std::string& n : service::TransportNames()) {
    if (n != "counting") names.push_back(n);
  }
  return names;
}

}  // namespace

TEST_CASE("transport conformance: a task's whole stream, in order, first_index, then end of sequence",
          "[transport][cluster]") {
  TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 100 } }");
  for (const std::string& name : Transports()) {
    INFO("transport " << name);
    const service::TaskInfo task = OneTask(cluster, id);  // a job of its own each time
    auto client = service::MakeDataTransferClient(name, task.worker_address());
    REQUIRE(client.ok());
    std::vector<int64_t> values;
    bool ended = false;
    for (int calls = 0; calls < 100 && !ended; ++calls) {
      auto r = (*client)->GetElements(ElementsRequest(task.task_id(), 16));
      INFO(r.status().ToString());
      REQUIRE(r.ok());
      CHECK(r->first_index == static_cast<int64_t>(values.size()));  // nothing skipped, nothing twice
      CHECK(r->elements.size() <= 16);
      for (int64_t v : Int64Scalars(r->elements)) values.push_back(v);
      ended = r->end_of_sequence;
    }
    REQUIRE(ended);
    std::vector<int64_t> expected(100);
    for (int i = 0; i < 100; ++i) expected[i] = i;
    CHECK(values == expected);
    // After the end, the end again, with no elements.
    auto again = (*client)->GetElements(ElementsRequest(task.task_id()));
    REQUIRE(again.ok());
    CHECK(again->end_of_sequence);
    CHECK(again->elements.empty());
  }
}

TEST_CASE("transport conformance: response bounds, the first element always included", "[transport][cluster]") {
  TestCluster cluster(1);
  for (const std::string& name : Transports()) {
    INFO("transport " << name);
    // 1000 int64 per element: 8000 bytes each, over a max_bytes of 100.
    const service::TaskInfo task =
        OneTask(cluster, cluster.Register("op { range { stop: 10000 } } op { batch { batch_size: 1000 } }"));
    auto client = service::MakeDataTransferClient(name, task.worker_address());
    REQUIRE(client.ok());
    auto small = (*client)->GetElements(ElementsRequest(task.task_id(), 16, /*max_bytes=*/100));
    REQUIRE(small.ok());
    REQUIRE(small->elements.size() == 1);  // over the byte bound, but never an empty answer
    CHECK(small->elements[0].at(0).num_elements() == 1000);
    auto two = (*client)->GetElements(ElementsRequest(task.task_id(), /*max_elements=*/2));
    REQUIRE(two.ok());
    CHECK(two->elements.size() <= 2);
    CHECK(two->first_index == 1);
  }
}

TEST_CASE("transport conformance: an unknown task is NOT_FOUND", "[transport][cluster]") {
  TestCluster cluster(1);
  for (const std::string& name : Transports()) {
    INFO("transport " << name);
    auto client = service::MakeDataTransferClient(name, cluster.worker(0).address());
    REQUIRE(client.ok());
    auto r = (*client)->GetElements(ElementsRequest(/*task_id=*/987654));
    REQUIRE(!r.ok());
    CHECK(absl::IsNotFound(r.status()));
  }
}

TEST_CASE("transport conformance: a stopped worker is a transport error, never a clean end", "[transport][cluster]") {
  for (const std::string& name : Transports()) {
    INFO("transport " << name);
    TestCluster cluster(1);
    const service::TaskInfo task = OneTask(cluster, cluster.Register("op { range { stop: 1000000 } }"));
    auto client = service::MakeDataTransferClient(name, task.worker_address());
    REQUIRE(client.ok());
    REQUIRE((*client)->GetElements(ElementsRequest(task.task_id())).ok());
    cluster.StopWorker(0);
    auto r = (*client)->GetElements(ElementsRequest(task.task_id()));
    REQUIRE(!r.ok());
    INFO(r.status().ToString());
    // What readers treat as "worker unreachable": they give the task up and count it dropped.
    CHECK(absl::IsUnavailable(r.status()));
  }
}

TEST_CASE("transport conformance: a compressed dataset's elements arrive unchanged", "[transport][cluster]") {
  TestCluster cluster(1);
  for (const std::string& name : Transports()) {
    INFO("transport " << name);
    // Batches of small integers: snappy shrinks them, so the response does travel compressed.
    const std::string id = cluster.Register("op { range { stop: 4000 } } op { batch { batch_size: 400 } }", "",
                                            service::COMPRESSION_SNAPPY);
    const service::TaskInfo task = OneTask(cluster, id);
    auto client = service::MakeDataTransferClient(name, task.worker_address());
    REQUIRE(client.ok());
    std::vector<int64_t> values;
    bool ended = false;
    for (int calls = 0; calls < 100 && !ended; ++calls) {
      auto r = (*client)->GetElements(ElementsRequest(task.task_id()));
      REQUIRE(r.ok());
      for (const Element& e : r->elements) {
        REQUIRE(e.at(0).num_elements() == 400);
        for (int64_t v : e.at(0).values<int64_t>()) values.push_back(v);
      }
      ended = r->end_of_sequence;
    }
    REQUIRE(values.size() == 4000);
    bool in_order = true;
    for (int i = 0; i < 4000; ++i) in_order = in_order && values[i] == i;
    CHECK(in_order);
  }
}
