// The shared-memory data plane's own parts: the reader's ring, frames in shared memory, the
// worker's checks of a reader's hello, responses that do not fit (overflow memfds), and "auto".
// The data-plane behaviour it shares with gRPC is in transport_conformance_test.cc; crashes of
// real processes in shm_process_test.cc.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/service/common/data_transfer.h"
#include "lib/service/shm/shm_client.h"
#include "lib/service/shm/shm_frames.h"
#include "lib/service/shm/shm_region.h"
#include "lib/service/shm/shm_server.h"
#include "lib/service/shm/shm_socket.h"
#include "proto/shm.pb.h"
#include "tests/test_cluster.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;
using namespace tfdata::service::shm;
using tfdata::service::ShmHello;
using tfdata::service::ShmHelloResponse;
using tfdata::service::ShmRequest;
using tfdata::service::ShmResponse;

namespace {

bool Inside(const void* p, const Buffer& b) {
  const auto* q = static_cast<const uint8_t*>(p);
  return q >= b.data() && q < b.data() + b.size();
}

}  // namespace

TEST_CASE("shm ring: spans follow the head, wrap to the start, and free in any order", "[shm]") {
  auto region = ReaderRegion::Create(1 << 16);
  REQUIRE(region.ok());
  ReaderRegion& r = **region;
  auto span = r.Reserve(1000);
  CHECK(span.offset == 0);
  CHECK(span.capacity == (1 << 16));
  auto a = r.Commit(0, 1000);  // rounded up to 1024
  CHECK(r.BytesInUse() == 1024);
  span = r.Reserve(1000);
  CHECK(span.offset == 1024);
  auto b = r.Commit(1024, 30000);
  span = r.Reserve(40000);  // 64 KiB - 31040 left at the end: no wrap while the start is busy
  CHECK(span.offset == 1024 + 30016);
  auto c = r.Commit(span.offset, span.capacity);
  CHECK(r.Reserve(1).capacity == 0);  // full
  b.reset();                          // freed out of order: the oldest (a) still holds the ring
  CHECK(r.Reserve(1).capacity == 0);
  a.reset();  // now a and b are free: the next span wraps to the start
  span = r.Reserve(20000);
  CHECK(span.offset == 0);
  CHECK(span.capacity == 1024 + 30016);
  c.reset();
  CHECK(r.BytesInUse() == 0);
  CHECK(r.Reserve(1).offset == 0);  // empty: back to the start
}

TEST_CASE("shm ring: a tensor keeps its block, and the region, alive", "[shm]") {
  Tensor kept;
  {
    auto region = ReaderRegion::Create(1 << 16);
    REQUIRE(region.ok());
    auto buffer = (*region)->Commit(0, 64);
    auto t = Tensor::FromBuffer(DType::kInt64, {8}, buffer, 0, 64);
    REQUIRE(t.ok());
    kept = *t;
  }  // the region's owner is gone; the mapping stays while `kept` refers to it
  CHECK(kept.num_elements() == 8);
  CHECK(kept.data<int64_t>()[7] == 0);  // a fresh memfd reads as zeros
}

TEST_CASE("shm frames: written and decoded in place, values aliased", "[shm]") {
  std::vector<Element> elements;
  elements.push_back({Tensor::Scalar<int64_t>(7)});
  std::vector<float> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) / 2;
  elements.push_back({Tensor::FromVector<float>({50, 100}, big), Tensor::String("hello")});
  const size_t bytes = FramesBytes(elements);
  auto buffer = Buffer::Allocate(bytes);
  ShmResponse response;
  REQUIRE(WriteFrames(elements, buffer->mutable_data(), &response).ok());
  CHECK(response.frame_sizes_size() == 2);
  auto result = DecodeShmResponse(response, buffer);
  REQUIRE(result.ok());
  REQUIRE(result->elements.size() == 2);
  CHECK(result->elements[0].at(0).data<int64_t>()[0] == 7);
  const Tensor& f = result->elements[1].at(0);
  CHECK(f.shape() == Shape{50, 100});
  CHECK(f.data<float>()[4999] == 2499.5f);
  CHECK(Inside(f.data<float>(), *buffer));  // not copied
  CHECK(result->elements[1].at(1).strings() == std::vector<std::string>{"hello"});
}

