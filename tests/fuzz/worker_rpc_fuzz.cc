// libFuzzer target for the worker core: a Worker whose dispatcher is a fake answering heartbeats
// with tasks from the input (arbitrary pipelines, modes, ids, shardings) and GetSplits with splits
// from the input, and GetElements requests with arbitrary fields, in the order the input says.
// No call may crash, and the worker must stop (every task's thread joined) at the end.
//
// Input (framing: rpc_fuzz_input.h), records whose kind picks
//   0 queue a heartbeat reply: payload = serialized WorkerHeartbeatResponse
//   1 queue a heartbeat reply with one task: payload = task id, mode, compression, num_consumers,
//     flags (bit 0 cross_trainer_cache; bits 1-3 num_workers; bits 4-6 worker_index), then the
//     pipeline as text
//   2 Worker::Heartbeat() (takes the next queued reply; an empty one when none is queued)
//   3 queue a GetSplits answer: payload = serialized GetSplitsResponse (with none queued, the
//     fake answers end_of_splits, so distributed tasks end)
//   4 GetElements: payload = serialized GetElementsRequest
//   5 GetElements on one of the worker's tasks: payload[0] picks it, the rest is the request
//   6 Stats: payload[0] picks a task
//   7 sleep 1 ms (lets producers run)
//   8 Leave() (a last heartbeat, then Stop(); later calls get UNAVAILABLE)
// GetElements timeouts are clamped to 1-20 ms; at most 8 tasks are handed out per input; tasks
// have a 64 MiB budget, no plugins, and may read only an empty temporary directory.
// With TFDATA_FUZZ_WRITE_SEEDS=DIR set, the binary writes a seed corpus to DIR and exits;
// TFDATA_FUZZ_VERBOSE=1 shows the service's log.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "lib/io/path_policy.h"
#include "lib/pipeline/loader.h"
#include "lib/service/common/dispatcher_client.h"
#include "lib/service/worker/worker.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/rpc_fuzz_input.h"

namespace tfdata::service {
namespace {

using fuzz::ParsePayload;
using fuzz::Record;
using fuzz::RecordReader;
using fuzz::RecordWriter;

enum Kind : uint8_t {
  kQueueHeartbeat,
  kQueueTask,
  kHeartbeat,
  kQueueSplits,
  kGetElements,
  kGetElementsOfTask,
  kStats,
  kSleep,
  kLeave,
  kNumKinds
};

constexpr int kMaxTasks = 8;

// The dispatcher as the input says. Thread-safe: task threads ask for splits.
class FakeDispatcher final : public DispatcherClient {
 public:
  void QueueHeartbeat(WorkerHeartbeatResponse resp) {
    absl::MutexLock lock(&mu_);
    heartbeats_.push_back(std::move(resp));
  }
  void QueueSplits(GetSplitsResponse resp) {
    absl::MutexLock lock(&mu_);
    splits_.push_back(std::move(resp));
  }

  absl::Status WorkerHeartbeat(const WorkerHeartbeatRequest&, WorkerHeartbeatResponse* resp) override {
    absl::MutexLock lock(&mu_);
    resp->set_incarnation_id(7);
    if (heartbeats_.empty()) return absl::OkStatus();
    *resp = std::move(heartbeats_.front());
    heartbeats_.pop_front();
    // Bound the threads: each new task starts one.
    auto* tasks = resp->mutable_new_tasks();
    while (!tasks->empty() && tasks_given_ + tasks->size() > kMaxTasks) tasks->RemoveLast();
    tasks_given_ += tasks->size();
    return absl::OkStatus();
  }
  absl::Status GetSplits(const GetSplitsRequest&, GetSplitsResponse* resp) override {
    absl::MutexLock lock(&mu_);
    if (splits_.empty()) {
      resp->set_end_of_splits(true);
      return absl::OkStatus();
    }
    *resp = std::move(splits_.front());
    splits_.pop_front();
    return absl::OkStatus();
  }
  // Not called by workers.
  absl::Status RegisterDataset(const RegisterDatasetRequest&, RegisterDatasetResponse*) override { return Unused(); }
  absl::Status GetDataset(const GetDatasetRequest&, GetDatasetResponse*) override { return Unused(); }
  absl::Status GetOrCreateJob(const GetOrCreateJobRequest&, GetOrCreateJobResponse*) override { return Unused(); }
  absl::Status ClientHeartbeat(const ClientHeartbeatRequest&, ClientHeartbeatResponse*) override { return Unused(); }
  absl::Status ReleaseClient(const ReleaseClientRequest&, ReleaseClientResponse*) override { return Unused(); }
  absl::Status GetStatus(const GetStatusRequest&, DispatcherStatus*) override { return Unused(); }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not a worker's call"); }

