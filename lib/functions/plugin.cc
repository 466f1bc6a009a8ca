// plugin: user functions loaded from a shared library through the C ABI of tfdata_plugin.h.
//
// Ownership: the Function owns the plugin state (destroyed in its destructor) and shares the
// library handle, which is closed only after the state is destroyed. Apply is thread-safe as
// far as the host is concerned (all per-call data lives on the caller's stack); the plugin
// promises the same for its apply.
#include <dlfcn.h>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"
#include "lib/functions/tfdata_plugin.h"

namespace tfdata {
namespace {

// The ABI passes dtypes as plain integers, so the two enumerations must stay identical.
constexpr bool SameCode(int abi, DType d) { return abi == static_cast<int>(d); }
static_assert(SameCode(TFDATA_BOOL, DType::kBool) && SameCode(TFDATA_INT8, DType::kInt8) &&
                  SameCode(TFDATA_INT16, DType::kInt16) && SameCode(TFDATA_INT32, DType::kInt32) &&
                  SameCode(TFDATA_INT64, DType::kInt64) && SameCode(TFDATA_UINT8, DType::kUInt8) &&
                  SameCode(TFDATA_UINT16, DType::kUInt16) && SameCode(TFDATA_UINT32, DType::kUInt32) &&
                  SameCode(TFDATA_UINT64, DType::kUInt64) && SameCode(TFDATA_FLOAT32, DType::kFloat32) &&
                  SameCode(TFDATA_FLOAT64, DType::kFloat64) && SameCode(TFDATA_STRING, DType::kString),
              "plugin dtype codes must equal tfdata::DType values");

// Size of the error buffer handed to the plugin; longer messages are truncated by the plugin.
constexpr size_t kErrorBytes = 1024;

// A dlopen handle; dlclose when the last Function using it is gone.
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
};

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

bool IsIdentifier(const std::string& s) {
  if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Per-call state behind tfdata_output::host. Lives on the stack of one Apply call.
struct HostOutput {
  const Element* inputs = nullptr;
  Element outputs;
  std::vector<size_t> allocated;  // indices in `outputs` of tensors from alloc_tensor
  std::string error;              // the first problem reported by a callback
  const MemoryScope* memory = nullptr;
};

// Keeps the first error: later ones are usually consequences of it.
void SetError(HostOutput* host, std::string message) {
  if (host->error.empty()) host->error = std::move(message);
}

HostOutput* Host(tfdata_output* out) { return static_cast<HostOutput*>(out->host); }

// Validates a plugin-provided shape; on failure records why in `host`.
bool MakeShape(HostOutput* host, int32_t rank, const int64_t* dims, Shape* shape) {
  if (rank < 0 || rank > TFDATA_MAX_RANK || (rank > 0 && dims == nullptr)) {
    SetError(host, fmt::format("output rank {} is invalid (0..{}, dims required)", rank, TFDATA_MAX_RANK));
    return false;
  }
  shape->assign(dims, dims + rank);
  // Bounding the product of the nonzero dims keeps every later element count from overflowing.
  int64_t product = 1;
  for (int64_t d : *shape) {
    if (d < 0 || __builtin_mul_overflow(product, d == 0 ? 1 : d, &product)) {
      SetError(host, fmt::format("output shape {} is invalid", ShapeString(*shape)));
      return false;
    }
  }
  return true;
}

void* AllocTensor(tfdata_output* out, int32_t dtype, int32_t rank, const int64_t* dims) {
  HostOutput* host = Host(out);
  if (dtype < 0 || dtype > 255 || !IsValidDType(static_cast<uint8_t>(dtype)) || dtype == TFDATA_STRING) {
    SetError(host, fmt::format("alloc_tensor: dtype {} is not a numeric type code", dtype));
    return nullptr;
  }
  Shape shape;
  if (!MakeShape(host, rank, dims, &shape)) return nullptr;
  const auto d = static_cast<DType>(dtype);
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(NumElements(shape)), DTypeSize(d), &bytes)) {
    SetError(host, fmt::format("alloc_tensor: shape {} is too large", ShapeString(shape)));
    return nullptr;
  }
  if (host->memory != nullptr) {
    const absl::Status s = host->memory->get().CheckAllocation(
        static_cast<int64_t>(std::min<uint64_t>(bytes, INT64_MAX)), host->memory->where,
        fmt::format("alloc_tensor of {} {}", DTypeName(d), ShapeString(shape)));
    if (!s.ok()) {
      SetError(host, std::string(s.message()));
      return nullptr;
    }
  }
  host->allocated.push_back(host->outputs.size());
  host->outputs.push_back(Tensor::Zeros(d, std::move(shape)));
  // Zero-element tensors have no storage, but the ABI promises a non-NULL pointer.
  static uint64_t empty_tensor_sentinel;
  uint8_t* data = host->outputs.back().mutable_raw();
  return data != nullptr ? static_cast<void*>(data) : static_cast<void*>(&empty_tensor_sentinel);
}

