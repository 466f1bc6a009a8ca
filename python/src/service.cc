// The service from Python: dispatcher and worker servers running in this process (their threads
// never take the GIL), registration, dataset lookup and readers.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "lib/core/status_macros.h"
#include "lib/io/path_policy.h"
#include "lib/python_functions/helper_pool.h"
#include "lib/service/client/coordinated_reader.h"
#include "lib/service/client/read_loss.h"
#include "lib/service/client/read_state.h"
#include "lib/service/client/reader.h"
#include "lib/service/client/register_dataset.h"
#include "lib/service/common/address.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/common/wire_compression.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/grpc/security.h"
#include "lib/service/grpc/server.h"
#include "python/src/functions.h"
#include "python/src/iterator.h"
#include "python/src/pipelines.h"
#include "python/src/status.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tfdata::python {
namespace {

absl::Duration Seconds(double s) { return s < 0 ? absl::InfiniteDuration() : absl::Seconds(s); }

// The directories pipelines may open files under (none given: any file this process can read).
std::shared_ptr<const PathPolicy> AllowedPaths(const std::vector<std::string>& dirs) {
  if (dirs.empty()) return nullptr;
  return std::make_shared<const PathPolicy>(Unwrap(PathPolicy::Create(dirs, "allowed_paths")));
}

// TLS and token files as the configs' fields name them ("" : not given); null when none is given.
std::shared_ptr<const service::Security> LoadSecurity(const std::string& cert, const std::string& key,
                                                      const std::string& ca, const std::string& token_file,
                                                      service::SecurityRole role) {
  service::SecurityFiles files{cert, key, ca, token_file, /*python_names=*/true};
  return Unwrap(service::LoadSecurity(files, role));
}

// tfdata.set_client_security: what readers, registration and dataset lookups in this process
// connect with from now on (clients made earlier keep theirs).
void SetClientSecurity(const std::string& cert, const std::string& key, const std::string& ca,
                       const std::string& token_file) {
  service::SetClientSecurity(LoadSecurity(cert, key, ca, token_file, service::SecurityRole::kClient));
}

class PyDispatchServer {
 public:
  PyDispatchServer(int port, const std::string& host, const std::string& work_dir, bool fault_tolerant,
                   std::vector<std::string> worker_addresses, double worker_timeout_s, double client_timeout_s,
                   double job_gc_timeout_s, const std::vector<std::string>& allowed_paths, const std::string& tls_cert,
                   const std::string& tls_key, const std::string& tls_ca, const std::string& auth_token_file) {
    if (port < 0 || port > 65535) throw nb::value_error(("port must be 0..65535, got " + std::to_string(port)).c_str());
    service::DispatcherConfig config;
    config.work_dir = work_dir;
    config.fault_tolerant = fault_tolerant;
    config.worker_addresses = std::move(worker_addresses);
    config.worker_timeout = Seconds(worker_timeout_s);
    config.client_timeout = Seconds(client_timeout_s);
    config.job_gc_timeout = Seconds(job_gc_timeout_s);
    config.build_options.paths = AllowedPaths(allowed_paths);
    server_ = std::make_unique<service::DispatcherServer>(
        config, LoadSecurity(tls_cert, tls_key, tls_ca, auth_token_file, service::SecurityRole::kServer));
    absl::Status st;
    {
      nb::gil_scoped_release release;
      st = server_->Start(host, port);
    }
    RaiseIfError(st);
  }
  ~PyDispatchServer() { Stop(); }
  void Stop() {
    nb::gil_scoped_release release;
    if (server_ != nullptr && !stopped_) server_->Stop();
    stopped_ = true;
  }
  int port() const { return server_->port(); }
  size_t num_workers() { return stopped_ ? 0 : server_->dispatcher().NumWorkers(); }
  bool stopped() const { return stopped_; }

