// Python functions on workers (issue 23), the Python side: values returned by a function become
// elements; the in-process host (functions registered in this process, for pipeline.run() and
// WorkerServer); the helper processes' serving loop (tfdata/_helper.py calls it).
#pragma once

#include <nanobind/nanobind.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/functions/python_host.h"

namespace tfdata::python {

// What a function's return value becomes: one element (a tuple: its components; a dict: its
// values in order, or in `outputs`' order when given (Python.output_names, which also fix the
// count); otherwise one component). `alias`: numeric arrays are referenced, not copied,
// and the element must be dropped with the GIL held (the helper's loop). Needs the GIL.
absl::StatusOr<Element> ElementFromPython(nanobind::handle value, bool alias,
                                          const std::vector<std::string>& outputs = {});

// The host of functions registered in this process (tfdata.register_function). Calls take the
// GIL: in-process functions run one at a time; the C++ ops around them do not wait for it.
std::shared_ptr<const PythonFunctionHost> InProcessHost();

void BindFunctions(nanobind::module_& m);

}  // namespace tfdata::python