int AddStringTensor(tfdata_output* out, int32_t rank, const int64_t* dims, const tfdata_string_view* values,
                    size_t num_values) {
  HostOutput* host = Host(out);
  Shape shape;
  if (!MakeShape(host, rank, dims, &shape)) return 1;
  if (static_cast<uint64_t>(NumElements(shape)) != num_values || (num_values > 0 && values == nullptr)) {
    SetError(host, fmt::format("add_string_tensor: shape {} needs {} values, got {}", ShapeString(shape),
                               NumElements(shape), num_values));
    return 1;
  }
  std::vector<std::string> strings;
  strings.reserve(num_values);
  for (size_t i = 0; i < num_values; ++i) {
    if (values[i].size > 0 && values[i].data == nullptr) {
      SetError(host, fmt::format("add_string_tensor: value {} has size {} but no data", i, values[i].size));
      return 1;
    }
    strings.emplace_back(values[i].data, values[i].size);
  }
  host->outputs.push_back(Tensor::Strings(std::move(shape), std::move(strings)));
  return 0;
}

int AddInput(tfdata_output* out, size_t index) {
  HostOutput* host = Host(out);
  if (index >= host->inputs->size()) {
    SetError(host, fmt::format("add_input: input {} does not exist; the element has {}", index, host->inputs->size()));
    return 1;
  }
  host->outputs.push_back((*host->inputs)[index]);
  return 0;
}

class PluginFunction final : public Function {
 public:
  PluginFunction(std::shared_ptr<Library> library, std::string label, tfdata_apply_fn apply, tfdata_destroy_fn destroy,
                 void* state, MemoryScope memory)
      : library_(std::move(library)),
        label_(std::move(label)),
        apply_(apply),
        destroy_(destroy),
        state_(state),
        memory_(std::move(memory)) {}

  ~PluginFunction() override {
    // Before library_ is released: destroy's code lives in the library.
    if (destroy_ != nullptr) destroy_(state_);
  }

  PluginFunction(const PluginFunction&) = delete;
  PluginFunction& operator=(const PluginFunction&) = delete;

  std::string_view name() const override { return "plugin"; }

  // Plugins do not describe their outputs, so downstream checks are skipped.
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override { return ElementSpec::Unknown(); }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    std::vector<tfdata_tensor_view> views(input.size());
    // String views per string component; `input` (and so the strings) outlives the call.
    std::vector<std::vector<tfdata_string_view>> string_views(input.size());
    for (size_t i = 0; i < input.size(); ++i) {
      const Tensor& t = input[i];
      tfdata_tensor_view& v = views[i];
      v.dtype = static_cast<int32_t>(t.dtype());
      v.rank = t.rank();
      v.dims = t.shape().empty() ? nullptr : t.shape().data();
      v.num_elements = t.num_elements();
      if (t.is_string()) {
        auto& sv = string_views[i];
        sv.reserve(t.strings().size());
        for (const std::string& s : t.strings()) sv.push_back({s.data(), s.size()});
        v.data = sv.data();
        v.nbytes = t.ByteSize();
      } else {
        v.data = t.raw();
        v.nbytes = t.nbytes();
      }
    }

