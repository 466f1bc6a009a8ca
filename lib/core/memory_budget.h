// Memory budgets: how much a pipeline may hold, so that no pipeline can take its process down.
//
// Glossary
//   MemoryBudget  a limit in bytes and the bytes held against it, shared by every op of one task
//                 (a worker's task, or one `tfdata run`). Ops take bytes before they allocate
//                 what they keep (batch buffers, shuffle/prefetch buffers, the in-memory cache)
//                 and give them back when they let go. Thread-safe.
//   MemoryScope   what an op is given at build time: the budget (null: the process default) and
//                 the op's place for errors ("op 1 (batch)").
//   MemoryHold    the bytes one owner holds of a budget; returns them on destruction. Not
//                 thread-safe: one owner (an iterator, or a dataset under its own lock).
//
// A request over the limit fails with RESOURCE_EXHAUSTED, naming the op, what it asked for, and
// the limit, e.g. "op 1 (batch): a batch of 99999999999 int64[] elements needs 745.1 GiB, over
// the task's memory limit of 4.0 GiB". The budget counts what ops keep, not every transient
// allocation; a single allocation a pipeline asks for (a decoded image, a resize output) is
// checked with CheckAllocation against the limit.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "lib/core/tensor.h"

namespace tfdata {

class MemoryBudget {
 public:
  // `limit` in bytes (> 0); `name` says whose limit it is in errors: "the task's memory limit
  // (worker --max-task-memory)".
  MemoryBudget(int64_t limit, std::string name);

  int64_t limit() const { return limit_; }
  int64_t held() const { return held_.load(std::memory_order_relaxed); }
  const std::string& name() const { return name_; }

  // Takes `bytes` (>= 0), or fails without taking anything when that would pass the limit. The
  // error is "{where}: {what} needs {bytes}, over {name} of {limit}" (plus what is already held).
  absl::Status Take(int64_t bytes, std::string_view where, std::string_view what);
  // Take without the error: false, and nothing taken, when it would pass the limit.
  bool TryTake(int64_t bytes);
  void Give(int64_t bytes);
  // A single allocation of `bytes` that is not kept: fails when it alone would pass what is left.
  absl::Status CheckAllocation(int64_t bytes, std::string_view where, std::string_view what) const;

 private:
  const int64_t limit_;
  const std::string name_;
  std::atomic<int64_t> held_{0};
};

// The memory of this machine, or of this container: the cgroup's limit when it has one (v2
// memory.max, v1 memory.limit_in_bytes), else physical memory.
int64_t MachineMemoryBytes();

// A worker task's limit when the operator gives none (worker --max-task-memory): a quarter of
// MachineMemoryBytes(), at least 256 MiB.
int64_t DefaultTaskMemoryLimit();

// The budget used where none was given (tests, tools, the Python package in process): half of
// MachineMemoryBytes(). Lives for the process.
std::shared_ptr<MemoryBudget> DefaultMemoryBudget();

// "745.1 GiB", "16.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);

// What an element holds in memory, as the budgets count it: its payload bytes plus a fixed
// overhead per tensor and per string value.
int64_t ElementMemoryBytes(const Element& element);

struct MemoryScope {
  std::shared_ptr<MemoryBudget> budget;  // null: DefaultMemoryBudget()
  std::string where;                     // the op's place in errors

  MemoryBudget& get() const;
};

class MemoryHold {
 public:
  explicit MemoryHold(MemoryScope scope) : scope_(std::move(scope)), budget_(&scope_.get()) {}
  ~MemoryHold() { Reset(); }
  MemoryHold(const MemoryHold&) = delete;
  MemoryHold& operator=(const MemoryHold&) = delete;

  // Holds `bytes` more; the error (see MemoryBudget::Take) describes the request as `what`.
  absl::Status Grow(int64_t bytes, std::string_view what);
  // The same, with the description made only on failure (for per-element calls).
  template <typename Describe>
  absl::Status GrowLazy(int64_t bytes, Describe&& describe) {
    if (bytes <= 0) return absl::OkStatus();
    if (held_ + bytes <= reserved_ || Reserve(held_ + bytes)) {
      held_ += bytes;
      return absl::OkStatus();
    }
    return Grow(bytes, describe());
  }
  void Shrink(int64_t bytes);
  // Gives back everything held.
  void Reset();
  int64_t held() const { return held_; }
  // Per-element holds (a shuffle buffer) would touch the shared budget twice per element; a hold
  // takes from it in granules instead, so it may have up to 2 granules more than it holds.
  static constexpr int64_t kGranule = 64 << 10;
  const MemoryScope& scope() const { return scope_; }
  MemoryBudget& budget() const { return *budget_; }

 private:
  MemoryScope scope_;
  // Takes from the budget so that reserved_ >= `want`: a granule more when it can, else exactly.
  bool Reserve(int64_t want);

  MemoryBudget* budget_;  // scope_'s budget, or the process default (which outlives everything)
  int64_t held_ = 0;      // what the owner holds
  int64_t reserved_ = 0;  // what is taken from the budget: held_ <= reserved_
};

}  // namespace tfdata
