// Line-by-line reading of (optionally gzip/zlib compressed) text files, as tf.data's
// TextLineDataset: lines end at '\n', a trailing '\r' is dropped, and a last line without a
// newline is still returned.
//
// Ownership and thread safety: the reader owns its stream (and file); it is not synchronized.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/io/compression.h"
#include "lib/io/file_stream.h"

namespace tfdata {

class TextLineReader {
 public:
  static absl::StatusOr<std::unique_ptr<TextLineReader>> Open(const std::string& path, Compression compression);
  // Reads lines from `data`; `name` is used in errors.
  static absl::StatusOr<std::unique_ptr<TextLineReader>> FromString(std::string name, std::string data,
                                                                    Compression compression);

  // Reads the next line (without its line ending) into `*line`; false at end of file.
  absl::StatusOr<bool> Next(std::string* line);

  // 1-based number of the line last returned by Next (0 before the first).
  uint64_t line_number() const { return line_number_; }

 private:
  explicit TextLineReader(std::unique_ptr<InputStream> in);

  std::unique_ptr<InputStream> in_;
  std::string buf_;  // bytes read but not yet returned: buf_[pos_, end)
  size_t pos_ = 0;
  bool eof_ = false;
  uint64_t line_number_ = 0;
};

}  // namespace tfdata
