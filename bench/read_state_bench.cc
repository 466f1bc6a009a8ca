// Read-state benchmark (issue 22): what a reader pays to keep its read state and to take one.
//
//   build/tfdata_read_state_bench
//
// - per element: ReadProgress::Handed, which Reader::Next() calls for every element of an
//   exactly-once read (elements in order within a split, 1,000 per split);
// - per state: SaveState's work (ToPlan + EncodeReadState) for a reader alone in its job, mid-epoch,
//   and for one of 8 readers of a shared job that took every 8th split of 10,000 in part (the
//   fragmented case), with its encoded size.
#include <chrono>
#include <cstdio>

#include "lib/service/client/read_state.h"
#include "lib/service/common/read_progress.h"

using namespace tfdata::service;
using Clock = std::chrono::steady_clock;

static double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

static ReadState StateOf(const ReadProgress& p) {
  ReadState s;
  s.set_version(kReadStateVersion);
  s.set_mode(DISTRIBUTED_EPOCH);
  s.set_num_splits(p.num_splits());
  *s.mutable_handed() = p.ToPlan();
  s.mutable_handed()->set_dataset_fingerprint("0123456789abcdef0123456789abcdef");
  s.mutable_handed()->set_plan_fingerprint("0123456789abcdef");
  return s;
}

static void TimeSave(const char* name, const ReadProgress& p) {
  const int calls = 20000;
  size_t bytes = 0;
  const auto start = Clock::now();
  for (int i = 0; i < calls; ++i) bytes = EncodeReadState(StateOf(p)).size();
  std::printf("%-52s %8.2f us per state, %6zu bytes\n", name, Seconds(start) / calls * 1e6, bytes);
}

int main() {
  // Per element.
  ReadProgress alone(10000);
  const int64_t elements = 20'000'000;
  auto start = Clock::now();
  for (int64_t i = 0; i < elements; ++i) {
    const int64_t split = i / 1000, seq = i % 1000;
    alone.Handed(0, split, seq);
    if (seq == 999) alone.SplitEnd(0, split, 1000);
  }
  std::printf("%-52s %8.1f ns per element\n", "Handed (in order, 1,000 per split)", Seconds(start) / elements * 1e9);
  // A reader alone, mid-epoch of a second pass: splits 0..4999 done, 4 in progress.
  ReadProgress mid(10000);
  for (int64_t split = 0; split < 5004; ++split) {
    for (int64_t seq = 0; seq < (split < 5000 ? 10 : 3); ++seq) mid.Handed(1, split, seq);
    if (split < 5000) mid.SplitEnd(1, split, 10);
  }
  TimeSave("SaveState, a reader alone in its job, mid-epoch", mid);
  // One of 8 readers of a shared job: part of every 8th split.
  ReadProgress shared(10000);
  for (int64_t split = 0; split < 10000; split += 8) {
    for (int64_t seq = 0; seq < 4; ++seq) shared.Handed(0, split, seq);
  }
  TimeSave("SaveState, 1 of 8 readers of a shared job (fragmented)", shared);
  return 0;
}
