#include "python/src/functions.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
#include "lib/core/status_macros.h"
#include "lib/python_functions/protocol.h"
#include "python/src/elements.h"
#include "python/src/status.h"

namespace nb = nanobind;

namespace tfdata::python {
namespace {

using python_functions::Call;
using python_functions::ResponseWriter;
using python_functions::SharedRegion;

constexpr const char* kAccepted = "numpy arrays, Python bool/int/float, bytes, str, or a tuple or dict of them";
// Frames of a traceback kept in an error: the innermost, where the user's code failed.
constexpr int kTracebackFrames = 6;

std::string TypeName(nb::handle v) { return nb::cast<std::string>(nb::handle(Py_TYPE(v.ptr())).attr("__name__")); }

absl::Status Unconvertible(nb::handle v, const std::string& why) {
  return absl::InvalidArgumentError(fmt::format("returned {}: {}", TypeName(v), why));
}

// A buffer-protocol format character (numpy's) as a DType.
std::optional<DType> FormatDType(const char* format, Py_ssize_t itemsize) {
  std::string f = format == nullptr ? "B" : format;
  while (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '|' || f[0] == '!')) f.erase(0, 1);
  if (f.size() != 1) return std::nullopt;
  switch (f[0]) {
    case '?': return DType::kBool;
    case 'b': return DType::kInt8;
    case 'B': return DType::kUInt8;
    case 'h': return DType::kInt16;
    case 'H': return DType::kUInt16;
    case 'i': return itemsize == 4 ? std::optional(DType::kInt32) : std::nullopt;
    case 'I': return itemsize == 4 ? std::optional(DType::kUInt32) : std::nullopt;
    case 'l':
    case 'q': return itemsize == 8 ? std::optional(DType::kInt64) : std::nullopt;
    case 'L':
    case 'Q': return itemsize == 8 ? std::optional(DType::kUInt64) : std::nullopt;
    case 'f': return DType::kFloat32;
    case 'd': return DType::kFloat64;
    default: return std::nullopt;
  }
}

// A numpy array of bytes/str objects, or of numpy's fixed-width 'S'/'U' kinds, as strings.
absl::StatusOr<Tensor> StringArray(nb::handle array) {
  Shape shape;
  for (nb::handle d : array.attr("shape")) shape.push_back(nb::cast<int64_t>(d));
  std::vector<std::string> values;
  for (nb::handle v : array.attr("reshape")(-1).attr("tolist")()) {
    if (PyBytes_Check(v.ptr())) {
      values.emplace_back(PyBytes_AS_STRING(v.ptr()), PyBytes_GET_SIZE(v.ptr()));
    } else if (PyUnicode_Check(v.ptr())) {
      Py_ssize_t n = 0;
      const char* s = PyUnicode_AsUTF8AndSize(v.ptr(), &n);
      if (s == nullptr) throw nb::python_error();
      values.emplace_back(s, n);
    } else {
      return Unconvertible(array, fmt::format("an object array holding {} (only bytes or str)", TypeName(v)));
    }
  }
  return Tensor::Strings(std::move(shape), std::move(values));
}

absl::StatusOr<Tensor> TensorFromPython(nb::handle v, bool alias) {
  PyObject* o = v.ptr();
  if (PyBool_Check(o)) return Tensor::Scalar<bool>(o == Py_True);
  if (PyLong_CheckExact(o) || (PyLong_Check(o) && !PyBool_Check(o))) {
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow != 0) return Unconvertible(v, "an int outside int64");
    return Tensor::Scalar<int64_t>(x);
  }
  if (PyFloat_Check(o)) return Tensor::Scalar<double>(PyFloat_AS_DOUBLE(o));
  if (PyBytes_Check(o)) return Tensor::String(std::string(PyBytes_AS_STRING(o), PyBytes_GET_SIZE(o)));
  if (PyUnicode_Check(o)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (s == nullptr) throw nb::python_error();
    return Tensor::String(std::string(s, n));
  }
  if (!PyObject_CheckBuffer(o)) return Unconvertible(v, std::string("it cannot become an element (") + kAccepted + ")");
  // numpy arrays and scalars: through the buffer protocol.
  nb::object dtype = nb::getattr(v, "dtype", nb::none());
  if (!dtype.is_none()) {
    const std::string kind = nb::cast<std::string>(dtype.attr("kind"));
    if (kind == "O" || kind == "S" || kind == "U") return StringArray(v);
  }
  auto view = std::shared_ptr<Py_buffer>(new Py_buffer, [](Py_buffer* b) {
    PyBuffer_Release(b);
    delete b;
  });
  if (PyObject_GetBuffer(o, view.get(), PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    view.reset(new Py_buffer{}, [](Py_buffer* b) { delete b; });
    return Unconvertible(v, "its buffer cannot be read");
  }
  const std::optional<DType> d = FormatDType(view->format, view->itemsize);
  if (!d) {
    return Unconvertible(v, fmt::format("dtype {} is not one of bool, int8-64, uint8-64, float32, float64, bytes",
                                        dtype.is_none() ? std::string(view->format ? view->format : "?")
                                                        : nb::cast<std::string>(nb::str(dtype))));
  }
  Shape shape(view->shape, view->shape + view->ndim);
  const auto size = static_cast<size_t>(view->len);
  std::shared_ptr<Buffer> buffer;
  if (alias && PyBuffer_IsContiguous(view.get(), 'C')) {
    auto* data = static_cast<const uint8_t*>(view->buf);
    buffer = Buffer::Wrap(data, size, view);
  } else {
    buffer = Buffer::Allocate(size);
    if (PyBuffer_ToContiguous(buffer->mutable_data(), view.get(), view->len, 'C') != 0) throw nb::python_error();
  }
  return Tensor::FromBuffer(*d, std::move(shape), std::move(buffer), 0, size);
}

// The exception being handled as a status: its type, message and the innermost frames.
absl::Status ExceptionStatus(nb::python_error& e, const std::string& name) {
  std::string type = "Exception", message, frames;
  try {
    nb::object exc = nb::borrow(e.value());
    type = TypeName(exc);
    message = nb::cast<std::string>(nb::str(exc));
    nb::object tb = nb::borrow(e.traceback());
    if (tb.is_valid() && !tb.is_none()) {
      nb::object extracted = nb::module_::import_("traceback").attr("extract_tb")(tb);
      const size_t n = nb::len(extracted);
      nb::object last =
          extracted[nb::slice(nb::int_(n > kTracebackFrames ? n - kTracebackFrames : 0), nb::int_(n), nb::int_(1))];
      for (nb::handle line : nb::module_::import_("traceback").attr("format_list")(last)) {
        frames += nb::cast<std::string>(line);
      }
    }
  } catch (nb::python_error&) {
    PyErr_Clear();
  }
  e.restore();
  PyErr_Clear();
  std::string text = fmt::format("python function '{}' raised {}: {}", name, type, message);
  if (!frames.empty()) text += "\nTraceback (innermost frames):\n" + frames;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return absl::InvalidArgumentError(text);
}

// One call's result, by kind; errors name the function.
PythonCallResult ResultFromPython(nb::handle r, PythonCallKind kind, const std::string& name,
                                  const std::vector<std::string>& outputs, bool alias) {
  auto named = [&](const absl::Status& st) {
    return absl::Status(st.code(), fmt::format("python function '{}' {}", name, std::string(st.message())));
  };
  std::vector<Element> out;
  switch (kind) {
    case PythonCallKind::kFilter: {
      int truth = -1;
      if (PyBool_Check(r.ptr())) {
        truth = r.ptr() == Py_True;
      } else if (nb::hasattr(r, "dtype") && nb::cast<std::string>(r.attr("dtype").attr("kind")) == "b" &&
                 nb::cast<int64_t>(r.attr("size")) == 1) {
        truth = nb::cast<bool>(r.attr("item")());
      }
      if (truth < 0) {
        return named(absl::InvalidArgumentError(
            fmt::format("returned {} as a filter predicate: it must return a bool", TypeName(r))));
      }
      Element e;
      e.push_back(Tensor::Scalar<bool>(truth == 1));
      out.push_back(std::move(e));
      return out;
    }
    case PythonCallKind::kFlatMap: {
      if (!PyList_Check(r.ptr())) {
        return named(absl::InvalidArgumentError(
            fmt::format("returned {} to flat_map: it must return a list of elements", TypeName(r))));
      }
      for (nb::handle item : r) {
        auto e = ElementFromPython(item, alias, outputs);
        if (!e.ok()) return named(e.status());
        out.push_back(*std::move(e));
      }
      return out;
    }
    case PythonCallKind::kMap: {
      if (PyList_Check(r.ptr())) {
        return named(
            absl::InvalidArgumentError("returned a list: map makes one element of each (a tuple for "
                                       "several components; a list of elements is for flat_map)"));
      }
      auto e = ElementFromPython(r, alias, outputs);
      if (!e.ok()) return named(e.status());
      out.push_back(*std::move(e));
      return out;
    }
  }
  return absl::InternalError("unknown call kind");
}

// Calls `fn` on each input (the GIL held).
std::vector<PythonCallResult> CallEach(nb::handle fn, const std::string& name, PythonCallKind kind,
                                       std::vector<Element>& inputs, const ElementFormat& format,
                                       const std::vector<std::string>& outputs, bool alias,
                                       std::atomic<uint64_t>* progress) {
  std::vector<PythonCallResult> results;
  for (size_t i = 0; i < inputs.size(); ++i) {
    try {
      nb::object arg = ToPython(inputs[i], format);
      nb::object r = fn(arg);
      results.push_back(ResultFromPython(r, kind, name, outputs, alias));
    } catch (nb::python_error& e) {
      results.push_back(ExceptionStatus(e, name));
    }
    if (progress != nullptr) progress->store(i + 1, std::memory_order_relaxed);
  }
  return results;
}

nb::object Registry() {
  static nb::object* registry = new nb::object(nb::module_::import_("tfdata.functions").attr("_REGISTRY"));
  return *registry;
}

class InProcess : public PythonFunctionHost {
 public:
  absl::Status CheckLoaded(const std::string& name) const override {
    nb::gil_scoped_acquire gil;
    nb::object registry = Registry();
    if (registry.attr("__contains__")(name).ptr() == Py_True) return absl::OkStatus();
    nb::object names = nb::module_::import_("tfdata.functions").attr("registered_functions")();
    std::string have;
    for (nb::handle n : names) have += (have.empty() ? "" : ", ") + nb::cast<std::string>(n);
    return absl::FailedPreconditionError(
        fmt::format("python function '{}' is not loaded in this process: it registers {} (register it with "
                    "@tfdata.function(\"{}\") or tfdata.register_function before the pipeline runs)",
                    name, have.empty() ? "none" : have, name));
  }

