// Static types of elements, inferred before a pipeline runs so that dtype mistakes are reported
// at validation time with the op that causes them.
#pragma once

#include <string>
#include <vector>

#include "lib/core/tensor.h"

namespace tfdata {

// dtype plus shape; a dimension of -1 is unknown (varies between elements).
struct TensorSpec {
  DType dtype = DType::kInt64;
  Shape shape;
  bool unknown_rank = false;  // the number of dimensions is not known either

  std::string DebugString() const;  // "int64[?, 3]", "string[...]" for unknown rank
  bool operator==(const TensorSpec&) const = default;
};

struct ElementSpec {
  std::vector<TensorSpec> components;
  // True when nothing is known (e.g. after a plugin function): checks downstream are skipped.
  bool unknown = false;

  static ElementSpec Unknown() { return ElementSpec{{}, true}; }
  std::string DebugString() const;  // "(int64[], string[])"
  bool operator==(const ElementSpec&) const = default;
};

// The spec of a concrete element.
ElementSpec SpecOf(const Element& element);
// Spec that covers both (dims that differ become -1). Error if dtypes or ranks differ.
absl::StatusOr<ElementSpec> MergeSpecs(const ElementSpec& a, const ElementSpec& b);

}  // namespace tfdata
