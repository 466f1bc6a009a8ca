// The dispatcher's side of coordinated reads (round leases, rotation changes), worker tags and
// dataset compression, driven directly (no gRPC), with the journal on, through a restart.
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/dispatcher/journal.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::service;
using tfdata::testing::TempDir;

namespace {

// The full names of the fields of `d` and of its file's messages under it.
std::set<std::string> AllFields(const google::protobuf::Descriptor& d) {
  std::set<std::string> all;
  std::function<void(const google::protobuf::Descriptor&)> list = [&](const google::protobuf::Descriptor& m) {
    for (int i = 0; i < m.field_count(); ++i) {
      const auto* f = m.field(i);
      if (!all.insert(f->full_name()).second) continue;
      if (f->message_type() != nullptr && f->message_type()->file() == d.file()) list(*f->message_type());
    }
  };
  list(d);
  return all;
}

// Adds the full name of each field that `m`, or a message of its file under it, sets.
void SetFields(const google::protobuf::Message& m, std::set<std::string>& set) {
  const auto* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const auto* f : fields) {
    set.insert(f->full_name());
    if (f->message_type() == nullptr || f->message_type()->file() != m.GetDescriptor()->file()) continue;
    if (f->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, f); ++i) SetFields(r->GetRepeatedMessage(m, f, i), set);
    } else {
      SetFields(r->GetMessage(m, f), set);
    }
  }
}

DispatcherConfig FaultTolerant(const TempDir& dir) {
  DispatcherConfig c;
  c.fault_tolerant = true;
  c.work_dir = dir.Join("work");
  c.worker_timeout = absl::Hours(1);
  c.client_timeout = absl::InfiniteDuration();
  c.job_gc_timeout = absl::InfiniteDuration();
  return c;
}

std::string Register(Dispatcher& d, const std::string& text, Compression compression) {
  auto loaded = ParsePipelineText(text);
  REQUIRE(loaded.ok());
  RegisterDatasetRequest req;
  *req.mutable_pipeline() = loaded->pipeline;
  req.set_compression(compression);
  RegisterDatasetResponse resp;
  REQUIRE(d.RegisterDataset(req, &resp).ok());
  return resp.dataset_id();
}

WorkerHeartbeatResponse WorkerBeat(Dispatcher& d, const std::string& address, std::vector<std::string> tags = {}) {
  WorkerHeartbeatRequest req;
  req.set_worker_address(address);
  for (const auto& t : tags) req.add_worker_tags(t);
  WorkerHeartbeatResponse resp;
  REQUIRE(d.WorkerHeartbeat(req, &resp).ok());
  return resp;
}

int64_t Consumer(Dispatcher& d, const std::string& ds, int index) {
  GetOrCreateJobRequest req;
  req.set_dataset_id(ds);
  req.set_mode(PARALLEL_EPOCHS);
  req.set_job_name("steps");
  req.set_num_consumers(2);
  req.set_consumer_index(index);
  GetOrCreateJobResponse resp;
  REQUIRE(d.GetOrCreateJob(req, &resp).ok());
  return resp.client_id();
}

ClientHeartbeatResponse ClientBeat(Dispatcher& d, int64_t client, int index, int64_t current, int64_t limit,
                                   int64_t window) {
  ClientHeartbeatRequest req;
  req.set_client_id(client);
  req.set_consumer_index(index);
  req.set_current_round(current);
  req.set_round_limit(limit);
  req.set_round_window(window);
  ClientHeartbeatResponse resp;
  REQUIRE(d.ClientHeartbeat(req, &resp).ok());
  return resp;
}

