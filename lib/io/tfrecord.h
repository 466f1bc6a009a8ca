// TFRecord files, byte-compatible with TensorFlow's tf.io.TFRecordWriter / TFRecordDataset.
//
// Each record is
//   uint64 length (little-endian)
//   uint32 masked CRC-32C of the 8 length bytes
//   length bytes of data
//   uint32 masked CRC-32C of the data
// and the whole file may be gzip or zlib compressed. Both checksums are verified on read.
//
// Ownership and thread safety: a reader or writer owns its stream (and file). Neither is
// synchronized; use each from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/compression.h"
#include "lib/io/file_stream.h"

namespace tfdata {

class TFRecordReader {
 public:
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> Open(const std::string& path, Compression compression);
  // Reads records from `data` (the bytes of a file); `name` is used in errors.
  static absl::StatusOr<std::unique_ptr<TFRecordReader>> FromString(std::string name, std::string data,
                                                                    Compression compression);

  // Reads the next record into `*record`. Returns false at a clean end of file. Errors
  // (DataLoss) name the file and the (uncompressed) offset of the record:
  //   "FILE: truncated record at byte N"      the file ends inside a record
  //   "FILE: corrupted record at byte N (length checksum mismatch)" or "(data checksum mismatch)"
  // After an error the reader is unusable (later calls repeat the error).
  absl::StatusOr<bool> Next(std::string* record);

  // Uncompressed offset of the next record.
  uint64_t offset() const { return offset_; }

 private:
  explicit TFRecordReader(std::unique_ptr<InputStream> in) : in_(std::move(in)) {}
  absl::StatusOr<bool> ReadRecord(std::string* record);
  absl::Status ReadData(uint64_t length, std::string* record);
  absl::Status Truncated() const;

  std::unique_ptr<InputStream> in_;
  uint64_t offset_ = 0;
  absl::Status error_;
};

class TFRecordWriter {
 public:
  // Creates (or truncates) `path`.
  static absl::StatusOr<std::unique_ptr<TFRecordWriter>> Open(const std::string& path, Compression compression);
  // Closes if Close was not called (errors are then lost).
  ~TFRecordWriter();

  absl::Status Write(std::string_view record);
  absl::Status Flush();
  // Finishes the file; required to see write errors. Idempotent.
  absl::Status Close();

 private:
  explicit TFRecordWriter(std::unique_ptr<OutputStream> out) : out_(std::move(out)) {}
  std::unique_ptr<OutputStream> out_;
};

}  // namespace tfdata