TEST_CASE("shm frames: a response that lies about its frames is DataLoss, not a read outside", "[shm]") {
  std::vector<Element> elements = {{Tensor::Scalar<int64_t>(1)}, {Tensor::Scalar<int64_t>(2)}};
  auto buffer = Buffer::Allocate(FramesBytes(elements));
  ShmResponse good;
  REQUIRE(WriteFrames(elements, buffer->mutable_data(), &good).ok());
  SECTION("sizes beyond the bytes written") {
    ShmResponse r = good;
    r.set_frame_sizes(1, 1 << 20);
    auto d = DecodeShmResponse(r, buffer);
    REQUIRE(absl::IsDataLoss(d.status()));
    CHECK_THAT(std::string(d.status().message()), Catch::Contains("element 1"));
  }
  SECTION("a size near 2^64") {
    ShmResponse r = good;
    r.set_frame_sizes(0, ~uint64_t{0} - 3);
    CHECK(absl::IsDataLoss(DecodeShmResponse(r, buffer).status()));
  }
  SECTION("a frame cut short") {
    ShmResponse r = good;
    r.set_frame_sizes(0, 3);
    CHECK(absl::IsDataLoss(DecodeShmResponse(r, buffer).status()));
  }
  SECTION("split runs that do not cover the elements") {
    ShmResponse r = good;
    service::SplitRun* run = r.add_split_runs();
    run->set_count(5);
    CHECK(absl::IsDataLoss(DecodeShmResponse(r, buffer).status()));
  }
  SECTION("a negative first_index") {
    ShmResponse r = good;
    r.set_first_index(-1);
    CHECK(absl::IsDataLoss(DecodeShmResponse(r, buffer).status()));
  }
}

TEST_CASE("shm: elements larger than the reader's region arrive through the worker's memfd", "[shm][cluster]") {
  TestCluster cluster(1);
  // 40000 int64 per element (320 KB) against a 64 KiB region.
  const service::TaskInfo task =
      OneTask(cluster, cluster.Register("op { range { stop: 200000 } } op { batch { batch_size: 40000 } }"));
  auto client = ShmDataTransferClient::Connect(task.worker_address(), {}, 64 << 10);
  REQUIRE(client.ok());
  int64_t next = 0;
  bool ended = false;
  for (int calls = 0; calls < 20 && !ended; ++calls) {
    auto r = (*client)->GetElements(ElementsRequest(task.task_id(), 2, 1 << 20));
    REQUIRE(r.ok());
    for (const Element& e : r->elements) {
      const Tensor& t = e.at(0);
      REQUIRE(t.num_elements() == 40000);
      CHECK(t.data<int64_t>()[0] == next);
      CHECK(t.data<int64_t>()[39999] == next + 39999);
      next += 40000;
    }
    ended = r->end_of_sequence;
  }
  CHECK(ended);
  CHECK(next == 200000);
}

TEST_CASE("shm: a reader that keeps every element fills its ring, and goes on through overflow", "[shm][cluster]") {
  TestCluster cluster(1);
  // 1000 int64 per element (8 KB), 8 per response, into a 64 KiB ring: full after a few calls.
  const service::TaskInfo task =
      OneTask(cluster, cluster.Register("op { range { stop: 200000 } } op { batch { batch_size: 1000 } }"));
  auto client = ShmDataTransferClient::Connect(task.worker_address(), {}, 64 << 10);
  REQUIRE(client.ok());
  std::vector<Element> kept;
  for (int calls = 0; calls < 30; ++calls) {
    auto r = (*client)->GetElements(ElementsRequest(task.task_id(), 8, 1 << 20));
    REQUIRE(r.ok());
    for (Element& e : r->elements) kept.push_back(std::move(e));
  }
  REQUIRE(kept.size() >= 30);
  for (size_t i = 0; i < kept.size(); ++i) {
    INFO("element " << i);
    REQUIRE(kept[i].at(0).data<int64_t>()[0] == static_cast<int64_t>(i) * 1000);
    REQUIRE(kept[i].at(0).data<int64_t>()[999] == static_cast<int64_t>(i) * 1000 + 999);
  }
  // In place, as with gRPC's buffers: a consumer may write its tensors.
  kept[0].at(0).mutable_data<int64_t>()[0] = -5;
  CHECK(kept[0].at(0).data<int64_t>()[0] == -5);
  CHECK(kept[1].at(0).data<int64_t>()[0] == 1000);
}