 private:
  std::unique_ptr<service::DispatcherServer> server_;
  bool stopped_ = false;
};

class PyWorkerServer {
 public:
  PyWorkerServer(const std::string& dispatcher_address, int port, const std::string& host,
                 const std::string& worker_address, std::vector<std::string> tags, double heartbeat_interval_s,
                 bool allow_plugins, int64_t cross_trainer_cache_bytes, double dispatcher_retry_s,
                 int64_t max_task_memory_bytes, const std::vector<std::string>& allowed_paths,
                 const std::vector<std::string>& python_modules, const std::string& python, int python_helpers,
                 double python_call_timeout_s, const std::string& tls_cert, const std::string& tls_key,
                 const std::string& tls_ca, const std::string& auth_token_file) {
    if (port < 0 || port > 65535) throw nb::value_error(("port must be 0..65535, got " + std::to_string(port)).c_str());
    if (!(heartbeat_interval_s > 0)) throw nb::value_error("heartbeat_interval must be positive");
    if (cross_trainer_cache_bytes <= 0) throw nb::value_error("cross_trainer_cache_size must be positive");
    service::WorkerServerOptions options;
    options.dispatcher_address = Unwrap(service::ParseAddress(dispatcher_address, "dispatcher_address"));
    options.host = host;
    options.port = port;
    options.worker_address = worker_address;
    options.config.tags = std::move(tags);
    options.config.heartbeat_interval = absl::Seconds(heartbeat_interval_s);
    options.config.build_options.functions.allow_plugins = allow_plugins;
    options.config.build_options.paths = AllowedPaths(allowed_paths);
    options.config.cross_trainer_cache_bytes = cross_trainer_cache_bytes;
    options.config.dispatcher_retry = Seconds(dispatcher_retry_s);
    if (max_task_memory_bytes > 0) options.config.max_task_memory = max_task_memory_bytes;  // 0: the default
    options.security =
        LoadSecurity(tls_cert, tls_key, tls_ca, auth_token_file, service::SecurityRole::kServerAndClient);
    std::shared_ptr<python_functions::HelperPool> pool;
    if (python_modules.empty()) {
      options.config.build_options.functions.python = InProcessHost();  // registered in this process
    } else {
      if (python_helpers < 0) throw nb::value_error("python_helpers must be 0 (one per core) or more");
      if (!(python_call_timeout_s > 0)) throw nb::value_error("python_call_timeout_ms must be positive");
      python_functions::HelperPoolOptions o;
      o.python = python;
      o.modules = python_modules;
      o.helpers = python_helpers;
      o.call_timeout = absl::Seconds(python_call_timeout_s);
      o.where = "this worker";
      absl::StatusOr<std::shared_ptr<python_functions::HelperPool>> started;
      {
        nb::gil_scoped_release release;
        started = python_functions::HelperPool::Start(std::move(o));
      }
      pool = Unwrap(std::move(started));
      options.config.build_options.functions.python = pool;
    }
    server_ = std::make_unique<service::WorkerServer>(options);
    absl::Status st;
    {
      nb::gil_scoped_release release;
      st = server_->Start();
    }
    RaiseIfError(st);
    if (pool != nullptr) pool->set_where("worker " + server_->address());
  }
  ~PyWorkerServer() { Stop(false); }
  // leave: tell the dispatcher first (WorkerServer::Leave); otherwise stop as a crash would.
  void Stop(bool leave) {
    nb::gil_scoped_release release;
    if (server_ != nullptr && !stopped_) {
      if (leave) {
        server_->Leave();
      } else {
        server_->Stop();
      }
    }
    stopped_ = true;
  }
  int port() const { return server_->port(); }
  std::string address() const { return server_->address(); }
  size_t num_tasks() { return stopped_ || server_->worker() == nullptr ? 0 : server_->worker()->NumTasks(); }
  bool stopped() const { return stopped_; }

 private:
  std::unique_ptr<service::WorkerServer> server_;
  bool stopped_ = false;
};

std::unique_ptr<service::GrpcDispatcherClient> Client(const std::string& address) {
  return std::make_unique<service::GrpcDispatcherClient>(Unwrap(service::ParseAddress(address, "service")));
}

class ReaderSource : public ElementSource {
 public:
  // `address` and `options` open it again from a state (Resume).
  ReaderSource(std::unique_ptr<service::Reader> reader, std::string address, service::ReaderOptions options)
      : reader_(std::move(reader)), address_(std::move(address)), options_(std::move(options)) {}
  absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration timeout) override {
    return reader_->NextWithin(out, timeout);
  }
  void Close() override { reader_->Close(); }
  std::vector<std::pair<std::string, int64_t>> Stats() const override {
    return {{"tasks", reader_->num_tasks()},
            {"tasks_dropped", reader_->tasks_dropped()},
            {"splits_lost", reader_->splits_lost()},
            {"elements_skipped", reader_->elements_skipped()},
            {"job_id", reader_->job_id()},
            {"client_id", reader_->client_id()},
            {"duplicates_dropped", reader_->duplicates_dropped()},
            {"max_reorder_bytes", reader_->max_reorder_bytes()}};
  }
  std::string warning() const override { return reader_->warning(); }
  std::string loss() const override { return service::DescribeReadLoss(*reader_); }
  std::vector<std::string> dropped_workers() const override { return reader_->dropped_workers(); }
  absl::StatusOr<std::string> SaveState() const override {
    TFD_ASSIGN_OR_RETURN(const service::ReadState state, reader_->SaveState());
    return service::EncodeReadState(state);
  }
  absl::Status Resume(const std::vector<std::string>& states) override {
    service::ReaderOptions options = options_;
    options.resume.clear();
    for (size_t i = 0; i < states.size(); ++i) {
      TFD_ASSIGN_OR_RETURN(service::ReadState s,
                           service::DecodeReadState(states[i], "read state " + std::to_string(i)));
      options.resume.push_back(std::move(s));
    }
    auto address = service::ParseAddress(address_, "service");
    if (!address.ok()) return address.status();
    TFD_ASSIGN_OR_RETURN(auto reader,
                         service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>(*address)));
    reader_->Close();
    reader_ = std::move(reader);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<service::Reader> reader_;
  const std::string address_;
  const service::ReaderOptions options_;
};

