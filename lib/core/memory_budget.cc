#include "lib/core/memory_budget.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"

namespace tfdata {
namespace {

// Per tensor: the Tensor object and its buffer's control block; per string: std::string itself.
constexpr int64_t kTensorOverhead = 128;
constexpr int64_t kStringOverhead = 32;

// A cgroup limit file's value, or -1 ("max", missing, unreadable).
int64_t ReadLimit(const char* path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text)) return -1;
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v <= 0) return -1;
  return v;
}

}  // namespace

MemoryBudget::MemoryBudget(int64_t limit, std::string name) : limit_(limit > 0 ? limit : 1), name_(std::move(name)) {}

absl::Status MemoryBudget::Take(int64_t bytes, std::string_view where, std::string_view what) {
  if (TryTake(bytes)) return absl::OkStatus();
  const int64_t held = held_.load(std::memory_order_relaxed);
  if (held == 0) {
    return absl::ResourceExhaustedError(
        fmt::format("{}: {} needs {}, over {} of {}", where, what, FormatBytes(bytes), name_, FormatBytes(limit_)));
  }
  return absl::ResourceExhaustedError(fmt::format("{}: {} needs {}, over {} of {} ({} already held by the pipeline)",
                                                  where, what, FormatBytes(bytes), name_, FormatBytes(limit_),
                                                  FormatBytes(held)));
}

bool MemoryBudget::TryTake(int64_t bytes) {
  if (bytes < 0) bytes = 0;
  int64_t held = held_.load(std::memory_order_relaxed);
  while (bytes <= limit_ - held) {
    if (held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed)) return true;
  }
  return false;
}

void MemoryBudget::Give(int64_t bytes) {
  if (bytes > 0) held_.fetch_sub(bytes, std::memory_order_relaxed);
}

absl::Status MemoryBudget::CheckAllocation(int64_t bytes, std::string_view where, std::string_view what) const {
  const int64_t held = held_.load(std::memory_order_relaxed);
  if (bytes < 0 || bytes > limit_ - held) {
    return absl::ResourceExhaustedError(fmt::format("{}: {} needs {}, over {} of {}", where, what,
                                                    bytes < 0 ? std::string("more than 8 EiB") : FormatBytes(bytes),
                                                    name_, FormatBytes(limit_)));
  }
  return absl::OkStatus();
}

int64_t MachineMemoryBytes() {
  const int64_t pages = sysconf(_SC_PHYS_PAGES);
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t physical = pages > 0 && page > 0 ? pages * page : int64_t{8} << 30;
  for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    const int64_t limit = ReadLimit(path);
    if (limit > 0 && limit < physical) physical = limit;
  }
  return physical;
}

int64_t DefaultTaskMemoryLimit() { return std::max<int64_t>(MachineMemoryBytes() / 4, int64_t{256} << 20); }

std::shared_ptr<MemoryBudget> DefaultMemoryBudget() {
  static const auto* budget = new std::shared_ptr<MemoryBudget>(std::make_shared<MemoryBudget>(
      MachineMemoryBytes() / 2, "the process's memory limit (half of this machine's memory)"));
  return *budget;
}

std::string FormatBytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1023.95 && u < 5) {  // so that 1023.99 MiB reads 1.0 GiB, not 1024.0 MiB
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

int64_t ElementMemoryBytes(const Element& element) {
  int64_t bytes = 0;
  for (const Tensor& t : element) {
    bytes += kTensorOverhead + static_cast<int64_t>(t.ByteSize());
    if (t.is_string()) bytes += kStringOverhead * static_cast<int64_t>(t.strings().size());
  }
  return bytes;
}

MemoryBudget& MemoryScope::get() const { return budget ? *budget : *DefaultMemoryBudget(); }

bool MemoryHold::Reserve(int64_t want) {
  const int64_t need = want - reserved_;
  if (need <= 0) return true;
  if (budget_->TryTake(need + kGranule)) {
    reserved_ += need + kGranule;
    return true;
  }
  if (budget_->TryTake(need)) {
    reserved_ += need;
    return true;
  }
  return false;
}

absl::Status MemoryHold::Grow(int64_t bytes, std::string_view what) {
  if (bytes <= 0) return absl::OkStatus();
  if (!Reserve(held_ + bytes)) {
    // What is reserved but not held is the hold's own: the error counts it as free.
    const int64_t spare = reserved_ - held_;
    budget_->Give(spare);
    reserved_ = held_;
    if (!Reserve(held_ + bytes)) {
      TFD_RETURN_IF_ERROR(budget_->Take(bytes, scope_.where, what));  // fails, unless another hold let go
      reserved_ += bytes;
    }
  }
  held_ += bytes;
  return absl::OkStatus();
}

void MemoryHold::Shrink(int64_t bytes) {
  held_ -= std::min(bytes, held_);
  if (reserved_ - held_ > 2 * kGranule) {
    budget_->Give(reserved_ - held_ - kGranule);
    reserved_ = held_ + kGranule;
  }
}

void MemoryHold::Reset() {
  held_ = 0;
  budget_->Give(reserved_);
  reserved_ = 0;
}

}  // namespace tfdata