TEST_CASE("shm: the worker refuses a wrong token, an old protocol and an unsealed region", "[shm][cluster]") {
  // A server of its own, on a name no worker advertises, in front of the cluster's worker.
  TestCluster cluster(1);
  const std::string name = "shm-test-" + std::to_string(getpid()) + ":1";
  auto server = ShmServer::Start(cluster.worker(0).worker(), name, "s3cret");
  REQUIRE(server.ok());

  SECTION("a wrong token: the first call says so") {
    auto c = ShmDataTransferClient::Connect(name, {"wrong"});
    REQUIRE(c.ok());
    auto r = (*c)->GetElements(ElementsRequest(987654));
    REQUIRE(absl::IsUnauthenticated(r.status()));
    CHECK_THAT(std::string(r.status().message()), Catch::Contains("token"));
    auto right = ShmDataTransferClient::Connect(name, {"s3cret"});
    REQUIRE(right.ok());
    CHECK(absl::IsNotFound((*right)->GetElements(ElementsRequest(987654)).status()));  // past the hello: no such task
  }
  SECTION("an unsealed region, or another protocol version") {
    for (int version : {kShmProtocolVersion, kShmProtocolVersion + 1}) {
      INFO("version " << version);
      auto socket = Connect(name);
      REQUIRE(socket.ok());
      UniqueFd memfd(memfd_create("unsealed", MFD_CLOEXEC));
      REQUIRE(ftruncate(memfd.get(), 1 << 16) == 0);
      ShmHello hello;
      hello.set_version(version);
      hello.set_auth_token("s3cret");
      hello.set_region_bytes(1 << 16);
      REQUIRE(Send(socket->get(), hello, memfd.get(), absl::Seconds(5)).ok());
      ShmHelloResponse response;
      REQUIRE(Receive(socket->get(), &response, nullptr, absl::Seconds(5)).ok());
      CHECK_THAT(response.error(), Catch::Contains(version == kShmProtocolVersion ? "sealed" : "version"));
      // And the worker closes the connection.
      ShmRequest req;
      ShmResponse r;
      (void)Send(socket->get(), req, -1, absl::Seconds(5));
      CHECK(absl::IsUnavailable(Receive(socket->get(), &r, nullptr, absl::Seconds(5))));
    }
  }
  SECTION("a region larger than it says") {
    auto socket = Connect(name);
    REQUIRE(socket.ok());
    auto memfd = CreateSealedMemfd("small", 4096);
    REQUIRE(memfd.ok());
    ShmHello hello;
    hello.set_version(kShmProtocolVersion);
    hello.set_auth_token("s3cret");
    hello.set_region_bytes(1 << 20);
    REQUIRE(Send(socket->get(), hello, memfd->get(), absl::Seconds(5)).ok());
    ShmHelloResponse response;
    REQUIRE(Receive(socket->get(), &response, nullptr, absl::Seconds(5)).ok());
    CHECK_THAT(response.error(), Catch::Contains("holds 4096 bytes"));
  }
}

