#include "python/src/iterator.h"

#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <algorithm>

#include "absl/strings/escaping.h"
#include "python/src/status.h"

namespace nb = nanobind;

namespace tfdata::python {

ElementIterator::~ElementIterator() {
  nb::gil_scoped_release release;
  source_->Close();
}

nb::object ElementIterator::Next() {
  std::unique_lock<std::mutex> lock(next_mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    throw std::runtime_error("a tfdata iterator is read by one thread at a time; this one is in use by another");
  }
  if (closed_ || ended_) throw nb::stop_iteration();
  Element element;
  absl::StatusOr<std::optional<bool>> more = std::optional<bool>();
  if (source_->polls()) more = source_->NextWithin(&element, absl::ZeroDuration());
  while (more.ok() && !more->has_value()) {
    const absl::Time start = absl::Now();
    {
      nb::gil_scoped_release release;
      more = source_->NextWithin(&element, absl::Milliseconds(100));
    }
    waited_ += absl::Now() - start;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();  // KeyboardInterrupt, usually
  }
  if (!more.ok()) {
    ended_ = true;
    RaiseStatus(more.status());
  }
  if (!**more) {
    ended_ = true;
    {
      nb::gil_scoped_release release;
      source_->Close();  // the job is released as soon as the data ends, not at garbage collection
    }
    WarnOfLoss();
    throw nb::stop_iteration();
  }
  ++elements_;
  bytes_ += static_cast<int64_t>(ElementByteSize(element));
  return ToPython(element, format_);
}

void ElementIterator::WarnOfLoss() {
  const std::string loss = source_->loss();
  if (loss.empty()) return;
  const std::string message = "tfdata: the read lost data: " + loss;
  nb::object category = nb::module_::import_("tfdata.errors").attr("DataLossWarning");
  // -1: the warnings filter turned it into an exception ("error"), which propagates.
  if (PyErr_WarnEx(category.ptr(), message.c_str(), 1) != 0) throw nb::python_error();
}

void ElementIterator::Close() {
  closed_ = true;
  nb::gil_scoped_release release;
  source_->Close();
}

nb::dict ElementIterator::StateDict() const {
  absl::StatusOr<std::string> bytes;
  {
    nb::gil_scoped_release release;
    bytes = source_->SaveState();
  }
  RaiseIfError(bytes.status());
  nb::dict d;
  d["tfdata_read_state"] = 1;
  d["state"] = nb::str(absl::Base64Escape(*bytes).c_str());
  return d;
}

void ElementIterator::LoadStateDict(nb::handle state) {
  std::unique_lock<std::mutex> lock(next_mu_, std::try_to_lock);
  if (!lock.owns_lock()) throw std::runtime_error("load_state_dict: the iterator is in use by another thread");
  // One conversion for every entry point (tfdata/service.py): a dict, bytes, or a list of them.
  nb::object list = nb::module_::import_("tfdata.service").attr("_state_bytes")(state);
  std::vector<std::string> states;
  for (nb::handle b : list) {
    nb::bytes bytes = nb::borrow<nb::bytes>(b);
    states.emplace_back(bytes.c_str(), bytes.size());
  }
  absl::Status st;
  {
    nb::gil_scoped_release release;
    st = source_->Resume(states);
  }
  RaiseIfError(st);
  closed_ = ended_ = false;
  elements_ = bytes_ = 0;
  waited_ = absl::ZeroDuration();
  started_ = absl::Now();
}

nb::dict ElementIterator::Stats() const {
  nb::dict d;
  d["elements"] = elements_;
  d["bytes"] = bytes_;
  const double wait = absl::ToDoubleSeconds(waited_), elapsed = absl::ToDoubleSeconds(absl::Now() - started_);
  d["wait_seconds"] = wait;
  d["elapsed_seconds"] = elapsed;
  d["stall_fraction"] = elapsed > 0 ? std::min(1.0, wait / elapsed) : 0.0;
  for (const auto& [name, value] : source_->Stats()) d[nb::str(name.c_str())] = value;
  nb::list dropped;
  for (const std::string& w : source_->dropped_workers()) dropped.append(nb::str(w.c_str()));
  d["dropped_workers"] = dropped;
  return d;
}

void BindIterator(nb::module_& m) {
  nb::class_<ElementIterator>(m, "ElementIterator", "An iterator over a pipeline's or a reader's elements.")
      .def("__iter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__next__", &ElementIterator::Next)
      .def("close", &ElementIterator::Close, "Stops reading and releases the job at the dispatcher. Idempotent.")
      .def("stats", &ElementIterator::Stats,
           "Counters: elements, bytes, wait_seconds (time __next__ waited with nothing ready), elapsed_seconds "
           "(since the iterator was made or restarted), stall_fraction (wait over elapsed: the share of the "
           "trainer's time spent waiting for input), and the "
           "reader's own (tasks_dropped, splits_lost, elements_skipped, rounds_substituted), and "
           "dropped_workers (the workers of the dropped tasks).")
      .def_prop_ro("warning", &ElementIterator::warning)
      .def_prop_ro("closed", &ElementIterator::closed)
      .def("_set_names", &ElementIterator::set_names, nb::arg("names").none())
      .def("state_dict", &ElementIterator::StateDict,
           "Where this read stands (exactly-once service reads): a small JSON-serialisable dict to keep with a "
           "checkpoint and resume from (load_state_dict, or from_dataset_id(..., state=...)).")
      .def("load_state_dict", &ElementIterator::LoadStateDict, nb::arg("state"),
           "Restarts the read from a state_dict() (or a list of the states of every reader of a shared job): "
           "what was not handed out when it was taken, each element once, from a new job.")
      .def("__enter__", [](nb::handle self) { return nb::borrow(self); })
      .def("__exit__", [](ElementIterator& it, nb::args) { it.Close(); });
}

}  // namespace tfdata::python