  absl::Mutex mu_;
  std::deque<WorkerHeartbeatResponse> heartbeats_ ABSL_GUARDED_BY(mu_);
  std::deque<GetSplitsResponse> splits_ ABSL_GUARDED_BY(mu_);
  int tasks_given_ ABSL_GUARDED_BY(mu_) = 0;
};

std::shared_ptr<const PathPolicy> DataPaths() {
  static const auto* paths = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    const std::string dir = base + "/tfdata_worker_rpc_fuzz." + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    auto policy = PathPolicy::Create({dir}, "--allowed-path");
    if (!policy.ok()) __builtin_trap();
    return new std::shared_ptr<const PathPolicy>(std::make_shared<const PathPolicy>(*std::move(policy)));
  }();
  return *paths;
}

WorkerConfig MakeConfig() {
  WorkerConfig config;
  config.worker_address = "w0:1";
  config.buffer_elements = 16;
  config.buffer_bytes = 1 << 20;
  config.max_task_memory = 64 << 20;
  config.build_options.paths = DataPaths();
  config.build_options.functions.allow_plugins = false;
  config.build_options.functions.paths = DataPaths();
  config.dispatcher_retry = absl::Milliseconds(10);
  config.cross_trainer_cache_bytes = 1 << 20;
  config.round_expiry = absl::Milliseconds(20);
  return config;
}

// Record 1: a reply with one task built from a few bytes and a pipeline text.
WorkerHeartbeatResponse TaskReply(std::span<const uint8_t> p) {
  auto at = [&](size_t i) -> uint8_t { return i < p.size() ? p[i] : 0; };
  WorkerHeartbeatResponse resp;
  TaskDef* def = resp.add_new_tasks();
  def->set_task_id(static_cast<int8_t>(at(0)));  // small ids, negative ones too
  def->set_iteration_id(1);
  def->set_job_id(1);
  def->set_dataset_id("d");
  def->set_mode(static_cast<ProcessingMode>(at(1) % 8));  // 7: not a mode
  def->set_compression(static_cast<Compression>(at(2) % 4));
  def->set_num_consumers(static_cast<int8_t>(at(3)));
  def->set_cross_trainer_cache(at(4) & 1);
  def->set_num_workers((at(4) >> 1) & 7);
  def->set_worker_index((at(4) >> 4) & 7);
  if (p.size() > 5) {
    const std::string_view text(reinterpret_cast<const char*>(p.data() + 5), p.size() - 5);
    auto loaded = ParsePipelineText(text);
    if (loaded.ok()) *def->mutable_pipeline() = std::move(loaded->pipeline);
  }
  return resp;
}

void Clamp(GetElementsRequest& req) {
  const int32_t t = req.timeout_ms();
  if (t < 1 || t > 20) req.set_timeout_ms(1 + static_cast<int32_t>(static_cast<uint32_t>(t) % 20));
}

void Run(const uint8_t* data, size_t size) {
  auto fake = std::make_unique<FakeDispatcher>();
  FakeDispatcher* dispatcher = fake.get();
  auto worker = std::make_shared<Worker>(MakeConfig(), std::move(fake));  // not Start()ed: no thread
  RecordReader in(data, size);
  Record r;
  while (in.Next(&r)) {
    switch (r.kind % kNumKinds) {
      case kQueueHeartbeat: {
        WorkerHeartbeatResponse resp;
        ParsePayload(r.payload, &resp);
        dispatcher->QueueHeartbeat(std::move(resp));
        break;
      }
      case kQueueTask: dispatcher->QueueHeartbeat(TaskReply(r.payload)); break;
      case kHeartbeat: worker->Heartbeat().IgnoreError(); break;
      case kQueueSplits: {
        GetSplitsResponse resp;
        ParsePayload(r.payload, &resp);
        dispatcher->QueueSplits(std::move(resp));
        break;
      }
      case kGetElements:
      case kGetElementsOfTask: {
        GetElementsRequest req;
        std::span<const uint8_t> payload = r.payload;
        int64_t task = -1;
        if (r.kind % kNumKinds == kGetElementsOfTask && !payload.empty()) {
          const std::vector<int64_t> ids = worker->TaskIds();
          if (!ids.empty()) task = ids[payload[0] % ids.size()];
          payload = payload.subspan(1);
        }
        ParsePayload(payload, &req);
        if (task >= 0 || r.kind % kNumKinds == kGetElementsOfTask) req.set_task_id(task);
        Clamp(req);
        worker->GetElements(req, /*remote_peer=*/req.client_id() & 1).IgnoreError();
        break;
      }
      case kStats: {
        const std::vector<int64_t> ids = worker->TaskIds();
        if (!ids.empty()) worker->Stats(ids[(r.payload.empty() ? 0 : r.payload[0]) % ids.size()]).IgnoreError();
        break;
      }
      case kSleep: absl::SleepFor(absl::Milliseconds(1)); break;
      case kLeave: worker->Leave(); break;
    }
  }
  worker->Stop();
}

// ---- seeds ----------------------------------------------------------------------------------------

std::string TaskBytes(uint8_t id, ProcessingMode mode, Compression compression, uint8_t consumers, uint8_t flags,
                      std::string_view pipeline) {
  std::string s;
  s += static_cast<char>(id);
  s += static_cast<char>(mode);
  s += static_cast<char>(compression);
  s += static_cast<char>(consumers);
  s += static_cast<char>(flags);
  s += pipeline;
  return s;
}

void WriteSeeds(const std::string& dir) {
  auto get = [](int64_t task, int32_t max_elements, int64_t round, int32_t consumer, std::string trainer) {
    GetElementsRequest req;
    req.set_task_id(task);
    req.set_client_id(1);
    req.set_max_elements(max_elements);
    req.set_timeout_ms(5);
    req.set_round_index(round);
    req.set_consumer_index(consumer);
    req.set_trainer_id(trainer);
    return req;
  };
  GetSplitsResponse splits;
  Split* s = splits.add_splits();
  s->set_index(0);
  s->set_begin(0);
  s->set_end(5);
  s = splits.add_splits();
  s->set_index(1);
  s->set_begin(5);
  s->set_end(10);

  RecordWriter()
      .Add(kQueueTask, TaskBytes(1, PARALLEL_EPOCHS, COMPRESSION_SNAPPY, 0, 0,
                                 "op { range { stop: 50 } } op { batch { batch_size: 4 } }"))
      .Add(kHeartbeat, "")
      .Add(kSleep, "")
      .Add(kGetElements, get(1, 8, 0, 0, "").SerializeAsString())
      .Add(kGetElementsOfTask, std::string(1, '\0') + get(0, 100, 0, 0, "").SerializeAsString())
      .Add(kStats, "")
      .Add(kHeartbeat, "")
      .Write(dir, "parallel_epochs");

  RecordWriter()
      .Add(kQueueSplits, splits)
      .Add(kQueueTask, TaskBytes(2, DISTRIBUTED_EPOCH, COMPRESSION_AUTO, 0, 0,
                                 "op { range { stop: 10 } } op { map { fn { arith { op: ADD value: 1 } } } }"))
      .Add(kHeartbeat, "")
      .Add(kSleep, "")
      .Add(kGetElements, get(2, 3, 0, 0, "").SerializeAsString())
      .Add(kHeartbeat, "")
      .Add(kLeave, "")
      .Add(kGetElements, get(2, 3, 0, 0, "").SerializeAsString())
      .Write(dir, "distributed_epoch");

  RecordWriter()
      .Add(kQueueTask,
           TaskBytes(3, PARALLEL_EPOCHS, COMPRESSION_NONE, 2, 0, "op { range { stop: 10 } } op { repeat {} }"))
      .Add(kQueueTask, TaskBytes(4, PARALLEL_EPOCHS, COMPRESSION_NONE, 0, 1,
                                 "op { range { stop: 1000 } } op { shuffle { buffer_size: 10 } }"))
      .Add(kQueueTask, TaskBytes(5, SHARD_DATA, COMPRESSION_NONE, 0, (2 << 1) | (1 << 4), "op { range { stop: 20 } }"))
      .Add(kHeartbeat, "")
      .Add(kHeartbeat, "")
      .Add(kHeartbeat, "")
      .Add(kSleep, "")
      .Add(kGetElements, get(3, 1, 0, 0, "").SerializeAsString())
      .Add(kGetElements, get(3, 1, 0, 1, "").SerializeAsString())
      .Add(kGetElements, get(3, 1, 1, 0, "").SerializeAsString())
      .Add(kGetElements, get(4, 5, 0, 0, "a").SerializeAsString())
      .Add(kGetElements, get(4, 5, 0, 0, "b").SerializeAsString())
      .Add(kGetElements, get(5, 5, 0, 0, "").SerializeAsString())
      .Write(dir, "coordinated_cache_sharded");

  WorkerHeartbeatResponse drop;
  drop.add_tasks_to_delete(1);
  drop.add_tasks_to_delete(-3);
  RecordWriter()
      .Add(kQueueTask, TaskBytes(1, PARALLEL_EPOCHS, COMPRESSION_NONE, 0, 0, "op { range { stop: 5 } }"))
      .Add(kHeartbeat, "")
      .Add(kQueueHeartbeat, drop)
      .Add(kGetElements, get(1, 8, 0, 0, "").SerializeAsString())
      .Add(kHeartbeat, "")
      .Add(kGetElements, get(1, 8, 0, 0, "").SerializeAsString())
      .Write(dir, "delete");

  // Huge sizes (issue 16's worker crashers): the task's budget must fail them, not the worker.
  RecordWriter()
      .Add(kQueueTask, TaskBytes(1, PARALLEL_EPOCHS, COMPRESSION_NONE, 0, 0,
                                 "op { range { stop: 10 } } op { batch { batch_size: 99999999999 } }"))
      .Add(kQueueTask, TaskBytes(2, PARALLEL_EPOCHS, COMPRESSION_NONE, 0, 0,
                                 "op { range { stop: 100000000000 } } op { shuffle { buffer_size: 100000000000 } }"))
      .Add(kHeartbeat, "")
      .Add(kHeartbeat, "")
      .Add(kGetElements, get(1, 8, 0, 0, "").SerializeAsString())
      .Add(kGetElements, get(2, 2147483647, 0, 0, "").SerializeAsString())
      .Write(dir, "huge");
}

}  // namespace
}  // namespace tfdata::service

extern "C" int LLVMFuzzerInitialize(int*, char***) { return tfdata::fuzz::InitRpcFuzzer(tfdata::service::WriteSeeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfdata::service::Run(data, size);
  return 0;
}
