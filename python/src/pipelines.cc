#include "python/src/pipelines.h"

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"
#include "lib/core/memory_budget.h"
#include "lib/pipeline/names.h"
#include "python/src/functions.h"
#include "python/src/iterator.h"
#include "python/src/status.h"

namespace nb = nanobind;
using namespace nb::literals;
namespace pb = google::protobuf;

namespace tfdata::python {
namespace {

// ---- schema --------------------------------------------------------------------------------------

const char* KindOf(const pb::FieldDescriptor* f) {
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_INT64: return "int";
    case pb::FieldDescriptor::CPPTYPE_UINT32:
    case pb::FieldDescriptor::CPPTYPE_UINT64: return "uint";
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: return "float";
    case pb::FieldDescriptor::CPPTYPE_BOOL: return "bool";
    case pb::FieldDescriptor::CPPTYPE_ENUM: return "enum";
    case pb::FieldDescriptor::CPPTYPE_STRING: return f->type() == pb::FieldDescriptor::TYPE_BYTES ? "bytes" : "string";
    case pb::FieldDescriptor::CPPTYPE_MESSAGE: return "message";
  }
  return "unknown";
}

void AddMessage(const pb::Descriptor* d, nb::dict& messages, nb::dict& enums) {
  if (messages.contains(d->name().c_str())) return;
  nb::list fields;
  messages[d->name().c_str()] = fields;
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    std::string type;
    if (f->message_type() != nullptr) {
      type = f->message_type()->name();
      AddMessage(f->message_type(), messages, enums);
    } else if (f->enum_type() != nullptr) {
      type = f->enum_type()->name();
      nb::list values;
      for (int v = 0; v < f->enum_type()->value_count(); ++v) values.append(f->enum_type()->value(v)->name().c_str());
      enums[type.c_str()] = values;
    }
    fields.append(nb::make_tuple(f->name().c_str(), KindOf(f), f->is_repeated(), type.c_str()));
  }
}

// {"ops": [(kind, message)], "functions": [...], "messages": {name: [(field, kind, repeated,
// type)]}, "enums": {name: [value names]}}: the builder's whole vocabulary, in declaration order.
nb::dict Schema() {
  nb::dict messages, enums;
  auto oneof = [&](const pb::Descriptor* d) {
    nb::list kinds;
    const pb::OneofDescriptor* o = d->oneof_decl(0);
    for (int i = 0; i < o->field_count(); ++i) {
      kinds.append(nb::make_tuple(o->field(i)->name().c_str(), o->field(i)->message_type()->name().c_str()));
    }
    AddMessage(d, messages, enums);
    return kinds;
  };
  nb::dict schema;
  schema["ops"] = oneof(pipeline::Op::descriptor());
  schema["functions"] = oneof(pipeline::Function::descriptor());
  AddMessage(pipeline::Pipeline::descriptor(), messages, enums);
  schema["messages"] = messages;
  schema["enums"] = enums;
  return schema;
}

// ---- Python values to messages ---------------------------------------------------------------------

std::string TypeName(nb::handle h) { return nb::cast<std::string>(nb::str(h.type().attr("__name__"))); }

[[noreturn]] void TypeError(const std::string& message) { throw nb::type_error(message.c_str()); }
[[noreturn]] void ValueError(const std::string& message) { throw nb::value_error(message.c_str()); }

std::string FieldNames(const pb::Descriptor* d) {
  std::vector<std::string> names;
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ", ");
}

void FillMessage(pb::Message* msg, nb::handle value, const std::string& path);

int64_t ToInt(nb::handle v, const std::string& path) {
  if (PyBool_Check(v.ptr()) || PyFloat_Check(v.ptr()) || !PyIndex_Check(v.ptr())) {
    TypeError(path + ": expected an int, got " + TypeName(v) + " " + nb::cast<std::string>(nb::repr(v)));
  }
  nb::object index = nb::steal(PyNumber_Index(v.ptr()));
  if (!index.is_valid()) throw nb::python_error();
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) ValueError(path + ": " + nb::cast<std::string>(nb::repr(v)) + " does not fit in 64 bits");
  return n;
}

