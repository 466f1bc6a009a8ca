// The Python iterator over elements, for every way of reading: a reader of the service (plain or
// coordinated) and a pipeline run in this process.
//
// __next__ first takes an element that is already there without releasing the GIL (the cheap
// path that makes small elements fast); otherwise it waits with the GIL released, in slices of
// 100 ms, and checks for signals between them so that Ctrl-C (KeyboardInterrupt) stops a blocked
// read. close() (also on garbage collection or `with` exit) releases the job at the dispatcher.
// One thread at a time may call __next__; a second one gets a RuntimeError instead of a race.
// A read that ends having lost data (a worker became unreachable) ends with a
// tfdata.DataLossWarning that says what was lost, the CLI's exit code 4 in Python's terms.
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "python/src/elements.h"

namespace tfdata::python {

// Where the elements come from. Called without the GIL (except where noted).
class ElementSource {
 public:
  virtual ~ElementSource() = default;
  // An element (true), the end (false), or nothing yet after `timeout` (nullopt).
  virtual absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration timeout) = 0;
  // Whether NextWithin(0) is a cheap check that may run with the GIL held (a reader's buffer),
  // rather than computing the element (a pipeline run here).
  virtual bool polls() const { return true; }
  virtual void Close() = 0;
  // Counters for stats(): name, value.
  virtual std::vector<std::pair<std::string, int64_t>> Stats() const { return {}; }
  // A warning from the dispatcher (empty when none).
  virtual std::string warning() const { return ""; }
  // What the read lost (tasks dropped with their workers, splits lost), in the CLI's words; empty
  // when nothing. Reported as a DataLossWarning when the iteration ends.
  virtual std::string loss() const { return ""; }
  virtual std::vector<std::string> dropped_workers() const { return {}; }
  // Resumable reads: the encoded read state (read_state.h), and a restart from encoded states.
  // FailedPrecondition for a source without one (the message says what would have one).
  virtual absl::StatusOr<std::string> SaveState() const {
    return absl::FailedPreconditionError(
        "only a service read with exactly_once=True (processing_mode distributed_epoch) has a read state");
  }
  virtual absl::Status Resume(const std::vector<std::string>& states) { return SaveState().status(); }
};

class ElementIterator {
 public:
  ElementIterator(std::unique_ptr<ElementSource> source, ElementFormat format)
      : source_(std::move(source)), format_(std::move(format)) {}
  ~ElementIterator();

  nanobind::object Next();
  void Close();
  nanobind::dict Stats() const;
  std::string warning() const { return source_->warning(); }
  bool closed() const { return closed_; }
  // Resumable reads: {"tfdata_read_state": version, "state": base64 of the encoded state}; and
  // a restart from one (or a list of the states of every reader of a shared job): what was not
  // handed out when they were taken, from a new job.
  nanobind::dict StateDict() const;
  void LoadStateDict(nanobind::handle state);
  // Component names for dict elements (set before the first element).
  void set_names(std::optional<std::vector<std::string>> names) { format_.names = std::move(names); }

 private:
  // Issues a DataLossWarning when the source lost data (raises when warnings are errors).
  void WarnOfLoss();

  std::unique_ptr<ElementSource> source_;
  ElementFormat format_;
  std::mutex next_mu_;  // held by the thread inside Next()
  bool closed_ = false;
  bool ended_ = false;
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  absl::Duration waited_;             // in Next() with nothing ready, GIL released
  absl::Time started_ = absl::Now();  // the stall fraction is waited_ over the time since
};

void BindIterator(nanobind::module_& m);

}  // namespace tfdata::python
