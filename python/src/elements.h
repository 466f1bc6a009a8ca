// Elements as Python values, without copying numeric data.
//
// A numeric array becomes a numpy array over the tensor's own memory (the received message's
// buffer for the gRPC data plane): its `base` is a TensorBuffer that holds a reference to that
// memory, so the memory lives as long as any array over it. Scalars become Python int, float,
// bool or bytes; string arrays become numpy object arrays of bytes. An element of one component is
// that value; with names for all components it is a dict; otherwise a tuple.
//
// All functions need the GIL.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/core/tensor.h"

namespace tfdata::python {

struct ElementFormat {
  // Component names (all set), or nullopt for a bare value / tuple.
  std::optional<std::vector<std::string>> names;
  // Arrays may be written to: their memory belongs to this element alone (gRPC data plane,
  // in-process runs). False when it may be shared (the in-process data plane serves a worker's
  // buffers, which other readers see too).
  bool writable = true;
};

nanobind::object ToPython(Element& element, const ElementFormat& format);
nanobind::object TensorToPython(const Tensor& tensor, bool writable);

// "int64" -> numpy's "<i8" (the typestr of __array_interface__).
const char* TypeStr(DType dtype);

void BindElements(nanobind::module_& m);

}  // namespace tfdata::python