class CoordinatedSource : public ElementSource {
 public:
  explicit CoordinatedSource(std::unique_ptr<service::CoordinatedReader> reader) : reader_(std::move(reader)) {}
  absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration timeout) override {
    return reader_->NextWithin(out, timeout);
  }
  void Close() override { reader_->Close(); }
  std::vector<std::pair<std::string, int64_t>> Stats() const override {
    return {{"rounds_substituted", reader_->rounds_substituted()}, {"client_id", reader_->client_id()}};
  }

 private:
  std::unique_ptr<service::CoordinatedReader> reader_;
};

std::string RegisterDataset(const std::string& address, const std::string& text, const std::string& name,
                            const std::string& dataset_id, const std::string& compression) {
  auto client = Client(address);
  const service::Compression c = Unwrap(service::ParseCompression(compression));
  LoadedPipeline loaded = ParseText(text, name);
  absl::StatusOr<std::string> id;
  {
    nb::gil_scoped_release release;
    id = service::RegisterPipeline(loaded.pipeline, loaded.source(), ClientBuildOptions(), dataset_id, c, *client);
  }
  return Unwrap(std::move(id));
}

// (text, spec, names, cardinality) of a registered dataset; spec is None (and cardinality -1)
// when the pipeline cannot be built here (its files may exist only on the workers).
nb::tuple DatasetInfo(const std::string& address, const std::string& dataset_id) {
  auto client = Client(address);
  service::GetDatasetRequest req;
  req.set_dataset_id(dataset_id);
  service::GetDatasetResponse resp;
  absl::Status st;
  {
    nb::gil_scoped_release release;
    st = client->GetDataset(req, &resp);
  }
  RaiseIfError(st);
  std::string text;
  google::protobuf::TextFormat::PrintToString(resp.pipeline(), &text);
  auto ds = BuildDataset(resp.pipeline(), ClientBuildOptions());
  if (!ds.ok()) {
    auto names = ElementNames(resp.pipeline());
    nb::object py_names = nb::none();
    if (names) py_names = nb::cast(*names);
    return nb::make_tuple(text, nb::none(), py_names, -1);
  }
  nb::tuple d = Describe(**ds, resp.pipeline());
  return nb::make_tuple(text, d[0], d[1], d[2]);
}

