#include "tests/test_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/pipeline/loader.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "spdlog/spdlog.h"
#include "tests/test_util.h"

namespace tfdata::testing {

service::DispatcherConfig TestCluster::FastConfig() {
  service::DispatcherConfig c;
  c.worker_timeout = absl::Milliseconds(600);
  c.client_timeout = absl::Seconds(2);
  c.job_gc_timeout = absl::Seconds(2);
  return c;
}

TestCluster::TestCluster(int num_workers, service::DispatcherConfig config) {
  RequireTestKind("cluster");
  spdlog::set_level(spdlog::level::warn);  // lifecycle lines would drown the test output
  dispatcher_ = std::make_unique<service::DispatcherServer>(config);
  REQUIRE(dispatcher_->Start("127.0.0.1", 0).ok());
  dispatcher_address_ = "127.0.0.1:" + std::to_string(dispatcher_->port());
  for (int i = 0; i < num_workers; ++i) AddWorker();
}

TestCluster::~TestCluster() {
  workers_.clear();
  dispatcher_.reset();
}

std::unique_ptr<service::DispatcherClient> TestCluster::NewDispatcherClient() const {
  return std::make_unique<service::GrpcDispatcherClient>(dispatcher_address_);
}

std::unique_ptr<service::WorkerServer> TestCluster::StartWorker(int port) {
  service::WorkerServerOptions options;
  options.dispatcher_address = dispatcher_address_;
  options.host = "127.0.0.1";
  options.port = port;
  options.worker_address = "127.0.0.1:%port%";
  options.config = worker_config_;
  options.config.heartbeat_interval = absl::Milliseconds(50);
  auto w = std::make_unique<service::WorkerServer>(options);
  REQUIRE(w->Start().ok());
  return w;
}

void TestCluster::WaitForWorkers(size_t n) {
  for (int i = 0; i < 400 && dispatcher().NumWorkers() < n; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(dispatcher().NumWorkers() >= n);
}

service::WorkerServer& TestCluster::StartUnlistedWorker() {
  workers_.push_back(StartWorker());
  return *workers_.back();
}

std::vector<int> TestCluster::FreePorts(int n) {
  std::vector<int> fds, ports;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    fds.push_back(fd);
    ports.push_back(ntohs(addr.sin_port));
  }
  for (int fd : fds) close(fd);
  return ports;
}

size_t TestCluster::AddWorker(int port) {
  workers_.push_back(StartWorker(port));
  WaitForWorkers(++running_);
  return workers_.size() - 1;
}

void TestCluster::StopWorker(size_t index) {
  workers_.at(index)->Stop();
  --running_;
}

void TestCluster::LeaveWorker(size_t index) {
  workers_.at(index)->Leave();
  --running_;
}

void TestCluster::RestartWorker(size_t index) {
  workers_.at(index) = StartWorker();
  ++running_;
}

std::string TestCluster::Register(const std::string& pipeline_text, const std::string& dataset_id,
                                  service::Compression compression) {
  auto loaded = ParsePipelineText(pipeline_text);
  REQUIRE(loaded.ok());
  service::RegisterDatasetRequest req;
  *req.mutable_pipeline() = loaded->pipeline;
  req.set_dataset_id(dataset_id);
  req.set_compression(compression);
  service::RegisterDatasetResponse resp;
  auto st = NewDispatcherClient()->RegisterDataset(req, &resp);
  INFO(st.ToString());
  REQUIRE(st.ok());
  return resp.dataset_id();
}

absl::StatusOr<std::unique_ptr<service::Reader>> TestCluster::NewReader(const std::string& dataset_id,
                                                                        const std::string& job_name,
                                                                        const std::string& protocol) {
  service::ReaderOptions options;
  options.dataset_id = dataset_id;
  options.job_name = job_name;
  options.protocol = protocol;
  return NewReader(std::move(options));
}

absl::StatusOr<std::unique_ptr<service::Reader>> TestCluster::NewReader(service::ReaderOptions options) {
  options.heartbeat_interval = absl::Milliseconds(50);
  return service::Reader::Create(options, NewDispatcherClient());
}

std::vector<Element> ReadShared(TestCluster& cluster, const service::ReaderOptions& options, int readers,
                                std::vector<std::unique_ptr<service::Reader>>* readers_out,
                                const std::function<void(const std::atomic<int64_t>& read)>& during) {
  std::vector<std::unique_ptr<service::Reader>> rs;
  for (int r = 0; r < readers; ++r) {
    auto reader = cluster.NewReader(options);
    INFO(reader.status().ToString());
    REQUIRE(reader.ok());
    rs.push_back(*std::move(reader));
  }
  std::vector<std::vector<Element>> got(readers);
  std::vector<absl::Status> errors(readers);
  std::vector<std::thread> threads;
  std::atomic<int64_t> read{0};
  for (int r = 0; r < readers; ++r) {
    threads.emplace_back([&, r] {
      Element e;
      while (true) {
        auto more = rs[r]->Next(&e);
        if (!more.ok()) {
          errors[r] = more.status();
          return;
        }
        if (!*more) return;
        got[r].push_back(e);
        read.fetch_add(1);
      }
    });
  }
  if (during) during(read);
  for (auto& t : threads) t.join();
  std::vector<Element> all;
  for (int r = 0; r < readers; ++r) {
    INFO(errors[r].ToString());
    CHECK(errors[r].ok());
    for (auto& e : got[r]) all.push_back(std::move(e));
  }
  if (readers_out != nullptr) *readers_out = std::move(rs);
  return all;
}

std::vector<Element> ReadAll(service::Reader& reader) {
  std::vector<Element> out;
  Element e;
  while (true) {
    auto more = reader.Next(&e);
    INFO(more.status().ToString());
    REQUIRE(more.ok());
    if (!*more) break;
    out.push_back(e);
  }
  return out;
}

StaticCluster::StaticCluster(int n) : ports(TestCluster::FreePorts(n)), cluster(0, Config(ports)) {
  for (int p : ports) cluster.AddWorker(p);
}

service::DispatcherConfig StaticCluster::Config(const std::vector<int>& ports) {
  auto c = TestCluster::FastConfig();
  for (int p : ports) c.worker_addresses.push_back("127.0.0.1:" + std::to_string(p));
  return c;
}

absl::StatusOr<std::vector<Element>> StaticCluster::Read(const std::string& id, service::ProcessingMode mode) {
  service::ReaderOptions o;
  o.dataset_id = id;
  o.mode = mode;
  auto reader = cluster.NewReader(o);
  if (!reader.ok()) return reader.status();
  return ReadAll(**reader);
}

service::ReaderOptions ExactlyOnceOptions(const std::string& dataset_id, const std::string& job_name) {
  service::ReaderOptions o;
  o.dataset_id = dataset_id;
  o.mode = service::DISTRIBUTED_EPOCH;
  o.job_name = job_name;
  o.exactly_once = true;
  return o;
}

service::TaskInfo OneTask(TestCluster& cluster, const std::string& dataset_id) {
  auto dispatcher = cluster.NewDispatcherClient();
  service::GetOrCreateJobRequest job_req;
  job_req.set_dataset_id(dataset_id);
  job_req.set_mode(service::PARALLEL_EPOCHS);
  service::GetOrCreateJobResponse job;
  REQUIRE(dispatcher->GetOrCreateJob(job_req, &job).ok());
  service::ClientHeartbeatRequest hb_req;
  hb_req.set_client_id(job.client_id());
  service::ClientHeartbeatResponse hb;
  REQUIRE(WaitFor([&] { return dispatcher->ClientHeartbeat(hb_req, &hb).ok() && hb.tasks_size() == 1; }));
  // The dispatcher lists a task before the worker has heard of it (its next heartbeat): wait.
  const int64_t task_id = hb.tasks(0).task_id();
  REQUIRE(WaitFor([&] { return cluster.worker(0).worker()->Stats(task_id).ok(); }));
  return hb.tasks(0);
}

service::GetElementsRequest ElementsRequest(int64_t task_id, int max_elements, int64_t max_bytes) {
  service::GetElementsRequest req;
  req.set_task_id(task_id);
  req.set_max_elements(max_elements);
  req.set_max_bytes(max_bytes);
  req.set_timeout_ms(2000);
  return req;
}

}  // namespace tfdata::testing