void SetValue(pb::Message* msg, const pb::FieldDescriptor* f, nb::handle v, const std::string& path) {
  const pb::Reflection* r = msg->GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_INT32:
    case pb::FieldDescriptor::CPPTYPE_INT64:
    case pb::FieldDescriptor::CPPTYPE_UINT32:
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      const int64_t n = ToInt(v, path);
      const auto t = f->cpp_type();
      if ((t == pb::FieldDescriptor::CPPTYPE_UINT32 || t == pb::FieldDescriptor::CPPTYPE_UINT64) && n < 0) {
        ValueError(path + ": must not be negative, got " + std::to_string(n));
      }
      if ((t == pb::FieldDescriptor::CPPTYPE_INT32 && (n < INT32_MIN || n > INT32_MAX)) ||
          (t == pb::FieldDescriptor::CPPTYPE_UINT32 && n > UINT32_MAX)) {
        ValueError(path + ": " + std::to_string(n) + " does not fit in 32 bits");
      }
      if (t == pb::FieldDescriptor::CPPTYPE_INT32) {
        rep ? r->AddInt32(msg, f, static_cast<int32_t>(n)) : r->SetInt32(msg, f, static_cast<int32_t>(n));
      } else if (t == pb::FieldDescriptor::CPPTYPE_INT64) {
        rep ? r->AddInt64(msg, f, n) : r->SetInt64(msg, f, n);
      } else if (t == pb::FieldDescriptor::CPPTYPE_UINT32) {
        rep ? r->AddUInt32(msg, f, static_cast<uint32_t>(n)) : r->SetUInt32(msg, f, static_cast<uint32_t>(n));
      } else {
        rep ? r->AddUInt64(msg, f, static_cast<uint64_t>(n)) : r->SetUInt64(msg, f, static_cast<uint64_t>(n));
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_FLOAT:
    case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
      if (PyBool_Check(v.ptr()) || !(PyFloat_Check(v.ptr()) || PyIndex_Check(v.ptr()) || PyNumber_Check(v.ptr()))) {
        TypeError(path + ": expected a number, got " + TypeName(v));
      }
      const double d = PyFloat_AsDouble(v.ptr());
      if (d == -1.0 && PyErr_Occurred()) throw nb::python_error();
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT) {
        rep ? r->AddFloat(msg, f, static_cast<float>(d)) : r->SetFloat(msg, f, static_cast<float>(d));
      } else {
        rep ? r->AddDouble(msg, f, d) : r->SetDouble(msg, f, d);
      }
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      if (!PyBool_Check(v.ptr())) TypeError(path + ": expected a bool, got " + TypeName(v));
      const bool b = v.ptr() == Py_True;
      rep ? r->AddBool(msg, f, b) : r->SetBool(msg, f, b);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_STRING: {
      std::string s;
      if (PyUnicode_Check(v.ptr())) {
        s = nb::cast<std::string>(v);
      } else if (PyBytes_Check(v.ptr()) && f->type() == pb::FieldDescriptor::TYPE_BYTES) {
        s.assign(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
      } else {
        TypeError(path + ": expected a " + (f->type() == pb::FieldDescriptor::TYPE_BYTES ? "bytes or str" : "str") +
                  ", got " + TypeName(v));
      }
      rep ? r->AddString(msg, f, std::move(s)) : r->SetString(msg, f, std::move(s));
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumDescriptor* e = f->enum_type();
      const pb::EnumValueDescriptor* ev = nullptr;
      if (PyUnicode_Check(v.ptr())) {
        ev = e->FindValueByName(absl::AsciiStrToUpper(nb::cast<std::string>(v)));
      } else if (PyIndex_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
        ev = e->FindValueByNumber(static_cast<int>(ToInt(v, path)));
      } else {
        TypeError(path + ": expected one of " + e->name() + "'s names as a str, got " + TypeName(v));
      }
      if (ev == nullptr) {
        std::vector<std::string> names;
        for (int i = 0; i < e->value_count(); ++i) {
          if (e->value(i)->number() != 0) names.push_back(absl::AsciiStrToLower(e->value(i)->name()));
        }
        ValueError(path + ": " + nb::cast<std::string>(nb::repr(v)) + " is not a " + e->name() + " (one of " +
                   absl::StrJoin(names, ", ") + ")");
      }
      rep ? r->AddEnum(msg, f, ev) : r->SetEnum(msg, f, ev);
      return;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      FillMessage(rep ? r->AddMessage(msg, f) : r->MutableMessage(msg, f), v, path);
      return;
  }
}

bool IsSequence(nb::handle v) { return PyList_Check(v.ptr()) || PyTuple_Check(v.ptr()); }

void FillMessage(pb::Message* msg, nb::handle value, const std::string& path) {
  const pb::Descriptor* d = msg->GetDescriptor();
  if (PyUnicode_Check(value.ptr())) {  // text format, e.g. a nested Pipeline's text
    const std::string text = nb::cast<std::string>(value);
    if (!pb::TextFormat::MergeFromString(text, msg)) {
      ValueError(path + ": not valid " + d->name() + " text: " + text);
    }
    return;
  }
  if (IsSequence(value) && d->field_count() == 1 && d->field(0)->is_repeated()) {
    // A message of one list (Dims): the list itself.
    nb::dict wrapped;
    wrapped[d->field(0)->name().c_str()] = value;
    FillMessage(msg, wrapped, path);
    return;
  }
  if (!PyDict_Check(value.ptr())) {
    TypeError(path + ": expected " + d->name() + " (a dict of its fields: " + FieldNames(d) + "), got " +
              TypeName(value));
  }
  for (auto [key, v] : nb::borrow<nb::dict>(value)) {
    if (!PyUnicode_Check(key.ptr())) TypeError(path + ": field names are str, got " + TypeName(key));
    const std::string name = nb::cast<std::string>(key);
    const pb::FieldDescriptor* f = d->FindFieldByName(name);
    if (f == nullptr) {
      ValueError(path + ": " + d->name() + " has no field '" + name + "' (fields: " + FieldNames(d) + ")");
    }
    if (v.is_none()) continue;
    const std::string fpath = path + "." + name;
    if (f->is_repeated()) {
      if (IsSequence(v)) {
        size_t i = 0;
        for (nb::handle item : v) SetValue(msg, f, item, fpath + "[" + std::to_string(i++) + "]");
      } else {
        SetValue(msg, f, v, fpath);  // one value for a list
      }
    } else {
      SetValue(msg, f, v, fpath);
    }
  }
}

nb::object SpecToPython(const ElementSpec& spec) {
  if (spec.unknown) return nb::none();
  nb::list out;
  for (const TensorSpec& t : spec.components) {
    nb::object shape = nb::none();
    if (!t.unknown_rank) {
      nb::list dims;
      for (int64_t d : t.shape) {
        if (d < 0) {
          dims.append(nb::none());
        } else {
          dims.append(nb::steal(PyLong_FromLongLong(d)));
        }
      }
      shape = nb::tuple(dims);
    }
    out.append(nb::make_tuple(DTypeName(t.dtype), shape));
  }
  return out;
}

// The local run behind Pipeline.run(): computes each element here, so it waits without the GIL.
// Close() may come from another thread while one computes an element: it only marks the run
// closed, and the iterator is destroyed with the source.
class LocalSource : public ElementSource {
 public:
  explicit LocalSource(std::unique_ptr<Iterator> it) : it_(std::move(it)) {}
  absl::StatusOr<std::optional<bool>> NextWithin(Element* out, absl::Duration) override {
    if (closed_.load()) return false;
    auto more = it_->Next(out);
    if (!more.ok()) return more.status();
    return std::optional<bool>(*more);
  }
  bool polls() const override { return false; }
  void Close() override { closed_.store(true); }

 private:
  const std::unique_ptr<Iterator> it_;
  std::atomic<bool> closed_{false};
};

std::string CanonicalText(const pipeline::Pipeline& p) {
  std::string text;
  pb::TextFormat::Printer printer;
  printer.PrintToString(p, &text);
  return text;
}

}  // namespace

