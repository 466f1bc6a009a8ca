// libFuzzer target for the dispatcher core's RPC surface: a sequence of arbitrary requests (unknown
// ids, negative counts, huge sizes, calls out of order) to a fault-tolerant Dispatcher, with time
// driven by the input. No call may crash, and the state must always be what its journal replays
// to: after a "restart" record and at the end, the journal is read back and replayed into a fresh
// DispatcherState, and a second Dispatcher recovers from it; both must equal the live state.
//
// Input (framing: rpc_fuzz_input.h): one config byte (bits 0-4: compaction after 4 + n records;
// bit 5: static sharding over two fixed workers), then records whose kind picks
//   0 RegisterDataset  1 GetDataset  2 GetOrCreateJob  3 ClientHeartbeat  4 ReleaseClient
//   5 WorkerHeartbeat  6 GetSplits   (payload: the serialized request)
//   7 CheckTimeouts    (the clock first advances by payload[0] seconds)
//   8 restart          (check the journal, then continue on a Dispatcher recovered from it)
//
// Pipelines are built with a 64 MiB budget, without plugins, and may read only an empty temporary
// directory. With TFDATA_FUZZ_WRITE_SEEDS=DIR set, the binary writes a seed corpus to DIR and exits;
// TFDATA_FUZZ_VERBOSE=1 shows the service's log.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "google/protobuf/util/message_differencer.h"
#include "lib/core/memory_budget.h"
#include "lib/io/path_policy.h"
#include "lib/pipeline/fingerprint.h"
#include "lib/pipeline/loader.h"
#include "lib/pipeline/splits.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/dispatcher/dispatcher_state.h"
#include "lib/service/dispatcher/journal.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/rpc_fuzz_input.h"

