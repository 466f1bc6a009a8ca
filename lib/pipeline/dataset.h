// The pipeline engine: datasets and their iterators.
//
// Glossary
//   Dataset   an immutable, validated node of a pipeline (an op and its inputs). Built once from
//             the Pipeline proto by BuildDataset; knows its element spec. Thread-safe: any number
//             of iterators may be created from any threads.
//   Iterator  one pass over a dataset. Single consumer: Next() is not thread-safe. Iterators own
//             their inputs' iterators and any threads they start, and stop those threads in
//             their destructor (destroying an iterator mid-pass is always allowed).
//
// Lifetime: an iterator keeps the datasets it reads from alive (shared_ptr), so a caller may drop
// its DatasetPtr while iterating.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/element_spec.h"
#include "lib/core/tensor.h"

namespace tfdata {

class Iterator {
 public:
  virtual ~Iterator() = default;
  // Writes the next element to *out and returns true, or returns false at the end of the
  // sequence (after which Next keeps returning false). An error ends the pass.
  virtual absl::StatusOr<bool> Next(Element* out) = 0;

  // Optional fast path for batch (a fused range -> batch): writes the payloads of up to `max`
  // next elements, each a single numeric tensor of the type Next() has been producing, back to
  // back into `dst`. Returns how many were written (fewer than max only at the end of the
  // sequence), or -1 when this iterator has no such path (the default).
  virtual absl::StatusOr<int64_t> NextBulk(int64_t max, uint8_t* dst) { return -1; }
};

// Stops a pass from outside: a worker's task uses it to end a pipeline stuck inside one Next()
// (a filter that matches nothing in range(2^63) never returns otherwise). Every loop that may read
// many input elements before it produces one (filter, skip, shard, batch, padded_batch, unbatch,
// shuffle's fill, repeat, interleave, file and split sources) checks it once per input element
// and then fails the pass with CancelledError. Thread-safe: Cancel() from any thread.
class Cancellation {
 public:
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};
using CancellationPtr = std::shared_ptr<const Cancellation>;

// CancelledError once `c` (nullptr: never) is cancelled.
absl::Status CheckNotCancelled(const Cancellation* c);

// Per-pass context handed down the chain of MakeIterator calls.
struct IteratorContext {
  // For interleave bodies: the upstream element the sub-pipeline starts from.
  std::shared_ptr<const Element> input_element;
  // The pass's cancellation, shared by its iterators (nullptr: the pass cannot be cancelled).
  CancellationPtr cancellation;
};

class Dataset;
using DatasetPtr = std::shared_ptr<const Dataset>;

class Dataset : public std::enable_shared_from_this<Dataset> {
 public:
  explicit Dataset(std::string name, ElementSpec spec) : name_(std::move(name)), spec_(std::move(spec)) {}
  virtual ~Dataset() = default;

  // The op name, e.g. "batch".
  const std::string& name() const { return name_; }
  // The static type of the elements.
  const ElementSpec& spec() const { return spec_; }
  // Number of elements if known without iterating (-1 unknown, -2 infinite).
  virtual int64_t Cardinality() const { return -1; }

  virtual absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const = 0;

  static constexpr int64_t kUnknown = -1;
  static constexpr int64_t kInfinite = -2;

 protected:
  // For ops that change iteration-dependent behaviour (reshuffle each epoch): how many
  // iterators were created before this one.
  uint64_t NextIterationNumber() const { return iterations_.fetch_add(1); }

 private:
  std::string name_;
  ElementSpec spec_;
  mutable std::atomic<uint64_t> iterations_{0};
};

// Reads a whole dataset into a vector (tests and small tools). Stops after `limit` elements if
// limit >= 0.
absl::StatusOr<std::vector<Element>> Collect(const Dataset& dataset, int64_t limit = -1);

// Number of hardware threads (at least 1); used for "-1 = one per core" settings.
int NumCores();

// The most threads one op may start (map's num_parallel_calls, parallel interleave's
// cycle_length): a pipeline cannot make a worker start a million threads.
inline constexpr int64_t kMaxOpThreads = 1024;
// The most inputs a sequential interleave keeps open at once.
inline constexpr int64_t kMaxCycleLength = int64_t{1} << 16;

}  // namespace tfdata
