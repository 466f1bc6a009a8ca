// A background-thread iterator: computes up to `capacity` elements of its input ahead of the
// consumer. Used by the prefetch op and by parallel interleave.
//
// Thread safety: Next/TryNext are called by one consumer thread; the producer thread is owned
// by the iterator and joined by its destructor (which may wait for one in-flight input Next).
// Memory: the buffered elements are held against `memory`'s budget; an element that would pass
// it ends the input with that error.
#pragma once

#include <deque>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "lib/core/memory_budget.h"
#include "lib/pipeline/dataset.h"

namespace tfdata {

class PrefetchIterator : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> input, size_t capacity, MemoryScope memory = {});
  ~PrefetchIterator() override;

  absl::StatusOr<bool> Next(Element* out) override;
  // Like Next but never blocks: returns false in *ready when nothing is buffered yet.
  absl::StatusOr<bool> TryNext(Element* out, bool* ready);

 private:
  void Produce();
  absl::StatusOr<bool> TakeLocked(Element* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<Iterator> input_;  // used only by the producer thread
  const size_t capacity_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<Element> buffer_ ABSL_GUARDED_BY(mu_);
  MemoryHold hold_ ABSL_GUARDED_BY(mu_);      // what buffer_ holds
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // error that ended the input
  bool end_ ABSL_GUARDED_BY(mu_) = false;     // input finished (or failed)
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tfdata