namespace tfdata::service {
namespace {

using fuzz::ParsePayload;
using fuzz::Record;
using fuzz::RecordReader;
using fuzz::RecordWriter;

enum Kind : uint8_t {
  kRegisterDataset,
  kGetDataset,
  kGetOrCreateJob,
  kClientHeartbeat,
  kReleaseClient,
  kWorkerHeartbeat,
  kGetSplits,
  kCheckTimeouts,
  kRestart,
  kNumKinds
};

// Per process: the work directory (its journal is removed before each input) and an empty
// directory that is all pipelines may read.
struct Dirs {
  std::string work, data;
  std::shared_ptr<const PathPolicy> paths;
};

const Dirs& GetDirs() {
  static const Dirs* dirs = [] {
    auto* d = new Dirs;
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    const std::string root = base + "/tfdata_dispatcher_rpc_fuzz." + std::to_string(getpid());
    d->work = root + "/work";
    d->data = root + "/data";
    std::filesystem::create_directories(d->work);
    std::filesystem::create_directories(d->data);
    auto policy = PathPolicy::Create({d->data}, "--allowed-path");
    if (!policy.ok()) __builtin_trap();
    d->paths = std::make_shared<const PathPolicy>(*std::move(policy));
    return d;
  }();
  return *dirs;
}

DispatcherConfig MakeConfig(uint8_t knobs) {
  const Dirs& dirs = GetDirs();
  DispatcherConfig config;
  config.fault_tolerant = true;
  config.work_dir = dirs.work;
  config.worker_timeout = absl::Seconds(60);
  config.client_timeout = absl::Seconds(30);
  config.job_gc_timeout = absl::Seconds(30);
  config.compact_after_records = 4 + (knobs & 31);
  if (knobs & 32) config.worker_addresses = {"w0:1", "w1:1"};
  config.build_options.memory = std::make_shared<MemoryBudget>(64 << 20, "the fuzzer's memory budget");
  config.build_options.paths = dirs.paths;
  config.build_options.functions.allow_plugins = false;
  config.build_options.functions.paths = dirs.paths;
  return config;
}

[[noreturn]] void Fail(const std::string& what, const StateSnapshot* a = nullptr, const StateSnapshot* b = nullptr) {
  std::fprintf(stderr, "dispatcher_rpc_fuzz: %s\n", what.c_str());
  if (a != nullptr) std::fprintf(stderr, "--- live state:\n%s\n", a->DebugString().c_str());
  if (b != nullptr) std::fprintf(stderr, "--- replayed:\n%s\n", b->DebugString().c_str());
  __builtin_trap();
}

// The invariant: the journal replays to the live state, through a bare DispatcherState and through
// a recovering Dispatcher. Returns the recovered Dispatcher (to continue with after a restart).
std::unique_ptr<Dispatcher> CheckJournal(const Dispatcher& live, const DispatcherConfig& config) {
  const StateSnapshot want = live.SnapshotForTesting();
  auto contents = ReadJournal(config.work_dir + "/journal");
  if (!contents.ok()) Fail("the journal does not read back: " + contents.status().ToString());
  if (!contents->warning.empty()) Fail("the journal has a torn tail without a crash: " + contents->warning);
  DispatcherState replayed;
  for (const Update& u : contents->updates) replayed.Apply(u).IgnoreError();  // rejected live too
  const StateSnapshot got = replayed.Snapshot();
  if (!google::protobuf::util::MessageDifferencer::Equals(want, got)) {
    Fail("the journal replays to another state than the live one", &want, &got);
  }
  auto recovered = std::make_unique<Dispatcher>(config);
  if (auto st = recovered->Recover(); !st.ok()) Fail("recovery failed: " + st.ToString());
  const StateSnapshot again = recovered->SnapshotForTesting();
  if (!google::protobuf::util::MessageDifferencer::Equals(want, again)) {
    Fail("a recovered dispatcher has another state than the live one", &want, &again);
  }
  return recovered;
}

template <typename Req, typename Resp>
void Call(std::span<const uint8_t> payload, absl::Status (Dispatcher::*rpc)(const Req&, Resp*), Dispatcher& d) {
  Req req;
  ParsePayload(payload, &req);  // a payload that does not parse is sent as the empty request
  Resp resp;
  (d.*rpc)(req, &resp).IgnoreError();
}

void Run(const uint8_t* data, size_t size) {
  RecordReader in(data, size);
  const DispatcherConfig config = MakeConfig(in.Byte());
  std::error_code ec;
  std::filesystem::remove(config.work_dir + "/journal", ec);
  auto dispatcher = std::make_unique<Dispatcher>(config);
  if (auto st = dispatcher->Recover(); !st.ok()) Fail("recovery of an empty journal failed: " + st.ToString());
  absl::Time now = absl::Now();
  Record r;
  int restarts = 0;
  while (in.Next(&r)) {
    Dispatcher& d = *dispatcher;
    switch (r.kind % kNumKinds) {
      case kRegisterDataset: Call(r.payload, &Dispatcher::RegisterDataset, d); break;
      case kGetDataset: Call(r.payload, &Dispatcher::GetDataset, d); break;
      case kGetOrCreateJob: Call(r.payload, &Dispatcher::GetOrCreateJob, d); break;
      case kClientHeartbeat: Call(r.payload, &Dispatcher::ClientHeartbeat, d); break;
      case kReleaseClient: Call(r.payload, &Dispatcher::ReleaseClient, d); break;
      case kWorkerHeartbeat: Call(r.payload, &Dispatcher::WorkerHeartbeat, d); break;
      case kGetSplits: Call(r.payload, &Dispatcher::GetSplits, d); break;
      case kCheckTimeouts:
        now += absl::Seconds(r.payload.empty() ? 1 : r.payload[0]);
        d.CheckTimeouts(now);
        break;
      case kRestart:
        if (++restarts > 4) break;  // each costs a replay
        dispatcher = CheckJournal(d, config);
        break;
    }
  }
  CheckJournal(*dispatcher, config);
}

// ---- seeds ----------------------------------------------------------------------------------------

pipeline::Pipeline Pipe(const char* text) {
  auto p = ParsePipelineText(text);
  if (!p.ok()) {
    std::fprintf(stderr, "seed pipeline: %s\n", p.status().ToString().c_str());
    std::exit(1);
  }
  return p->pipeline;
}

void WriteSeeds(const std::string& dir) {
  RegisterDatasetRequest reg;
  *reg.mutable_pipeline() = Pipe("op { range { stop: 100 } } op { batch { batch_size: 4 } }");
  RegisterDatasetRequest reg_inf;
  *reg_inf.mutable_pipeline() = Pipe("op { range { stop: 10 } } op { repeat {} }");
  reg_inf.set_dataset_id("inf");
  GetOrCreateJobRequest job;
  job.set_dataset_id("1");
  job.set_mode(DISTRIBUTED_EPOCH);
  job.set_job_name("j");
  WorkerHeartbeatRequest hb;
  hb.set_worker_address("w0:1");
  hb.add_worker_tags("t");
  WorkerHeartbeatRequest hb_tasks = hb;
  hb_tasks.add_current_tasks(1);
  auto* p = hb_tasks.add_task_progress();
  p->set_task_id(1);
  p->set_splits_delivered(1);
  WorkerHeartbeatRequest leave = hb_tasks;
  leave.set_leaving(true);
  leave.mutable_task_progress(0)->set_splits_started(2);
  GetSplitsRequest splits;
  splits.set_task_id(1);
  splits.set_max_splits(3);
  ClientHeartbeatRequest chb;
  chb.set_client_id(1);
  chb.add_unreachable_workers("w0:1");
  ReleaseClientRequest rel;
  rel.set_client_id(1);
  GetDatasetRequest get;
  get.set_dataset_id("1");

  // A distributed_epoch read: register, job, worker, splits, progress, leave, restart.
  RecordWriter()
      .Byte(4)
      .Add(kRegisterDataset, reg)
      .Add(kGetDataset, get)
      .Add(kWorkerHeartbeat, hb)
      .Add(kGetOrCreateJob, job)
      .Add(kClientHeartbeat, chb)
      .Add(kWorkerHeartbeat, hb_tasks)
      .Add(kGetSplits, splits)
      .Add(kGetSplits, splits)
      .Add(kRestart, "")
      .Add(kGetSplits, splits)
      .Add(kWorkerHeartbeat, leave)
      .Add(kClientHeartbeat, chb)
      .Add(kReleaseClient, rel)
      .Add(kCheckTimeouts, "\x40")
      .Write(dir, "distributed_epoch");

  // Coordinated reads on an infinite pipeline, two consumers, then time-outs.
  GetOrCreateJobRequest coord;
  coord.set_dataset_id("inf");
  coord.set_mode(PARALLEL_EPOCHS);
  coord.set_job_name("c");
  coord.set_num_consumers(2);
  GetOrCreateJobRequest coord1 = coord;
  coord1.set_consumer_index(1);
  ClientHeartbeatRequest round;
  round.set_client_id(1);
  round.set_current_round(3);
  round.set_round_limit(8);
  round.set_round_window(4);
  RecordWriter()
      .Byte(31)
      .Add(kRegisterDataset, reg_inf)
      .Add(kWorkerHeartbeat, hb)
      .Add(kGetOrCreateJob, coord)
      .Add(kGetOrCreateJob, coord1)
      .Add(kClientHeartbeat, round)
      .Add(kWorkerHeartbeat, hb_tasks)
      .Add(kCheckTimeouts, "\x3c")
      .Add(kRestart, "")
      .Add(kWorkerHeartbeat, hb)
      .Add(kCheckTimeouts, "\xff")
      .Write(dir, "coordinated");

  // Static sharding over the fixed workers, a cross-trainer cache job, and a stranger worker.
  GetOrCreateJobRequest shard;
  shard.set_dataset_id("1");
  shard.set_mode(SHARD_DATA);
  GetOrCreateJobRequest ctc;
  ctc.set_dataset_id("1");
  ctc.set_mode(PARALLEL_EPOCHS);
  ctc.set_job_name("x");
  ctc.set_cross_trainer_cache(true);
  WorkerHeartbeatRequest stranger;
  stranger.set_worker_address("w9:1");
  WorkerHeartbeatRequest finished = hb;
  finished.add_current_tasks(1);
  finished.add_finished_tasks(1);
  RecordWriter()
      .Byte(32 | 8)
      .Add(kRegisterDataset, reg)
      .Add(kWorkerHeartbeat, hb)
      .Add(kWorkerHeartbeat, stranger)
      .Add(kGetOrCreateJob, shard)
      .Add(kGetOrCreateJob, ctc)
      .Add(kWorkerHeartbeat, finished)
      .Add(kReleaseClient, rel)
      .Add(kCheckTimeouts, "\x20")
      .Add(kRestart, "")
      .Write(dir, "static_sharding");

  // An exactly-once job, and a job resumed from a read state (issue 22): split 0 done, split 2
  // in part; readers' receipts, a restart.
  GetOrCreateJobRequest eo = job;
  eo.set_job_name("e");
  eo.set_exactly_once(true);
  GetOrCreateJobRequest resumed = eo;
  resumed.set_job_name("r");
  ResumePlan* plan = resumed.mutable_resume();
  plan->set_dataset_fingerprint(PipelineFingerprint(reg.pipeline()));
  plan->set_plan_fingerprint(SplitPlanFingerprint(*SplitPlan::Create(reg.pipeline(), BuildOptions{})));
  EpochResume* epoch = plan->add_epochs();
  epoch->add_done_begins(0);
  epoch->add_done_ends(1);
  SplitSkips* part = epoch->add_partial();
  part->set_split(2);
  part->add_begins(0);
  part->add_ends(1);
  GetSplitsRequest resumed_splits = splits;
  resumed_splits.set_task_id(2);
  ClientHeartbeatRequest receipts;
  receipts.set_client_id(2);
  SplitReceipt* receipt = receipts.add_split_receipts();
  receipt->set_split(2);
  receipt->add_range_begins(0);
  receipt->add_range_ends(1);
  receipt->set_count(1);
  RecordWriter()
      .Byte(4)
      .Add(kRegisterDataset, reg)
      .Add(kWorkerHeartbeat, hb)
      .Add(kGetOrCreateJob, eo)
      .Add(kGetOrCreateJob, resumed)
      .Add(kWorkerHeartbeat, hb_tasks)
      .Add(kGetSplits, splits)
      .Add(kGetSplits, resumed_splits)
      .Add(kClientHeartbeat, receipts)
      .Add(kRestart, "")
      .Add(kGetSplits, resumed_splits)
      .Add(kClientHeartbeat, receipts)
      .Add(kCheckTimeouts, "\x40")
      .Write(dir, "exactly_once_and_resume");

  // Huge sizes: a distributed_epoch job over a range of 10^12 elements (about 15 M splits).
  RegisterDatasetRequest huge;
  *huge.mutable_pipeline() = Pipe("op { range { stop: 1000000000000 } }");
  GetSplitsRequest more = splits;
  more.set_max_splits(16);
  RecordWriter()
      .Byte(31)
      .Add(kRegisterDataset, huge)
      .Add(kWorkerHeartbeat, hb)
      .Add(kGetOrCreateJob, job)
      .Add(kWorkerHeartbeat, hb_tasks)
      .Add(kGetSplits, more)
      .Write(dir, "huge_range");
}

}  // namespace
}  // namespace tfdata::service

extern "C" int LLVMFuzzerInitialize(int*, char***) { return tfdata::fuzz::InitRpcFuzzer(tfdata::service::WriteSeeds); }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfdata::service::Run(data, size);
  return 0;
}