ElementIterator* OpenReader(const std::string& address, const std::string& dataset_id, int mode,
                            const std::string& job_name, int num_consumers, int consumer_index,
                            int max_outstanding_requests, int target_workers, const std::string& worker_tag,
                            const std::string& trainer_id, const std::string& protocol, bool exactly_once,
                            bool deterministic, const std::vector<nb::bytes>& states,
                            std::optional<std::vector<std::string>> names) {
  if (!service::ProcessingMode_IsValid(mode) || mode == 0) throw nb::value_error("unknown processing mode");
  if (max_outstanding_requests < 1) throw nb::value_error("max_outstanding_requests must be at least 1");
  if (protocol != "grpc" && protocol != "local" && protocol != "shm" && protocol != "auto") {
    throw nb::value_error(
        ("data_transfer_protocol: \"" + protocol + "\" is not one of auto, grpc, shm, local").c_str());
  }
  auto client = Client(address);
  std::vector<service::ReadState> resume;
  for (size_t i = 0; i < states.size(); ++i) {
    resume.push_back(Unwrap(
        service::DecodeReadState(std::string_view(states[i].c_str(), states[i].size()), "state " + std::to_string(i))));
  }
  ElementFormat format;
  format.names = std::move(names);
  // The in-process plane shares the worker's buffers; gRPC's and shared memory's are the reader's
  // own ("auto" reads a worker of this process in process).
  format.writable = protocol == "grpc" || protocol == "shm" || (protocol == "auto" && !service::AnyLocalWorker());
  std::unique_ptr<ElementSource> source;
  absl::Status error;
  {
    nb::gil_scoped_release release;
    if (num_consumers > 0) {
      service::CoordinatedReadOptions options;
      options.dataset_id = dataset_id;
      options.job_name = job_name;
      options.num_consumers = num_consumers;
      options.consumer_index = consumer_index;
      options.mode = static_cast<service::ProcessingMode>(mode);
      options.protocol = protocol;
      options.max_outstanding_rounds = max_outstanding_requests;
      auto reader = service::CoordinatedReader::Create(options, std::move(client));
      if (reader.ok()) source = std::make_unique<CoordinatedSource>(*std::move(reader));
      else error = reader.status();
    } else {
      service::ReaderOptions options;
      options.dataset_id = dataset_id;
      options.mode = static_cast<service::ProcessingMode>(mode);
      options.job_name = job_name;
      options.max_outstanding_requests = max_outstanding_requests;
      options.target_workers = static_cast<service::TargetWorkers>(target_workers);
      options.worker_tag = worker_tag;
      options.cross_trainer_cache = !trainer_id.empty();
      options.trainer_id = trainer_id;
      options.protocol = protocol;
      options.exactly_once = exactly_once;
      options.deterministic = deterministic;
      options.resume = std::move(resume);
      auto reader = service::Reader::Create(options, std::move(client));
      options.resume.clear();
      if (reader.ok()) source = std::make_unique<ReaderSource>(*std::move(reader), address, std::move(options));
      else error = reader.status();
    }
  }
  RaiseIfError(error);
  return new ElementIterator(std::move(source), std::move(format));
}

}  // namespace

void BindService(nb::module_& m) {
  nb::class_<PyDispatchServer>(m, "DispatchServer")
      .def(nb::init<int, const std::string&, const std::string&, bool, std::vector<std::string>, double, double, double,
                    const std::vector<std::string>&, const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           "port"_a, "host"_a, "work_dir"_a, "fault_tolerant"_a, "worker_addresses"_a, "worker_timeout_s"_a,
           "client_timeout_s"_a, "job_gc_timeout_s"_a, "allowed_paths"_a, "tls_cert"_a, "tls_key"_a, "tls_ca"_a,
           "auth_token_file"_a)
      .def_prop_ro("port", &PyDispatchServer::port)
      .def_prop_ro("num_workers", &PyDispatchServer::num_workers)
      .def_prop_ro("stopped", &PyDispatchServer::stopped)
      .def("stop", &PyDispatchServer::Stop);
  nb::class_<PyWorkerServer>(m, "WorkerServer")
      .def(nb::init<const std::string&, int, const std::string&, const std::string&, std::vector<std::string>, double,
                    bool, int64_t, double, int64_t, const std::vector<std::string>&, const std::vector<std::string>&,
                    const std::string&, int, double, const std::string&, const std::string&, const std::string&,
                    const std::string&>(),
           "dispatcher_address"_a, "port"_a, "host"_a, "worker_address"_a, "tags"_a, "heartbeat_interval_s"_a,
           "allow_plugins"_a, "cross_trainer_cache_bytes"_a, "dispatcher_retry_s"_a, "max_task_memory_bytes"_a,
           "allowed_paths"_a, "python_modules"_a, "python"_a, "python_helpers"_a, "python_call_timeout_s"_a,
           "tls_cert"_a, "tls_key"_a, "tls_ca"_a, "auth_token_file"_a)
      .def_prop_ro("port", &PyWorkerServer::port)
      .def_prop_ro("address", &PyWorkerServer::address)
      .def_prop_ro("num_tasks", &PyWorkerServer::num_tasks)
      .def_prop_ro("stopped", &PyWorkerServer::stopped)
      .def("stop", &PyWorkerServer::Stop, "leave"_a = true);
  m.def("set_client_security", &SetClientSecurity, "tls_cert"_a, "tls_key"_a, "tls_ca"_a, "auth_token_file"_a);
  m.def("register_dataset", &RegisterDataset, "address"_a, "text"_a, "name"_a, "dataset_id"_a, "compression"_a);
  m.def("dataset_info", &DatasetInfo, "address"_a, "dataset_id"_a);
  m.def("open_reader", &OpenReader, "address"_a, "dataset_id"_a, "mode"_a, "job_name"_a, "num_consumers"_a,
        "consumer_index"_a, "max_outstanding_requests"_a, "target_workers"_a, "worker_tag"_a, "trainer_id"_a,
        "protocol"_a, "exactly_once"_a, "deterministic"_a, "states"_a, "names"_a.none(), nb::rv_policy::take_ownership);
}

}  // namespace tfdata::python