    HostOutput host;
    host.inputs = &input;
    host.memory = &memory_;
    tfdata_output out{&host, &AllocTensor, &AddStringTensor, &AddInput};
    char err[kErrorBytes];
    err[0] = '\0';
    const int rc = apply_(state_, views.data(), views.size(), &out, err, sizeof(err));
    err[sizeof(err) - 1] = '\0';  // a plugin that forgot the terminator must not make us overread
    if (rc != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "plugin {}: {}", label_, err[0] != '\0' ? std::string(err) : fmt::format("failed (code {})", rc)));
    }
    if (!host.error.empty()) return absl::InvalidArgumentError(fmt::format("plugin {}: {}", label_, host.error));
    if (host.outputs.empty()) {
      return absl::InvalidArgumentError(fmt::format("plugin {}: produced no output tensors", label_));
    }
    // A bool byte other than 0/1 is undefined behavior when read as bool; normalize it here.
    for (size_t i : host.allocated) {
      Tensor& t = host.outputs[i];
      if (t.dtype() != DType::kBool) continue;
      uint8_t* p = t.mutable_raw();
      for (size_t k = 0; k < t.nbytes(); ++k) p[k] = p[k] != 0 ? 1 : 0;
    }
    return std::move(host.outputs);
  }

 private:
  const std::shared_ptr<Library> library_;  // declared first: released after destroy_ ran
  const std::string label_;                 // "LIBRARY:FUNCTION", for errors
  const tfdata_apply_fn apply_;
  const tfdata_destroy_fn destroy_;
  void* const state_;
  const MemoryScope memory_;  // what alloc_tensor outputs are checked against
};

template <typename Fn>
Fn Symbol(const Library& lib, const std::string& name) {
  return reinterpret_cast<Fn>(dlsym(lib.handle, name.c_str()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Function>> MakePlugin(const pipeline::Plugin& spec, const FunctionOptions& options) {
  const std::string& path = spec.library();
  const std::string& fn = spec.function();
  if (!options.allow_plugins) {
    return absl::PermissionDeniedError(
        fmt::format("plugin functions are disabled; refusing to load '{}' (plugins run arbitrary code: enable them "
                    "explicitly, e.g. with the worker's allow-plugins option)",
                    path));
  }
  if (path.empty()) return absl::InvalidArgumentError("plugin: `library` (path of the .so file) is empty");
  if (!IsIdentifier(fn)) {
    return absl::InvalidArgumentError(
        fmt::format("plugin: `function` must be a C identifier (the NAME in tfdata_fn_NAME_apply), got '{}'", fn));
  }

  auto lib = std::make_shared<Library>();
  lib->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == nullptr) {
    return absl::InvalidArgumentError(fmt::format("plugin: cannot load library '{}': {}", path, DlError()));
  }
  auto version = Symbol<tfdata_abi_version_fn>(*lib, "tfdata_plugin_abi_version");
  if (version == nullptr) {
    return absl::InvalidArgumentError(fmt::format("{} is not a tfdata plugin (no tfdata_plugin_abi_version)", path));
  }
  const uint32_t got = version();
  if (got != TFDATA_PLUGIN_ABI_VERSION) {
    return absl::FailedPreconditionError(
        fmt::format("{} was built for tfdata plugin ABI version {}, but this tfdata supports version {}; rebuild it "
                    "against lib/functions/tfdata_plugin.h",
                    path, got, TFDATA_PLUGIN_ABI_VERSION));
  }
  const std::string prefix = fmt::format("tfdata_fn_{}_", fn);
  auto apply = Symbol<tfdata_apply_fn>(*lib, prefix + "apply");
  if (apply == nullptr) {
    return absl::NotFoundError(
        fmt::format("plugin function '{}' not found in {} (no symbol {}apply)", fn, path, prefix));
  }
  auto create = Symbol<tfdata_create_fn>(*lib, prefix + "create");
  auto destroy = Symbol<tfdata_destroy_fn>(*lib, prefix + "destroy");

  void* state = nullptr;
  if (create != nullptr) {
    char err[kErrorBytes];
    err[0] = '\0';
    const int rc = create(spec.config().c_str(), spec.config().size(), &state, err, sizeof(err));
    err[sizeof(err) - 1] = '\0';
    if (rc != 0) {
      return absl::InvalidArgumentError(
          fmt::format("plugin {}:{}: {}", path, fn,
                      err[0] != '\0' ? std::string(err) : fmt::format("create failed (code {})", rc)));
    }
  }
  return std::make_unique<PluginFunction>(std::move(lib), fmt::format("{}:{}", path, fn), apply, destroy, state,
                                          options.memory);
}

}  // namespace tfdata