  absl::StatusOr<std::vector<PythonCallResult>> Call(const std::string& name, PythonCallKind kind,
                                                     std::vector<Element> inputs,
                                                     const PythonCallNames& names) const override {
    nb::gil_scoped_acquire gil;
    nb::object fn = Registry().attr("get")(name);
    if (fn.is_none()) return CheckLoaded(name);
    // Read-only views: in process, an input's memory may be shared (a cache upstream).
    ElementFormat format;
    format.names = names.inputs;
    format.writable = false;
    auto results = CallEach(fn, name, kind, inputs, format, names.outputs, /*alias=*/false, nullptr);
    inputs.clear();  // dropped with the GIL held
    return results;
  }
};

// The helper process's loop: until the worker closes the socket.
void ServeFunctions(int socket, int request_fd, const std::vector<int>& response_fds, nb::dict registry) {
  if (response_fds.size() != static_cast<size_t>(python_functions::kResponseRegions)) {
    throw nb::value_error(fmt::format("serve_functions: {} response regions, expected {}", response_fds.size(),
                                      python_functions::kResponseRegions)
                              .c_str());
  }
  SharedRegion request = Unwrap(SharedRegion::Adopt(request_fd));
  std::vector<SharedRegion> responses;
  for (int fd : response_fds) responses.push_back(Unwrap(SharedRegion::Adopt(fd)));
  std::string message(python_functions::kMaxControlBytes, '\0');
  while (true) {
    ssize_t n;
    {
      nb::gil_scoped_release release;
      do {
        n = recv(socket, message.data(), message.size(), 0);
      } while (n < 0 && errno == EINTR);
    }
    if (n <= 0) return;  // the worker is gone
    Call call = Unwrap(python_functions::DecodeCall(message.substr(0, static_cast<size_t>(n))));
    SharedRegion& response = responses[static_cast<size_t>(call.response)];
    ResponseWriter writer(&response);
    {
      std::vector<Element> inputs = Unwrap(python_functions::ReadRequest(&request, call));
      nb::object fn = registry.contains(call.name.c_str()) ? nb::object(registry[call.name.c_str()]) : nb::none();
      std::vector<PythonCallResult> results;
      if (fn.is_none()) {
        results.assign(inputs.size(),
                       absl::FailedPreconditionError(fmt::format("python function '{}' is not loaded", call.name)));
      } else {
        ElementFormat format;
        format.names = call.names.inputs;
        format.writable = true;  // the helper's own copy of the input
        results = CallEach(fn, call.name, call.kind, inputs, format, call.names.outputs, /*alias=*/true,
                           python_functions::Progress(response));
      }
      for (const PythonCallResult& r : results) {
        if (!r.ok()) {
          RaiseIfError(writer.AddError(r.status()));
          continue;
        }
        // A result the frame cannot hold (rank over 32, no memory for the region) fails its input only.
        const size_t mark = writer.bytes();
        if (absl::Status st = writer.AddElements(*r); !st.ok()) {
          writer.Truncate(mark);
          RaiseIfError(writer.AddError(absl::Status(
              st.code(), fmt::format("python function '{}' returned an element that cannot be passed on: {}", call.name,
                                     std::string(st.message())))));
        }
      }
    }
    python_functions::ReplyHeader reply;
    reply.count = call.count;
    reply.response_bytes = writer.bytes();
    ssize_t sent;
    do {
      sent = send(socket, &reply, sizeof(reply), MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent != static_cast<ssize_t>(sizeof(reply))) return;
  }
}

}  // namespace

absl::StatusOr<Element> ElementFromPython(nb::handle value, bool alias, const std::vector<std::string>& outputs) {
  Element e;
  if (PyTuple_Check(value.ptr())) {
    if (!outputs.empty() && static_cast<size_t>(PyTuple_GET_SIZE(value.ptr())) != outputs.size()) {
      return Unconvertible(value, fmt::format("a tuple of {} where output_names are {} ({})",
                                              PyTuple_GET_SIZE(value.ptr()), outputs.size(), fmt::join(outputs, ", ")));
    }
    for (nb::handle c : value) {
      TFD_ASSIGN_OR_RETURN(Tensor t, TensorFromPython(c, alias));
      e.push_back(std::move(t));
    }
  } else if (PyDict_Check(value.ptr())) {
    auto dict = nb::borrow<nb::dict>(value);
    if (outputs.empty()) {
      for (auto [k, c] : dict) {
        TFD_ASSIGN_OR_RETURN(Tensor t, TensorFromPython(c, alias));
        e.push_back(std::move(t));
      }
    } else {
      // In output_names' order; the keys must be exactly those.
      bool same = dict.size() == outputs.size();
      for (size_t i = 0; same && i < outputs.size(); ++i) same = dict.contains(outputs[i].c_str());
      if (!same) {
        std::vector<std::string> keys;
        for (auto [k, c] : dict) keys.push_back(nb::cast<std::string>(nb::repr(k)));
        return Unconvertible(value, fmt::format("a dict with keys [{}] where output_names are [{}]",
                                                fmt::join(keys, ", "), fmt::join(outputs, ", ")));
      }
      for (const std::string& n : outputs) {
        TFD_ASSIGN_OR_RETURN(Tensor t, TensorFromPython(dict[n.c_str()], alias));
        e.push_back(std::move(t));
      }
    }
  } else {
    if (outputs.size() > 1) {
      return Unconvertible(
          value, fmt::format("one value where output_names are {} ({})", outputs.size(), fmt::join(outputs, ", ")));
    }
    TFD_ASSIGN_OR_RETURN(Tensor t, TensorFromPython(value, alias));
    e.push_back(std::move(t));
  }
  if (e.empty()) return Unconvertible(value, "an element needs at least one component");
  return e;
}

std::shared_ptr<const PythonFunctionHost> InProcessHost() {
  static auto* host = new std::shared_ptr<const PythonFunctionHost>(std::make_shared<InProcess>());
  return *host;
}

void BindFunctions(nb::module_& m) {
  m.def(
      "watch_parent",
      [](int64_t parent) {
        // A thread of its own, outside the GIL: it ends a helper whose worker died, even while the
        // helper's Python code hangs.
        std::thread([parent] {
          while (getppid() == static_cast<pid_t>(parent)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
          _exit(3);
        }).detach();
      },
      nb::arg("parent"), "Ends this process when `parent` is no longer its parent (tfdata._helper).");
  m.attr("HELPER_PROTOCOL") = python_functions::kProtocolVersion;
  m.def("serve_functions", &ServeFunctions, nb::arg("socket"), nb::arg("request"), nb::arg("response"),
        nb::arg("registry"), "The loop of a worker's Python helper process (tfdata._helper).");
}

}  // namespace tfdata::python
