#include "lib/pipeline/prefetch.h"

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/ops.h"

namespace tfdata {

namespace {
int64_t Bytes(const Element& e) { return ElementMemoryBytes(e) + static_cast<int64_t>(sizeof(Element)); }
}  // namespace

PrefetchIterator::PrefetchIterator(std::unique_ptr<Iterator> input, size_t capacity, MemoryScope memory)
    : input_(std::move(input)), capacity_(capacity == 0 ? 1 : capacity), hold_(std::move(memory)) {
  thread_ = std::thread([this] { Produce(); });
}

PrefetchIterator::~PrefetchIterator() {
  {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
    cv_.SignalAll();
  }
  thread_.join();
}

void PrefetchIterator::Produce() {
  while (true) {
    {
      absl::MutexLock l(&mu_);
      while (!cancelled_ && buffer_.size() >= capacity_) cv_.Wait(&mu_);
      if (cancelled_) return;
    }
    Element e;
    absl::StatusOr<bool> more = input_->Next(&e);
    absl::MutexLock l(&mu_);
    if (!more.ok() || !*more) {
      if (!more.ok()) status_ = more.status();
      end_ = true;
      cv_.SignalAll();
      return;
    }
    // The lambda runs under mu_ but is analysed on its own: it gets copies, not the guarded fields.
    const size_t buffered = buffer_.size();
    const int64_t held_bytes = hold_.held();
    const absl::Status held = hold_.GrowLazy(Bytes(e), [&] {
      return fmt::format("the prefetch buffer (buffer_size {}), holding {} elements ({}), cannot take the next: it",
                         capacity_, buffered, FormatBytes(held_bytes));
    });
    if (!held.ok()) {
      status_ = held;
      end_ = true;
      cv_.SignalAll();
      return;
    }
    buffer_.push_back(std::move(e));
    cv_.SignalAll();
  }
}

absl::StatusOr<bool> PrefetchIterator::TakeLocked(Element* out) {
  if (!buffer_.empty()) {
    *out = std::move(buffer_.front());
    buffer_.pop_front();
    hold_.Shrink(Bytes(*out));
    cv_.SignalAll();
    return true;
  }
  if (!status_.ok()) {
    absl::Status s = status_;
    status_ = absl::OkStatus();  // report once, then behave as ended
    return s;
  }
  return false;
}

absl::StatusOr<bool> PrefetchIterator::Next(Element* out) {
  absl::MutexLock l(&mu_);
  while (buffer_.empty() && !end_) cv_.Wait(&mu_);
  return TakeLocked(out);
}

absl::StatusOr<bool> PrefetchIterator::TryNext(Element* out, bool* ready) {
  absl::MutexLock l(&mu_);
  *ready = !buffer_.empty() || end_;
  if (!*ready) return false;
  return TakeLocked(out);
}

namespace {

class PrefetchDataset : public Dataset {
 public:
  PrefetchDataset(DatasetPtr input, size_t buffer, MemoryScope memory)
      : Dataset("prefetch", input->spec()), input_(std::move(input)), buffer_(buffer), memory_(std::move(memory)) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<PrefetchIterator>(std::move(input), buffer_, memory_);
  }

 private:
  DatasetPtr input_;
  size_t buffer_;
  MemoryScope memory_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakePrefetchDataset(DatasetPtr input, int64_t buffer_size, MemoryScope memory) {
  if (memory.where.empty()) memory.where = "prefetch";
  if (buffer_size == -1 || buffer_size == 0) buffer_size = 16;
  if (buffer_size <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("buffer_size must be positive, or 0/-1 for the default, got {}", buffer_size));
  }
  return std::make_shared<PrefetchDataset>(std::move(input), static_cast<size_t>(buffer_size), std::move(memory));
}

}  // namespace tfdata
