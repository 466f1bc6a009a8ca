// The dispatcher journal: format, torn tails, corruption, failed writes (through the JournalFile
// seam), and a dispatcher recovering its state from it.
#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/dispatcher/journal.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::service;
using namespace tfdata::testing;

namespace {

Update Worker(const std::string& address) {
  Update u;
  u.mutable_register_worker()->set_worker_address(address);
  return u;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Writes through to a real file but can be told to fail: after `fail_after` more appends, an
// append writes only half of its bytes and reports `failure`.
class FlakyFile final : public JournalFile {
 public:
  FlakyFile(std::unique_ptr<JournalFile> real, int* fail_after, absl::Status failure)
      : real_(std::move(real)), fail_after_(fail_after), failure_(std::move(failure)) {}
  absl::Status Append(std::string_view bytes) override {
    if (*fail_after_ == 0) {
      (void)real_->Append(bytes.substr(0, bytes.size() / 2));
      return failure_;
    }
    if (*fail_after_ > 0) --*fail_after_;
    return real_->Append(bytes);
  }
  absl::Status Sync() override { return real_->Sync(); }
  absl::Status Truncate(uint64_t size) override { return real_->Truncate(size); }

 private:
  std::unique_ptr<JournalFile> real_;
  int* fail_after_;
  absl::Status failure_;
};

std::string Register(Dispatcher& d, const std::string& text, const std::string& id = "") {
  auto loaded = ParsePipelineText(text);
  REQUIRE(loaded.ok());
  RegisterDatasetRequest req;
  *req.mutable_pipeline() = loaded->pipeline;
  req.set_dataset_id(id);
  RegisterDatasetResponse resp;
  auto st = d.RegisterDataset(req, &resp);
  return st.ok() ? resp.dataset_id() : "error: " + std::string(st.message());
}

}  // namespace

TEST_CASE("journal: records round trip, and every cut of the last record is a torn tail", "[journal]") {
  TempDir dir;
  const std::string path = dir.Join("journal");
  const std::vector<Update> updates = {Worker("a:1"), Worker("b:2"), Worker("c:3")};
  const std::string bytes = EncodeJournal(updates);
  Write(path, bytes);
  auto all = ReadJournal(path);
  REQUIRE(all.ok());
  REQUIRE(all->updates.size() == 3);
  CHECK(all->updates[2].register_worker().worker_address() == "c:3");
  CHECK(all->valid_bytes == bytes.size());
  CHECK(all->warning.empty());

  const size_t last = EncodeJournal({updates[0], updates[1]}).size();
  for (size_t cut = last + 1; cut < bytes.size(); ++cut) {
    Write(path, bytes.substr(0, cut));
    auto torn = ReadJournal(path);
    REQUIRE(torn.ok());
    CHECK(torn->updates.size() == 2);
    CHECK(torn->valid_bytes == last);
    CHECK_THAT(torn->warning, Catch::Contains("is torn"));
  }
  // A complete last record with a bad checksum is torn too (the write was cut inside it).
  std::string flipped = bytes;
  flipped.back() ^= 0x40;
  Write(path, flipped);
  auto bad_last = ReadJournal(path);
  REQUIRE(bad_last.ok());
  CHECK(bad_last->updates.size() == 2);
  CHECK_THAT(bad_last->warning, Catch::Contains("checksum mismatch"));
  // Missing and empty journals have no records.
  CHECK(ReadJournal(dir.Join("none"))->updates.empty());
}

TEST_CASE("journal: corruption before the last record is an error naming the file and offset", "[journal]") {
  TempDir dir;
  const std::string path = dir.Join("journal");
  std::string bytes = EncodeJournal({Worker("a:1"), Worker("b:2"), Worker("c:3")});
  bytes[kJournalHeaderSize + 9] ^= 0x01;  // inside the first record's payload
  Write(path, bytes);
  auto r = ReadJournal(path);
  REQUIRE_FALSE(r.ok());
  CHECK(absl::IsDataLoss(r.status()));
  CHECK_THAT(std::string(r.status().message()), Catch::Contains(path + ": corrupt record at offset 8"));
  Write(path, "NOTAJRNLxxxxxxxx");
  CHECK_THAT(std::string(ReadJournal(path).status().message()), Catch::Contains("not a tfdata journal"));
}

TEST_CASE("journal: a failed write is cut back, so later records follow the last good one", "[journal]") {
  TempDir dir;
  const std::string path = dir.Join("journal");
  int fail_after = 1;
  auto real = OpenJournalFile(path);
  REQUIRE(real.ok());
  JournalWriter w(std::make_unique<FlakyFile>(*std::move(real), &fail_after, absl::ResourceExhaustedError("disk full")),
                  0, path);
  REQUIRE(w.Append(Worker("a:1")).ok());
  CHECK(absl::IsResourceExhausted(w.Append(Worker("b:2"))));  // half written, then cut off
  fail_after = -1;
  REQUIRE(w.Append(Worker("c:3")).ok());
  auto r = ReadJournal(path);
  REQUIRE(r.ok());
  CHECK(r->warning.empty());
  REQUIRE(r->updates.size() == 2);
  CHECK(r->updates[1].register_worker().worker_address() == "c:3");
}

TEST_CASE("journal: a fault-tolerant dispatcher recovers ids, jobs and tasks, and a failed write fails the RPC",
          "[journal][dispatcher]") {
  TempDir dir;
  DispatcherConfig config;
  config.fault_tolerant = true;
  config.work_dir = dir.Join("work");  // created on start
  int fail_after = -1;
  config.open_journal_file = [&](const std::string& path) -> absl::StatusOr<std::unique_ptr<JournalFile>> {
    auto real = OpenJournalFile(path);
    if (!real.ok()) return real.status();
    return std::unique_ptr<JournalFile>(
        std::make_unique<FlakyFile>(*std::move(real), &fail_after, absl::ResourceExhaustedError("disk full")));
  };
  int64_t job_id = 0;
  {
    Dispatcher d(config);
    REQUIRE(d.Recover().ok());
    CHECK(Register(d, "op { range { stop: 10 } }") == "1");
    CHECK(Register(d, "op { range { stop: 20 } }", "mine") == "mine");
    WorkerHeartbeatRequest hb;
    hb.set_worker_address("w:1");
    WorkerHeartbeatResponse hb_resp;
    REQUIRE(d.WorkerHeartbeat(hb, &hb_resp).ok());
    GetOrCreateJobRequest job;
    job.set_dataset_id("1");
    job.set_mode(PARALLEL_EPOCHS);
    job.set_job_name("shared");
    GetOrCreateJobResponse job_resp;
    REQUIRE(d.GetOrCreateJob(job, &job_resp).ok());
    job_id = job_resp.job_id();
    // The disk fills up: the registration fails and leaves no trace.
    fail_after = 0;
    CHECK_THAT(Register(d, "op { range { stop: 30 } }"), Catch::Contains("could not be journaled: "));
    GetDatasetRequest get;
    get.set_dataset_id("2");
    GetDatasetResponse get_resp;
    CHECK(absl::IsNotFound(d.GetDataset(get, &get_resp)));
    fail_after = -1;
  }
  Dispatcher again(config);
  REQUIRE(again.Recover().ok());
  CHECK(again.NumWorkers() == 1);
  CHECK(Register(again, "op { range { stop: 10 } }") == "1");  // same fingerprint, same id
  CHECK(Register(again, "op { range { stop: 30 } }") == "2");  // new ids continue
  GetOrCreateJobRequest job;
  job.set_dataset_id("1");
  job.set_mode(PARALLEL_EPOCHS);
  job.set_job_name("shared");
  GetOrCreateJobResponse job_resp;
  REQUIRE(again.GetOrCreateJob(job, &job_resp).ok());
  CHECK(job_resp.job_id() == job_id);  // the named job survived
  WorkerHeartbeatRequest hb;
  hb.set_worker_address("w:1");
  WorkerHeartbeatResponse hb_resp;
  REQUIRE(again.WorkerHeartbeat(hb, &hb_resp).ok());
  REQUIRE(hb_resp.new_tasks_size() == 1);  // its task, to the worker that reported none running
}

TEST_CASE("journal: a work directory that cannot be created, and corruption, stop the start", "[journal][dispatcher]") {
  TempDir dir;
  WriteFile(dir.Join("file"), "x");
  DispatcherConfig config;
  config.fault_tolerant = true;
  config.work_dir = dir.Join("file/sub");
  Dispatcher d(config);
  auto st = d.Recover();
  REQUIRE_FALSE(st.ok());
  CHECK_THAT(std::string(st.message()), Catch::Contains("cannot create it"));

  std::string bytes = EncodeJournal({Worker("a:1"), Worker("b:2")});
  bytes[kJournalHeaderSize + 9] ^= 0x01;
  REQUIRE(std::filesystem::create_directories(dir.Join("bad")));
  Write(dir.Join("bad/journal"), bytes);
  config.work_dir = dir.Join("bad");
  Dispatcher corrupt(config);
  auto c = corrupt.Recover();
  CHECK(absl::IsDataLoss(c));
  CHECK_THAT(std::string(c.message()), Catch::Contains("journal: corrupt record at offset 8"));

  // A full disk at start: the header cannot be written.
  DispatcherConfig full;
  full.fault_tolerant = true;
  full.work_dir = dir.Join("full");
  int never = 0;
  full.open_journal_file = [&](const std::string& path) -> absl::StatusOr<std::unique_ptr<JournalFile>> {
    auto real = OpenJournalFile(path);
    if (!real.ok()) return real.status();
    return std::unique_ptr<JournalFile>(
        std::make_unique<FlakyFile>(*std::move(real), &never, absl::ResourceExhaustedError("no space left on device")));
  };
  Dispatcher no_space(full);
  auto ns = no_space.Recover();
  CHECK(absl::IsResourceExhausted(ns));
  CHECK_THAT(std::string(ns.message()), Catch::Contains("cannot write the journal: no space left on device"));

  DispatcherConfig no_dir;
  no_dir.fault_tolerant = true;
  Dispatcher nd(no_dir);
  CHECK(absl::IsInvalidArgument(nd.Recover()));
}

TEST_CASE("journal: compaction rewrites the journal as one snapshot that restores the same state",
          "[journal][dispatcher]") {
  TempDir dir;
  DispatcherConfig config;
  config.fault_tolerant = true;
  config.work_dir = dir.Join("work");
  config.compact_after_records = 10;
  StateSnapshot before;
  {
    Dispatcher d(config);
    REQUIRE(d.Recover().ok());
    for (int i = 0; i < 25; ++i)
      CHECK(Register(d, "op { range { stop: " + std::to_string(i + 1) + " } }") == std::to_string(i + 1));
    WorkerHeartbeatRequest hb;
    hb.set_worker_address("w:1");
    WorkerHeartbeatResponse hb_resp;
    REQUIRE(d.WorkerHeartbeat(hb, &hb_resp).ok());
    GetOrCreateJobRequest job;
    job.set_dataset_id("3");
    job.set_mode(DISTRIBUTED_EPOCH);
    GetOrCreateJobResponse job_resp;
    REQUIRE(d.GetOrCreateJob(job, &job_resp).ok());
  }
  auto contents = ReadJournal(dir.Join("work/journal"));
  REQUIRE(contents.ok());
  REQUIRE(!contents->updates.empty());
  CHECK(contents->updates[0].has_snapshot());
  CHECK(contents->updates.size() < 10);  // 29 changes, compacted twice
  // The restored state is the state that was journaled: replay both ways and compare.
  DispatcherState replayed;
  for (const Update& u : contents->updates) REQUIRE(replayed.Apply(u).ok());
  CHECK(replayed.FindDataset("25") != nullptr);
  CHECK(replayed.NextJobId() == 2);
  CHECK(replayed.Workers().size() == 1);
  DispatcherState copy;
  Update snap;
  *snap.mutable_snapshot() = replayed.Snapshot();
  REQUIRE(copy.Apply(snap).ok());
  CHECK(copy.Snapshot().SerializeAsString() == replayed.Snapshot().SerializeAsString());
  CHECK_FALSE(copy.Apply(snap).ok());  // only on an empty state

  Dispatcher again(config);
  REQUIRE(again.Recover().ok());
  CHECK(Register(again, "op { range { stop: 100 } }") == "26");
}

TEST_CASE("journal: a restarted dispatcher hands out the splits planned at job creation, though list_files changed",
          "[journal][dispatcher]") {
  TempDir dir;
  const std::string data = dir.Join("data");
  std::filesystem::create_directories(data);
  for (const char* f : {"a.txt", "b.txt", "c.txt"}) Write(dir.Join(std::string("data/") + f), "x\n");
  DispatcherConfig config;
  config.fault_tolerant = true;
  config.work_dir = dir.Join("work");
  auto splits_of = [](Dispatcher& d, int64_t task_id, int64_t received) {
    GetSplitsRequest req;
    req.set_task_id(task_id);
    req.set_epoch(0);
    req.set_max_splits(16);
    req.set_splits_received(received);
    GetSplitsResponse resp;
    REQUIRE(d.GetSplits(req, &resp).ok());
    std::vector<std::string> files;
    for (const Split& s : resp.splits()) files.push_back(std::filesystem::path(s.file()).filename().string());
    return files;
  };
  int64_t task_id = 0;
  {
    Dispatcher d(config);
    REQUIRE(d.Recover().ok());
    const std::string id =
        Register(d, "op { list_files { pattern: \"" + data + "/*.txt\" shuffle: false } } op { text_line {} }");
    WorkerHeartbeatRequest hb;
    hb.set_worker_address("w:1");
    WorkerHeartbeatResponse hb_resp;
    REQUIRE(d.WorkerHeartbeat(hb, &hb_resp).ok());
    GetOrCreateJobRequest job;
    job.set_dataset_id(id);
    job.set_mode(DISTRIBUTED_EPOCH);
    GetOrCreateJobResponse job_resp;
    REQUIRE(d.GetOrCreateJob(job, &job_resp).ok());
    REQUIRE(d.WorkerHeartbeat(hb, &hb_resp).ok());
    REQUIRE(hb_resp.new_tasks_size() == 1);
    task_id = hb_resp.new_tasks(0).task_id();
    CHECK(splits_of(d, task_id, 0) == std::vector<std::string>{"a.txt", "b.txt", "c.txt"});
  }
  // Between the crash and the restart, a file goes and another comes.
  std::filesystem::remove(dir.Join("data/b.txt"));
  Write(dir.Join("data/d.txt"), "y\n");
  Dispatcher again(config);
  REQUIRE(again.Recover().ok());
  // The task's answer was lost (it reports 0 splits received): the same three files again.
  CHECK(splits_of(again, task_id, 0) == std::vector<std::string>{"a.txt", "b.txt", "c.txt"});
}
