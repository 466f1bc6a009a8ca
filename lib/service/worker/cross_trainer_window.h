// The cross-trainer cache of one task: a sliding window over the task's element stream, bounded
// in bytes, that several trainers read from their own cursors.
//
// Elements enter at the end (stream index end()) and leave from the front once the window holds
// more than its byte bound, whether or not every trainer has read them: a trainer whose cursor
// fell behind begin() skips ahead to begin() (counted). A new trainer starts at begin(), the
// oldest element still held, so trainers that start together share every element.
//
// Not thread-safe: the task guards it with its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/core/tensor.h"

namespace tfdata::service {

class CrossTrainerWindow {
 public:
  explicit CrossTrainerWindow(int64_t max_bytes) : max_bytes_(max_bytes) {}

  // Appends the stream's next element. InvalidArgument (and nothing changes) for an element larger
  // than the whole window: it could never be shared.
  absl::Status Push(Element element, int64_t bytes);

  struct Read {
    std::vector<Element> elements;
    int64_t first_index = 0;  // stream index of elements[0] (or of the cursor when empty)
    int64_t skipped = 0;      // elements this read skipped because they had left the window
  };
  // The trainer's next elements from its cursor (at most max_elements, and max_bytes after the
  // first), advancing the cursor. Empty when the cursor is at end().
  Read Take(const std::string& trainer, int64_t max_elements, int64_t max_bytes);
  // The trainer's cursor is at the end: the window must grow before it can read.
  bool AtEnd(const std::string& trainer) const;

  int64_t begin() const { return begin_; }
  int64_t end() const { return begin_ + static_cast<int64_t>(elements_.size()); }
  int64_t bytes() const { return bytes_; }
  int64_t max_bytes() const { return max_bytes_; }
  // The largest bytes() ever held (tests check it against the bound).
  int64_t peak_bytes() const { return peak_bytes_; }
  // Elements skipped by the trainer so far (0 for an unknown trainer).
  int64_t skipped(const std::string& trainer) const;

 private:
  struct Trainer {
    int64_t cursor = 0;
    int64_t skipped = 0;
  };
  struct Entry {
    Element element;
    int64_t bytes;
  };
  Trainer& Find(const std::string& trainer);

  const int64_t max_bytes_;
  std::deque<Entry> elements_;
  int64_t begin_ = 0;
  int64_t bytes_ = 0, peak_bytes_ = 0;
  std::map<std::string, Trainer> trainers_;
};

}  // namespace tfdata::service
