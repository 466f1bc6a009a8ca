#include "tests/test_cluster.h"

#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/pipeline/loader.h"
#include "lib/service/grpc_dispatcher.h"
#include "spdlog/spdlog.h"

namespace tfdata::testing {

service::DispatcherConfig TestCluster::FastConfig() {
  service::DispatcherConfig c;
  c.worker_timeout = absl::Milliseconds(600);
  c.client_timeout = absl::Seconds(2);
  c.job_gc_timeout = absl::Seconds(2);
  return c;
}

TestCluster::TestCluster(int num_workers, service::DispatcherConfig config) {
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

std::unique_ptr<service::WorkerServer> TestCluster::StartWorker() {
  service::WorkerServerOptions options;
  options.dispatcher_address = dispatcher_address_;
  options.host = "127.0.0.1";
  options.worker_address = "127.0.0.1:%port%";
  options.config.heartbeat_interval = absl::Milliseconds(50);
  auto w = std::make_unique<service::WorkerServer>(options);
  REQUIRE(w->Start().ok());
  return w;
}

void TestCluster::WaitForWorkers(size_t n) {
  for (int i = 0; i < 400 && dispatcher().NumWorkers() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  REQUIRE(dispatcher().NumWorkers() >= n);
}

size_t TestCluster::AddWorker() {
  workers_.push_back(StartWorker());
  WaitForWorkers(++running_);
  return workers_.size() - 1;
}

void TestCluster::StopWorker(size_t index) {
  workers_.at(index)->Stop();
  --running_;
}

void TestCluster::RestartWorker(size_t index) {
  workers_.at(index) = StartWorker();
  ++running_;
}

std::string TestCluster::Register(const std::string& pipeline_text, const std::string& dataset_id) {
  auto loaded = ParsePipelineText(pipeline_text);
  REQUIRE(loaded.ok());
  service::RegisterDatasetRequest req;
  *req.mutable_pipeline() = loaded->pipeline;
  req.set_dataset_id(dataset_id);
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

}  // namespace tfdata::testing