std::optional<std::vector<std::string>> ElementNames(const pipeline::Pipeline& pipeline) {
  return DistinctNames(NamesOf(pipeline, std::nullopt));
}

LoadedPipeline ParseText(const std::string& text, const std::string& name) {
  return Unwrap(ParsePipelineText(text, name));
}

BuildOptions ClientBuildOptions() {
  BuildOptions options;
  options.functions.allow_plugins = true;
  return options;
}

nb::tuple Describe(const Dataset& dataset, const pipeline::Pipeline& pipeline) {
  auto names = ElementNames(pipeline);
  nb::object py_names = nb::none();
  // An unknown spec (after a Python function) still has names when the pipeline gives them (output_names).
  if (names && (dataset.spec().unknown || names->size() == dataset.spec().components.size())) {
    nb::list l;
    for (const auto& n : *names) l.append(n.c_str());
    py_names = nb::tuple(l);
  }
  return nb::make_tuple(SpecToPython(dataset.spec()), py_names, dataset.Cardinality());
}

void BindPipelines(nb::module_& m) {
  m.def("pipeline_schema", &Schema, "The ops, functions, messages and enums of proto/pipeline.proto.");
  m.def(
      "op_text",
      [](const std::string& kind, nb::handle fields) {
        pipeline::Pipeline p;
        pipeline::Op* op = p.add_op();
        const pb::FieldDescriptor* f = pipeline::Op::descriptor()->FindFieldByName(kind);
        if (f == nullptr || f->message_type() == nullptr) ValueError("unknown op '" + kind + "'");
        FillMessage(op->GetReflection()->MutableMessage(op, f), fields, kind);
        return CanonicalText(p);
      },
      "Pipeline text of one op of `kind` with `fields` (a dict, values as the builder makes them).");
  m.def(
      "function_text",
      [](const std::string& kind, nb::handle fields) {
        pipeline::Function fn;
        const pb::FieldDescriptor* f = pipeline::Function::descriptor()->FindFieldByName(kind);
        if (f == nullptr || f->message_type() == nullptr) ValueError("unknown function '" + kind + "'");
        FillMessage(fn.GetReflection()->MutableMessage(&fn, f), fields, kind);
        std::string text;
        pb::TextFormat::Printer printer;
        printer.SetSingleLineMode(true);
        printer.PrintToString(fn, &text);
        return text;
      },
      "Function text (one line) of `kind` with `fields`.");
  m.def(
      "message_check",
      [](const std::string& message, nb::handle fields) {
        const pb::Descriptor* d =
            pb::DescriptorPool::generated_pool()->FindMessageTypeByName("tfdata.pipeline." + message);
        if (d == nullptr) ValueError("unknown message '" + message + "'");
        std::unique_ptr<pb::Message> msg(pb::MessageFactory::generated_factory()->GetPrototype(d)->New());
        FillMessage(msg.get(), fields, message);
      },
      "Type-checks `fields` as a `message` (TypeError / ValueError naming the field).");
  m.def(
      "canonical_text",
      [](const std::string& text, const std::string& name) { return CanonicalText(ParseText(text, name).pipeline); },
      "Parses pipeline text and prints it back in canonical form.");
  m.def(
      "load_pipeline_file",
      [](const std::string& path) {
        auto loaded = Unwrap(LoadPipelineFile(path));
        return CanonicalText(loaded.pipeline);
      },
      "Reads a pipeline file (.pbtxt, .pb, .json) and returns its text.");
  m.def(
      "describe_pipeline",
      [](const std::string& text, const std::string& name) {
        LoadedPipeline loaded = ParseText(text, name);
        DatasetPtr ds = Unwrap(BuildDataset(loaded.pipeline, ClientBuildOptions(), loaded.source()));
        return Describe(*ds, loaded.pipeline);
      },
      "Validates pipeline text as the engine does; returns (spec, names, cardinality).");
  m.def(
      "run_pipeline",
      [](const std::string& text, const std::string& name, int64_t max_memory_bytes) {
        LoadedPipeline loaded = ParseText(text, name);
        BuildOptions options = ClientBuildOptions();
        options.functions.python = InProcessHost();  // functions registered in this process
        if (max_memory_bytes > 0) {                  // 0: the default (half of this machine's memory), as `tfdata run`
          options.memory = std::make_shared<MemoryBudget>(max_memory_bytes, "the memory limit (run max_memory)");
        }
        DatasetPtr ds = Unwrap(BuildDataset(loaded.pipeline, options, loaded.source()));
        std::unique_ptr<Iterator> it;
        {
          nb::gil_scoped_release release;
          auto made = ds->MakeIterator(IteratorContext{});
          if (made.ok()) it = *std::move(made);
          else {
            nb::gil_scoped_acquire acquire;
            RaiseStatus(made.status());
          }
        }
        ElementFormat format;
        format.names = ElementNames(loaded.pipeline);
        if (format.names && !ds->spec().unknown && format.names->size() != ds->spec().components.size()) {
          format.names.reset();
        }
        return new ElementIterator(std::make_unique<LocalSource>(std::move(it)), format);
      },
      "text"_a, "name"_a, "max_memory_bytes"_a = 0, nb::rv_policy::take_ownership,
      "Iterates pipeline text in this process (as `tfdata run`).");
}

}  // namespace tfdata::python
