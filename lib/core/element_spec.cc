#include "lib/core/element_spec.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tfdata {

std::string TensorSpec::DebugString() const {
  if (unknown_rank) return absl::StrCat(DTypeName(dtype), "[...]");
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(d < 0 ? "?" : absl::StrCat(d));
  return absl::StrCat(DTypeName(dtype), "[", absl::StrJoin(dims, ", "), "]");
}

std::string ElementSpec::DebugString() const {
  if (unknown) return "(unknown)";
  std::vector<std::string> parts;
  for (const auto& c : components) parts.push_back(c.DebugString());
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

ElementSpec SpecOf(const Element& element) {
  ElementSpec spec;
  for (const auto& t : element) spec.components.push_back(TensorSpec{t.dtype(), t.shape(), false});
  return spec;
}

absl::StatusOr<ElementSpec> MergeSpecs(const ElementSpec& a, const ElementSpec& b) {
  if (a.unknown || b.unknown) return ElementSpec::Unknown();
  if (a.components.size() != b.components.size()) {
    return absl::InvalidArgumentError(absl::StrCat("element types differ: ", a.DebugString(), " vs ", b.DebugString()));
  }
  ElementSpec out;
  for (size_t i = 0; i < a.components.size(); ++i) {
    const TensorSpec& x = a.components[i];
    const TensorSpec& y = b.components[i];
    if (x.dtype != y.dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("element types differ: ", a.DebugString(), " vs ", b.DebugString()));
    }
    TensorSpec m{x.dtype, {}, x.unknown_rank || y.unknown_rank};
    if (!m.unknown_rank) {
      if (x.shape.size() != y.shape.size()) {
        m.unknown_rank = true;
      } else {
        for (size_t d = 0; d < x.shape.size(); ++d) m.shape.push_back(x.shape[d] == y.shape[d] ? x.shape[d] : -1);
      }
    }
    out.components.push_back(std::move(m));
  }
  return out;
}

}  // namespace tfdata
