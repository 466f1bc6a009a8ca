#include "lib/pipeline/dataset.h"

#include <thread>

#include "lib/core/status_macros.h"

namespace tfdata {

absl::StatusOr<std::vector<Element>> Collect(const Dataset& dataset, int64_t limit) {
  TFD_ASSIGN_OR_RETURN(auto it, dataset.MakeIterator(IteratorContext{}));
  std::vector<Element> out;
  Element e;
  while (limit < 0 || static_cast<int64_t>(out.size()) < limit) {
    TFD_ASSIGN_OR_RETURN(bool more, it->Next(&e));
    if (!more) break;
    out.push_back(std::move(e));
    e = Element();
  }
  return out;
}

absl::Status CheckNotCancelled(const Cancellation* c) {
  if (c != nullptr && c->cancelled()) return absl::CancelledError("the pass was cancelled (its task was stopped)");
  return absl::OkStatus();
}

int NumCores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace tfdata