namespace {

// Runs `check` in a child process as uid/gid 65534 (nobody) and returns its exit code, or -1 when
// it did not end within 20 s (then it is killed). Needs root to change uid.
int RunAsNobody(const std::function<int()>& check) {
  const pid_t pid = fork();
  if (pid == 0) {
    // The child only uses sockets, memfds and protobuf: nothing that another thread of the test
    // process could have held locked at the fork (glibc's malloc resets its locks in the child).
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(90);
    _exit(check());
  }
  for (int i = 0; i < 400; ++i) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

}  // namespace

TEST_CASE("shm: under mutual TLS, only the worker's user or root reads through shared memory", "[shm][cluster]") {
  CHECK(SameUserOrRoot(1000, 1000));
  CHECK(SameUserOrRoot(0, 1000));  // root could read the worker's key
  CHECK_FALSE(SameUserOrRoot(1000, 0));
  CHECK_FALSE(SameUserOrRoot(1000, 1001));
  if (geteuid() != 0) {
    WARN("not root: the check of a reader of another user is skipped (it needs to change uid)");
    return;
  }
  TestCluster cluster(1);
  const std::string name = "shm-test-uid-" + std::to_string(getpid()) + ":1";
  auto server = ShmServer::Start(cluster.worker(0).worker(), name, "", /*same_user_only=*/true);
  REQUIRE(server.ok());
  // Root (this process) passes the hello: the call gets as far as the task, which does not exist.
  auto root = ShmDataTransferClient::Connect(name, {});
  REQUIRE(root.ok());
  CHECK(absl::IsNotFound((*root)->GetElements(ElementsRequest(987654)).status()));
  // nobody: the worker refuses at the hello, naming the users. The reader does not check first
  // here (same_user_only false), so this is the worker's own check.
  CHECK(RunAsNobody([&] {
          auto c = ShmDataTransferClient::Connect(name, {});
          if (!c.ok()) return 1;
          auto r = (*c)->GetElements(ElementsRequest(987654));
          if (!absl::IsPermissionDenied(r.status())) return 2;
          const std::string m(r.status().message());
          return m.find("uid 65534") != std::string::npos && m.find("mutual TLS") != std::string::npos ? 0 : 3;
        }) == 0);
  // A reader with a client certificate checks first: it is not offered shared memory, so "auto"
  // picks gRPC without a refused hello.
  CHECK(RunAsNobody([&] {
          auto c = ShmDataTransferClient::Connect(name, {.token = "", .same_user_only = true});
          if (c.ok() || !absl::IsPermissionDenied(c.status())) return 1;
          return std::string(c.status().message()).find("uid 65534") != std::string::npos ? 0 : 2;
        }) == 0);
  // Without mutual TLS the worker serves any reader of its host, as its plaintext port does.
  const std::string open_name = "shm-test-open-" + std::to_string(getpid()) + ":1";
  auto open = ShmServer::Start(cluster.worker(0).worker(), open_name, "", /*same_user_only=*/false);
  REQUIRE(open.ok());
  CHECK(RunAsNobody([&] {
          auto c = ShmDataTransferClient::Connect(open_name, {});
          if (!c.ok()) return 1;
          return absl::IsNotFound((*c)->GetElements(ElementsRequest(987654)).status()) ? 0 : 2;
        }) == 0);
}

TEST_CASE("shm: a request that points outside the region gets its elements through overflow", "[shm][cluster]") {
  TestCluster cluster(1);
  const service::TaskInfo task = OneTask(cluster, cluster.Register("op { range { stop: 10 } }"));
  auto socket = Connect(task.worker_address());
  REQUIRE(socket.ok());
  auto memfd = CreateSealedMemfd("region", 4096);
  REQUIRE(memfd.ok());
  ShmHello hello;
  hello.set_version(kShmProtocolVersion);
  hello.set_region_bytes(4096);
  REQUIRE(Send(socket->get(), hello, memfd->get(), absl::Seconds(5)).ok());
  ShmHelloResponse welcome;
  REQUIRE(Receive(socket->get(), &welcome, nullptr, absl::Seconds(5)).ok());
  REQUIRE(welcome.error().empty());
  ShmRequest req;
  *req.mutable_request() = ElementsRequest(task.task_id(), 4);
  req.set_offset(1 << 30);  // a reader's bug, or a hostile one: the worker never writes there
  req.set_capacity(4096);
  REQUIRE(Send(socket->get(), req, -1, absl::Seconds(5)).ok());
  ShmResponse response;
  UniqueFd overflow;
  REQUIRE(Receive(socket->get(), &response, &overflow, absl::Seconds(5)).ok());
  CHECK(response.overflow());
  CHECK(bool(overflow));
  CHECK(response.frame_sizes_size() == 4);
}

TEST_CASE("shm: no worker of this host serves that address: UNAVAILABLE", "[shm]") {
  auto c = ShmDataTransferClient::Connect("nowhere.invalid:1", {});
  REQUIRE(absl::IsUnavailable(c.status()));
  CHECK_THAT(std::string(c.status().message()), Catch::Contains("no shared-memory data plane"));
}
