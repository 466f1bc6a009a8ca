// libFuzzer target for read states (issue 22), which come from outside (a checkpoint file, a
// Python dict, an RPC): arbitrary bytes must decode or fail cleanly, as a stored state and as a
// bare ResumePlan, and whatever is accepted must round-trip and merge without surprises.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "lib/service/client/read_state.h"
#include "lib/service/common/read_progress.h"

using namespace tfdata::service;

namespace {

void CheckPlan(const ResumePlan& plan) {
  auto p = ReadProgress::FromPlan(plan, plan.first_epoch() % 1000 + 16, "fuzz");
  if (p.ok()) {
    const ResumePlan once = p->ToPlan();
    auto again = ReadProgress::FromPlan(once, p->num_splits(), "fuzz");
    if (!again.ok() || again->ToPlan().SerializeAsString() != once.SerializeAsString()) std::abort();
    ReadProgress merged = *p;
    merged.Merge(*again);  // the union with itself is itself
    if (merged.ToPlan().SerializeAsString() != once.SerializeAsString()) std::abort();
    for (int64_t e = p->first_epoch() - 1; e < p->first_epoch() + 3; ++e) {
      // The copy-free queries agree with the copies.
      const SeqRanges excluded = p->Excluded(e);
      const auto partial = p->Partial(e);
      for (int64_t split = 0; split < std::min<int64_t>(p->num_splits(), 64); ++split) {
        const SeqRanges* handed = p->PartialSplit(e, split);
        if ((handed != nullptr) != partial.contains(split)) std::abort();
        if (p->Done(e, split) != (excluded.Contains(split) && handed == nullptr)) std::abort();
        const auto [begin, end] = p->NextRun(e, split);
        if (begin < split || begin >= end) std::abort();
        for (int64_t i = split; i < std::min<int64_t>(begin, split + 64); ++i) {
          if (!excluded.Contains(i)) std::abort();
        }
        // The run is not excluded, and what ends it is.
        for (int64_t i = begin; i < std::min({end, p->num_splits(), begin + 64}); ++i) {
          if (excluded.Contains(i)) std::abort();
        }
        if (end < p->num_splits() && !excluded.Contains(end)) std::abort();
      }
    }
  }
  auto s = ShardReadProgress::FromPlan(plan, "fuzz");
  if (s.ok()) {
    ResumePlan out;
    s->ToPlan(&out);
    auto again = ShardReadProgress::FromPlan(out, "fuzz");
    if (!again.ok()) std::abort();
    const ShardPositions positions(*s);
    for (int32_t shard = 0; shard < std::min<int32_t>(s->num_shards(), 4); ++shard) {
      int64_t last = -1;
      for (int64_t i = 0; i < 64; ++i) {
        const int64_t position = positions.Position(shard, i);
        if (position == std::numeric_limits<int64_t>::max()) break;
        // Positions of a stream that leaves the handed ones out: increasing, never handed.
        if (position <= last || s->Shard(shard).Contains(position)) std::abort();
        last = position;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto state = DecodeReadState(bytes, "fuzz");
  if (state.ok()) {
    auto back = DecodeReadState(EncodeReadState(*state), "fuzz");
    if (!back.ok() || back->SerializeAsString() != state->SerializeAsString()) std::abort();
    if (!MergeReadStates({*state, *state}).ok()) std::abort();
    CheckPlan(state->handed());
  }
  ResumePlan plan;
  if (plan.ParseFromArray(data, static_cast<int>(size))) CheckPlan(plan);
  return 0;
}
