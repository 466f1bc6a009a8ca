// Writing elements out: the --format of `tfdata run` (and later `tfdata read`).
//
//   text      one element per line: a scalar as its plain value, tensors numpy-like,
//             tuples as "(a, b)"
//   jsonl     one JSON value per line: numbers, strings (bytes that are not UTF-8 become
//             {"base64": "..."}), nested arrays for tensors, an array for a tuple
//   tfrecord  one record per element: a string scalar element is written as its bytes, any
//             other element in tfdata's element encoding (lib/core/element_codec.h)
//   null      nothing (count only)
//
// Not thread-safe: one writer per output.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/core/tensor.h"

namespace tfdata {

enum class OutputFormat { kText, kJsonl, kTFRecord, kNull };

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);

class ElementWriter {
 public:
  virtual ~ElementWriter() = default;
  virtual absl::Status Write(const Element& element) = 0;
  // Pushes what was written so far to the file (a read state saved next must not get ahead of it).
  virtual absl::Status Flush() = 0;
  // Flushes and closes; errors (e.g. disk full) are reported here at the latest.
  virtual absl::Status Close() = 0;
};

// `path` empty or "-" writes to stdout (tfrecord needs a real path).
absl::StatusOr<std::unique_ptr<ElementWriter>> MakeElementWriter(OutputFormat format, const std::string& path);

// The renderings used by the writers (exposed for tests).
std::string ElementToText(const Element& element);
std::string ElementToJson(const Element& element);

}  // namespace tfdata
