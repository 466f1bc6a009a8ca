#include "lib/service/worker/cross_trainer_window.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tfdata::service {

absl::Status CrossTrainerWindow::Push(Element element, int64_t bytes) {
  if (bytes > max_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat("an element of ", bytes,
                                                   " bytes does not fit the cross-trainer cache of ", max_bytes_,
                                                   " bytes (raise the worker's --cross-trainer-cache-size)"));
  }
  // Make room first, so the window never holds more than its bound.
  while (!elements_.empty() && bytes_ + bytes > max_bytes_) {
    bytes_ -= elements_.front().bytes;
    elements_.pop_front();
    ++begin_;
  }
  elements_.push_back(Entry{std::move(element), bytes});
  bytes_ += bytes;
  peak_bytes_ = std::max(peak_bytes_, bytes_);
  return absl::OkStatus();
}

CrossTrainerWindow::Trainer& CrossTrainerWindow::Find(const std::string& trainer) {
  auto [it, inserted] = trainers_.try_emplace(trainer);
  if (inserted) it->second.cursor = begin_;
  return it->second;
}

CrossTrainerWindow::Read CrossTrainerWindow::Take(const std::string& trainer, int64_t max_elements, int64_t max_bytes) {
  Trainer& t = Find(trainer);
  Read r;
  if (t.cursor < begin_) {
    r.skipped = begin_ - t.cursor;
    t.skipped += r.skipped;
    t.cursor = begin_;
  }
  r.first_index = t.cursor;
  int64_t bytes = 0;
  while (t.cursor < end() && static_cast<int64_t>(r.elements.size()) < max_elements) {
    const Entry& e = elements_[static_cast<size_t>(t.cursor - begin_)];
    if (!r.elements.empty() && bytes + e.bytes > max_bytes) break;
    bytes += e.bytes;
    r.elements.push_back(e.element);  // shares the tensors' buffers
    ++t.cursor;
  }
  return r;
}

bool CrossTrainerWindow::AtEnd(const std::string& trainer) const {
  auto it = trainers_.find(trainer);
  return (it == trainers_.end() ? begin_ : std::max(it->second.cursor, begin_)) >= end();
}

int64_t CrossTrainerWindow::skipped(const std::string& trainer) const {
  auto it = trainers_.find(trainer);
  return it == trainers_.end() ? 0 : it->second.skipped;
}

}  // namespace tfdata::service
