// python: a function that the worker's operator loaded, called by name through the process's
// PythonFunctionHost (lib/functions/python_host.h). No code travels in the pipeline.
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "fmt/format.h"
#include "fmt/ranges.h"
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
  PythonFn(std::string name, std::shared_ptr<const PythonFunctionHost> host, PythonCallKind kind, PythonCallNames names)
      : name_(std::move(name)),
        label_(fmt::format("python function '{}'", name_)),
        host_(std::move(host)),
        kind_(kind),
        names_(std::move(names)) {}

  std::string_view name() const override { return label_; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    if (kind_ == PythonCallKind::kFilter) return ElementSpec{{TensorSpec{DType::kBool, {}}}, false};
    return ElementSpec::Unknown();  // whatever the Python code returns (output_names checks the count)
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext& ctx) const override {
    std::vector<Element> inputs;
    inputs.push_back(std::move(input));
    return std::move(ApplyBatch(std::move(inputs), ctx)[0]);
  }

  // One call per chunk: a round trip to a helper process costs more than a cheap function, so
  // map, filter and flat_map hand over chunks.
  bool batches() const override { return true; }

  std::vector<absl::StatusOr<Element>> ApplyBatch(std::vector<Element> inputs,
                                                  const FunctionContext& first) const override {
    std::vector<absl::StatusOr<Element>> out;
    for (PythonCallResult& r : CallHost(std::move(inputs), first)) {
      if (!r.ok()) {
        out.push_back(r.status());
      } else if (r->size() != 1) {
        out.push_back(absl::InvalidArgumentError(
            fmt::format("{} (element {}): returned {} elements where map takes one (a list is for flat_map)", label_,
                        first.element_index + out.size(), r->size())));
      } else {
        out.push_back(std::move((*r)[0]));
      }
    }
    return out;
  }

  std::vector<absl::StatusOr<std::vector<Element>>> ApplyMany(std::vector<Element> inputs,
                                                              const FunctionContext& first) const override {
    if (kind_ != PythonCallKind::kFlatMap) return Function::ApplyMany(std::move(inputs), first);
    return CallHost(std::move(inputs), first);
  }

 private:
  // One result per input: a failed call fails each. An input's own error ("python function 'f'
  // raised ...") gains the input's place: "python function 'f' (element 17) raised ...".
  std::vector<PythonCallResult> CallHost(std::vector<Element> inputs, const FunctionContext& first) const {
    const size_t n = inputs.size();
    if (host_ == nullptr) return std::vector<PythonCallResult>(n, NoHost());
    auto results = host_->Call(name_, kind_, std::move(inputs), names_);
    if (!results.ok()) return std::vector<PythonCallResult>(n, results.status());
    if (results->size() != n) {
      return std::vector<PythonCallResult>(
          n, absl::InternalError(fmt::format("{}: {} results for {} inputs", label_, results->size(), n)));
    }
    const std::string prefix = label_ + " ";
    for (size_t i = 0; i < n; ++i) {
      PythonCallResult& r = (*results)[i];
      if (r.ok() || !absl::StartsWith(r.status().message(), prefix)) continue;
      r = absl::Status(r.status().code(), fmt::format("{} (element {}) {}", label_, first.element_index + i,
                                                      std::string(r.status().message().substr(prefix.size()))));
    }
    return *std::move(results);
  }

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
  const PythonCallNames names_;
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
  PythonCallNames names{options.input_names, {spec.output_names().begin(), spec.output_names().end()}};
  if (kind == PythonCallKind::kFilter && !names.outputs.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "python: '{}' is a filter's predicate, which returns a bool: it takes no `output_names`", spec.name()));
  }
  const std::set<std::string> distinct(names.outputs.begin(), names.outputs.end());
  if (distinct.size() != names.outputs.size() || distinct.count("") > 0) {
    return absl::InvalidArgumentError(
        fmt::format("python: `output_names` of '{}' must be distinct and not empty, got [{}]", spec.name(),
                    fmt::join(names.outputs, ", ")));
  }
  if (options.python != nullptr) TFD_RETURN_IF_ERROR(options.python->CheckLoaded(spec.name()));
  return std::make_unique<PythonFn>(spec.name(), options.python, kind, std::move(names));
}

}  // namespace tfdata