const TaskInfo* TaskOn(const ClientHeartbeatResponse& resp, const std::string& address) {
  for (const TaskInfo& t : resp.tasks()) {
    if (t.worker_address() == address) return &t;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("dispatcher rounds: leases, joins at the highest limit, ends of lost workers, and a restart",
          "[coordinated][dispatcher][journal]") {
  TempDir dir;
  const DispatcherConfig config = FaultTolerant(dir);
  std::string ds;
  int64_t c0 = 0, c1 = 0;
  {
    Dispatcher d(config);
    REQUIRE(d.Recover().ok());
    ds = Register(d, "op { range { stop: 10 } } op { repeat {} }", COMPRESSION_AUTO);
    WorkerBeat(d, "w:1", {"ssd"});
    c0 = Consumer(d, ds, 0);
    c1 = Consumer(d, ds, 1);
    // Leases: current round + the window asked for (at least 16), never lowered.
    CHECK(ClientBeat(d, c0, 0, 100, 0, 50).round_limit() == 150);
    CHECK(ClientBeat(d, c1, 1, 10, 0, 1).round_limit() == 26);
    auto again = ClientBeat(d, c0, 0, 0, 0, 1);
    CHECK(again.round_limit() == 150);
    REQUIRE(TaskOn(again, "w:1") != nullptr);
    CHECK(TaskOn(again, "w:1")->starting_round() == 0);
    CHECK(TaskOn(again, "w:1")->worker_tags_size() == 1);
    // A joining worker enters the rotation at the highest limit granted.
    auto w2 = WorkerBeat(d, "w:2");
    REQUIRE(w2.new_tasks_size() == 1);
    CHECK(w2.new_tasks(0).num_consumers() == 2);
    CHECK(w2.new_tasks(0).compression() == COMPRESSION_AUTO);
    auto seen = ClientBeat(d, c1, 1, 20, 26, 16);
    REQUIRE(TaskOn(seen, "w:2") != nullptr);
    CHECK(TaskOn(seen, "w:2")->starting_round() == 150);
    CHECK(TaskOn(seen, "w:2")->ending_round() == 0);
  }
  {
    // Restarted: the journal brings back the job, tasks, starting rounds, tags and compression.
    Dispatcher d(config);
    REQUIRE(d.Recover().ok());
    GetDatasetRequest get;
    get.set_dataset_id(ds);
    GetDatasetResponse got;
    REQUIRE(d.GetDataset(get, &got).ok());
    CHECK(got.compression() == COMPRESSION_AUTO);
    // A worker joining now waits until every consumer has reported the limit it holds.
    CHECK(WorkerBeat(d, "w:3").new_tasks_size() == 0);
    auto r0 = ClientBeat(d, c0, 0, 120, 150, 16);
    CHECK(r0.round_limit() == 150);
    REQUIRE(TaskOn(r0, "w:2") != nullptr);
    CHECK(TaskOn(r0, "w:2")->starting_round() == 150);
    CHECK(TaskOn(r0, "w:1")->worker_tags(0) == "ssd");
    CHECK(WorkerBeat(d, "w:3").new_tasks_size() == 0);
    ClientBeat(d, c1, 1, 30, 46, 16);
    REQUIRE(WorkerBeat(d, "w:3").new_tasks_size() == 1);
    CHECK(TaskOn(ClientBeat(d, c1, 1, 30, 46, 16), "w:3")->starting_round() == 150);
    // Workers lost: their tasks stay listed with the round they leave the rotation at.
    d.CheckTimeouts(absl::Now() + absl::Hours(2));
    auto after = ClientBeat(d, c0, 0, 130, 150, 16);
    REQUIRE(TaskOn(after, "w:1") != nullptr);
    CHECK(TaskOn(after, "w:1")->ending_round() == 150);
    CHECK(TaskOn(after, "w:2")->ending_round() == 150);
  }
  // The journal replays to the same state as its snapshot (new fields included).
  auto contents = ReadJournal(dir.Join("work/journal"));
  REQUIRE(contents.ok());
  DispatcherState replayed;
  for (const Update& u : contents->updates) REQUIRE(replayed.Apply(u).ok());
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = replayed.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == replayed.Snapshot().SerializeAsString());
  const auto* iteration = copy.FindIteration(copy.FindJobByName("steps")->iterations.back());
  CHECK(iteration->ended_tasks.size() == 3);
  CHECK(copy.FindJobByName("steps")->num_consumers == 2);
  CHECK(copy.FindDataset(ds)->compression == COMPRESSION_AUTO);
  // Snapshot and Restore copy fields from one list (dispatcher_state.cc): a StateSnapshot field
  // left out of it is never set, here, where the state has every kind of record.
  // The union over every state the journal passed through (tasks end before the last one).
  std::set<std::string> set;
  DispatcherState step;
  for (const Update& u : contents->updates) {
    REQUIRE(step.Apply(u).ok());
    SetFields(step.Snapshot(), set);
  }
  std::set<std::string> unset = AllFields(*StateSnapshot::descriptor());
  for (const std::string& f : set) unset.erase(f);
  // Not reached by this history (coordinated reads, one repetition): a finished task, lost or
  // distributed_epoch split progress, a collected iteration, the cross-trainer cache. A field
  // added anywhere else fails here until dispatcher_state.cc's lists copy it.
  for (const char* f :
       {"Task.finished", "Task.splits_assigned", "Task.splits_delivered", "Task.last_first", "Task.last_count",
        "Iteration.splits_lost", "Iteration.garbage_collected", "Iteration.next_split", "Iteration.repetition",
        "EpochSplit.epoch", "EpochSplit.next_split", "Job.cross_trainer_cache",
        // Splits a leaving worker gave back (tests/worker_leave_test.cc checks these).
        "Task.last_indices", "Task.epochs_ended", "Iteration.returned_splits", "EpochSplits.epoch",
        "EpochSplits.indices",
        // Exactly-once jobs and outstanding splits (tests/dispatcher_state_test.cc checks these).
        "Job.exactly_once", "Task.outstanding_epochs", "Task.outstanding_indices", "Task.last_skips",
        // distributed_epoch split plans (tests/journal_test.cc checks these).
        "Job.split_plan",
        // Resumed jobs (tests/dispatcher_state_test.cc checks this).
        "Job.resume"}) {
    unset.erase(std::string("tfdata.service.StateSnapshot.") + f);
  }
  for (const char* f : {"SkipRanges.begins", "SkipRanges.ends", "SplitPlanRecord.kind", "SplitPlanRecord.elements",
                        "SplitPlanRecord.split_size", "SplitPlanRecord.files", "SplitPlanRecord.inputs"}) {
    unset.erase(std::string("tfdata.service.") + f);
  }
  CHECK(unset == std::set<std::string>{});
}

TEST_CASE("dispatcher: worker tags are recorded, and a change of tags is journaled", "[dispatcher][selection]") {
  DispatcherState s;
  Update u;
  u.mutable_register_worker()->set_worker_address("w:1");
  u.mutable_register_worker()->add_tags("a");
  REQUIRE(s.Apply(u).ok());
  CHECK(s.WorkerTags("w:1") == std::vector<std::string>{"a"});
  CHECK_FALSE(s.Apply(u).ok());  // the same registration twice is inconsistent
  u.mutable_register_worker()->add_tags("b");
  REQUIRE(s.Apply(u).ok());  // new tags
  CHECK(s.WorkerTags("w:1") == std::vector<std::string>{"a", "b"});
  CHECK(s.WorkerTags("w:2").empty());
}
