#include "python/src/elements.h"

#include <utility>

namespace nb = nanobind;
using namespace nb::literals;

namespace tfdata::python {
namespace {

// Owns a reference to a tensor's memory and shows it to numpy (the array interface, version 3).
// Holds the Tensor itself: small tensors keep their values inline in it.
class TensorBuffer {
 public:
  TensorBuffer(Tensor tensor, bool writable) : tensor_(std::move(tensor)), writable_(writable) {}

  nb::dict ArrayInterface() const {
    nb::dict d;
    nb::list shape;
    for (int64_t dim : tensor_.shape()) shape.append(nb::steal(PyLong_FromLongLong(dim)));
    d["shape"] = nb::tuple(shape);
    d["typestr"] = nb::str(TypeStr(tensor_.dtype()));
    d["data"] =
        nb::make_tuple(nb::steal(PyLong_FromVoidPtr(const_cast<uint8_t*>(tensor_.raw()))), nb::bool_(!writable_));
    d["version"] = 3;
    return d;
  }
  // The memory block the tensor lies in: the received buffer (or the tensor's own bytes).
  uintptr_t buffer_address() const {
    return tensor_.buffer() ? reinterpret_cast<uintptr_t>(tensor_.buffer()->data())
                            : reinterpret_cast<uintptr_t>(tensor_.raw());
  }
  size_t buffer_size() const { return tensor_.buffer() ? tensor_.buffer()->size() : tensor_.nbytes(); }
  uintptr_t data_address() const { return reinterpret_cast<uintptr_t>(tensor_.raw()); }
  size_t nbytes() const { return tensor_.nbytes(); }
  bool writable() const { return writable_; }

 private:
  const Tensor tensor_;
  const bool writable_;
};

// Leaked on purpose: a Python object destroyed by a static destructor after the interpreter has
// finalized crashes the process at exit.
nb::handle Numpy() {
  static nb::object* np = new nb::object(nb::module_::import_("numpy"));
  return *np;
}
nb::handle NumpyAsArray() {
  static nb::object* fn = new nb::object(Numpy().attr("asarray"));
  return *fn;
}

nb::object Scalar(const Tensor& t) {
  switch (t.dtype()) {
    case DType::kBool: return nb::bool_(*t.data<bool>());
    case DType::kInt8: return nb::steal(PyLong_FromLong(*t.data<int8_t>()));
    case DType::kInt16: return nb::steal(PyLong_FromLong(*t.data<int16_t>()));
    case DType::kInt32: return nb::steal(PyLong_FromLong(*t.data<int32_t>()));
    case DType::kInt64: return nb::steal(PyLong_FromLongLong(*t.data<int64_t>()));
    case DType::kUInt8: return nb::steal(PyLong_FromUnsignedLong(*t.data<uint8_t>()));
    case DType::kUInt16: return nb::steal(PyLong_FromUnsignedLong(*t.data<uint16_t>()));
    case DType::kUInt32: return nb::steal(PyLong_FromUnsignedLong(*t.data<uint32_t>()));
    case DType::kUInt64: return nb::steal(PyLong_FromUnsignedLongLong(*t.data<uint64_t>()));
    case DType::kFloat32: return nb::steal(PyFloat_FromDouble(*t.data<float>()));
    case DType::kFloat64: return nb::steal(PyFloat_FromDouble(*t.data<double>()));
    case DType::kString: {
      const std::string& s = t.strings()[0];
      return nb::bytes(s.data(), s.size());
    }
  }
  return nb::none();
}

nb::object StringArray(const Tensor& t) {
  nb::list values;
  for (const std::string& s : t.strings()) values.append(nb::bytes(s.data(), s.size()));
  nb::list shape;
  for (int64_t dim : t.shape()) shape.append(nb::steal(PyLong_FromLongLong(dim)));
  nb::object arr = Numpy().attr("empty")(nb::tuple(shape), "dtype"_a = "O");
  // Fill through a flat view: numpy.array(list) would turn equal-length bytes into a 2-D array.
  nb::object flat = arr.attr("reshape")(-1);
  for (size_t i = 0; i < t.strings().size(); ++i) flat[nb::steal(PyLong_FromSize_t(i))] = values[i];
  return arr;
}

}  // namespace

const char* TypeStr(DType dtype) {
  switch (dtype) {
    case DType::kBool: return "|b1";
    case DType::kInt8: return "|i1";
    case DType::kInt16: return "<i2";
    case DType::kInt32: return "<i4";
    case DType::kInt64: return "<i8";
    case DType::kUInt8: return "|u1";
    case DType::kUInt16: return "<u2";
    case DType::kUInt32: return "<u4";
    case DType::kUInt64: return "<u8";
    case DType::kFloat32: return "<f4";
    case DType::kFloat64: return "<f8";
    case DType::kString: return "|O";
  }
  return "|V1";
}

nb::object TensorToPython(const Tensor& tensor, bool writable) {
  if (tensor.rank() == 0) return Scalar(tensor);
  if (tensor.is_string()) return StringArray(tensor);
  nb::object owner = nb::cast(new TensorBuffer(tensor, writable), nb::rv_policy::take_ownership);
  return NumpyAsArray()(owner);
}

nb::object ToPython(Element& element, const ElementFormat& format) {
  if (element.size() == 1 && !format.names) return TensorToPython(element[0], format.writable);
  if (format.names && format.names->size() == element.size()) {
    nb::dict d;
    for (size_t i = 0; i < element.size(); ++i) {
      d[nb::str((*format.names)[i].c_str())] = TensorToPython(element[i], format.writable);
    }
    return d;
  }
  PyObject* tuple = PyTuple_New(static_cast<Py_ssize_t>(element.size()));
  if (tuple == nullptr) throw nb::python_error();
  nb::object result = nb::steal(tuple);
  for (size_t i = 0; i < element.size(); ++i) {
    PyTuple_SET_ITEM(tuple, static_cast<Py_ssize_t>(i), TensorToPython(element[i], format.writable).release().ptr());
  }
  return result;
}

void BindElements(nb::module_& m) {
  nb::class_<TensorBuffer>(m, "TensorBuffer",
                           "Holds the memory of a received tensor; numpy arrays of elements have it as their base.")
      .def_prop_ro("__array_interface__", &TensorBuffer::ArrayInterface)
      .def_prop_ro("buffer_address", &TensorBuffer::buffer_address,
                   "Start of the memory block the tensor lies in (the received message's buffer).")
      .def_prop_ro("buffer_size", &TensorBuffer::buffer_size, "Size of that block in bytes.")
      .def_prop_ro("data_address", &TensorBuffer::data_address, "Address of the tensor's first byte.")
      .def_prop_ro("nbytes", &TensorBuffer::nbytes)
      .def_prop_ro("writable", &TensorBuffer::writable);
}

}  // namespace tfdata::python
