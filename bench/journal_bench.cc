// Journal benchmark: how long a fault-tolerant dispatcher takes to replay N records, and how many
// synced appends per second the work directory's disk allows (each state-changing RPC is one).
//
//   build/tfdata_journal_bench DIR [RECORDS]     (default 1,000,000 records)
//
// The journal is a realistic mix for a long distributed_epoch job: one dataset, worker, job,
// iteration and task, then split assignments and delivery reports alternating.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "lib/pipeline/loader.h"
#include "lib/service/dispatcher/dispatcher_state.h"
#include "lib/service/dispatcher/journal.h"

using namespace tfdata;
using namespace tfdata::service;
using Clock = std::chrono::steady_clock;

static double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [RECORDS]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const long n = argc > 2 ? std::atol(argv[2]) : 1000000;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/journal";

  std::vector<Update> updates(5);
  auto loaded = ParsePipelineText("op { range { stop: 1000000000000 } } op { batch { batch_size: 1024 } }");
  if (!loaded.ok()) return 1;
  auto* d = updates[0].mutable_register_dataset();
  d->set_dataset_id("1");
  d->set_fingerprint("f");
  *d->mutable_pipeline() = loaded->pipeline;
  updates[1].mutable_register_worker()->set_worker_address("localhost:5051");
  auto* j = updates[2].mutable_create_job();
  j->set_job_id(1);
  j->set_dataset_id("1");
  j->set_mode(DISTRIBUTED_EPOCH);
  auto* it = updates[3].mutable_create_iteration();
  it->set_iteration_id(1);
  it->set_job_id(1);
  auto* t = updates[4].mutable_create_task();
  t->set_task_id(1);
  t->set_iteration_id(1);
  t->set_worker_address("localhost:5051");
  for (long i = 0; static_cast<long>(updates.size()) < n; ++i) {
    Update a;
    auto* s = a.mutable_assign_splits();
    s->set_task_id(1);
    s->set_epoch(0);
    s->set_first(i * 2);
    s->set_count(2);
    updates.push_back(a);
    Update del;
    del.mutable_deliver_splits()->set_task_id(1);
    del.mutable_deliver_splits()->set_splits_delivered(i * 2);
    updates.push_back(del);
  }
  updates.resize(static_cast<size_t>(n));
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << EncodeJournal(updates);
  }
  const auto bytes = std::filesystem::file_size(path);

  const auto start = Clock::now();
  auto contents = ReadJournal(path);
  if (!contents.ok()) {
    std::fprintf(stderr, "%s\n", contents.status().ToString().c_str());
    return 1;
  }
  const double read_s = Seconds(start);
  DispatcherState state;
  long rejected = 0;
  for (const Update& u : contents->updates) rejected += state.Apply(u).ok() ? 0 : 1;
  const double total_s = Seconds(start);
  std::printf(
      "replay: %ld records, %.1f MB: read+check %.3f s, apply %.3f s, total %.3f s (%.2f M records/s); %ld rejected\n",
      n, bytes / 1e6, read_s, total_s - read_s, total_s, n / total_s / 1e6, rejected);

  // The same state compacted: one snapshot record.
  Update snapshot;
  *snapshot.mutable_snapshot() = state.Snapshot();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << EncodeJournal({snapshot});
  }
  const auto compacted_bytes = std::filesystem::file_size(path);
  const auto c0 = Clock::now();
  auto compacted = ReadJournal(path);
  if (!compacted.ok()) return 1;
  DispatcherState restored;
  for (const Update& u : compacted->updates) rejected += restored.Apply(u).ok() ? 0 : 1;
  const double compacted_s = Seconds(c0);
  std::printf("replay after compaction: 1 snapshot record, %.1f kB: %.6f s; %ld rejected\n", compacted_bytes / 1e3,
              compacted_s, rejected);

  // Synced appends, as a live fault-tolerant dispatcher does them.
  std::filesystem::remove(path);
  auto file = OpenJournalFile(path);
  if (!file.ok()) return 1;
  JournalWriter w(*std::move(file), 0, path);
  const int appends = 2000;
  const auto t0 = Clock::now();
  for (int i = 0; i < appends; ++i) {
    if (!w.Append(updates[5 + static_cast<size_t>(i) % 2]).ok()) return 1;
  }
  const double s = Seconds(t0);
  std::printf("synced appends: %d in %.3f s (%.0f per second, %.0f us each) in %s\n", appends, s, appends / s,
              s / appends * 1e6, dir.c_str());
  return 0;
}
