// python: a function that the worker's operator loaded, called by name through the process's
// PythonFunctionHost (lib/functions/python_host.h). No code travels in the pipeline.
#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"

namespace tfdata {
namespace {

constexpr size_t kMaxNameBytes = 200;

// Names as Python code registers them: identifiers, dotted or with a colon ("pkg.mod:fn").
bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameBytes) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

class PythonFn : public Function {
 public:
  PythonFn(std::string name, std::shared_ptr<const PythonFunctionHost> host, PythonCallKind kind,
           std::optional<std::vector<std::string>> names)
      : name_(std::move(name)),
        label_(fmt::format("python function '{}'", name_)),
        host_(std::move(host)),
        kind_(kind),
        names_(std::move(names)) {}

  std::string_view name() const override { return label_; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    if (kind_ == PythonCallKind::kFilter) return ElementSpec{{TensorSpec{DType::kBool, {}}}, false};
    return ElementSpec::Unknown();  // whatever the Python code returns
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext& ctx) const override {
    std::vector<Element> inputs;
    inputs.push_back(std::move(input));
    return std::move(ApplyBatch(std::move(inputs), ctx)[0]);
  }

  absl::StatusOr<std::vector<Element>> ApplyMany(Element input, const FunctionContext& ctx) const override {
    if (kind_ != PythonCallKind::kFlatMap) return Function::ApplyMany(std::move(input), ctx);
    if (host_ == nullptr) return NoHost();
    std::vector<Element> inputs;
    inputs.push_back(std::move(input));
    TFD_ASSIGN_OR_RETURN(std::vector<PythonCallResult> results, host_->Call(name_, kind_, std::move(inputs), names_));
    if (results.size() != 1) {
      return absl::InternalError(fmt::format("{}: {} results for 1 input", label_, results.size()));
    }
    return std::move(results[0]);
  }

  // A flat_map's function is called one element at a time (flat_map is sequential).
  bool batches() const override { return kind_ != PythonCallKind::kFlatMap; }

  // One call for the whole chunk: a round trip to a helper process costs more than a cheap
  // function, so parallel map hands over chunks.
  std::vector<absl::StatusOr<Element>> ApplyBatch(std::vector<Element> inputs,
                                                  const FunctionContext& first) const override {
    const size_t n = inputs.size();
    std::vector<absl::StatusOr<Element>> out;
    if (host_ == nullptr) {
      out.assign(n, NoHost());
      return out;
    }
    auto results = host_->Call(name_, kind_, std::move(inputs), names_);
    if (!results.ok()) {
      out.assign(n, results.status());
      return out;
    }
    if (results->size() != n) {
      out.assign(n, absl::InternalError(fmt::format("{}: {} results for {} inputs", label_, results->size(), n)));
      return out;
    }
    for (PythonCallResult& r : *results) {
      if (!r.ok()) {
        out.push_back(r.status());
      } else if (r->size() != 1) {
        out.push_back(absl::InvalidArgumentError(
            fmt::format("{}: returned {} elements where map takes one (a list is for flat_map)", label_, r->size())));
      } else {
        out.push_back(std::move((*r)[0]));
      }
    }
    return out;
  }

 private:
  absl::Status NoHost() const {
    return absl::FailedPreconditionError(
        fmt::format("{}: this process runs no Python functions; load the module that registers it (tfdata worker, "
                    "run or local --python-module MODULE; or tfdata.register_function in this Python process)",
                    label_));
  }

  const std::string name_;
  const std::string label_;
  const std::shared_ptr<const PythonFunctionHost> host_;
  const PythonCallKind kind_;
  const std::optional<std::vector<std::string>> names_;
};

}  // namespace

bool IsPythonFunction(const pipeline::Function& fn) { return fn.kind_case() == pipeline::Function::kPython; }

absl::StatusOr<std::unique_ptr<Function>> MakePython(const pipeline::Python& spec, const FunctionOptions& options,
                                                     PythonCallKind kind) {
  if (!ValidName(spec.name())) {
    return absl::InvalidArgumentError(fmt::format(
        "python: `name` must be the name a function was registered under (1 to {} characters of letters, digits, "
        "'_', '.', ':' or '-'), got '{}'",
        kMaxNameBytes, spec.name().substr(0, kMaxNameBytes)));
  }
  if (options.python != nullptr) TFD_RETURN_IF_ERROR(options.python->CheckLoaded(spec.name()));
  return std::make_unique<PythonFn>(spec.name(), options.python, kind, options.input_names);
}

}  // namespace tfdata
