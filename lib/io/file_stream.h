// Buffered byte streams over files (or in-memory data), optionally gzip/zlib compressed.
//
// InputStream decompresses transparently (gzip files made of several concatenated members are
// read as one stream) and tracks how many uncompressed bytes were consumed. OutputStream
// compresses with the matching header. Errors always name the file, e.g.
//   "/x/a.tfrecord: corrupt gzip data at byte 1234: invalid block type"
// where the byte is the offset in the (compressed) file.
//
// Ownership and thread safety: each stream owns its file descriptor and buffers and closes the
// file when destroyed. A stream is not synchronized: use one from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/io/compression.h"

namespace tfdata {

// "NONE", "GZIP", "ZLIB" (for messages).
const char* CompressionName(Compression compression);

class InputStream {
 public:
  static constexpr size_t kDefaultBufferSize = 256 * 1024;

  // Opens `path`. A missing file is NotFound "cannot open PATH: No such file or directory".
  static absl::StatusOr<std::unique_ptr<InputStream>> Open(const std::string& path, Compression compression,
                                                           size_t buffer_size = kDefaultBufferSize);
  // Reads from `data` instead of a file; `name` stands in for the path in errors.
  static absl::StatusOr<std::unique_ptr<InputStream>> FromString(std::string name, std::string data,
                                                                 Compression compression);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Reads up to `n` uncompressed bytes into `dst`. Returns fewer than `n` only at the end of
  // the stream (0 once at EOF). Corrupt or truncated compressed data is a DataLoss error.
  absl::StatusOr<size_t> Read(char* dst, size_t n);

  // Uncompressed bytes consumed so far (the offset of the next byte Read returns).
  uint64_t offset() const { return offset_; }
  // Uncompressed bytes left, when knowable without reading (uncompressed regular files and
  // in-memory data); used to reject absurd lengths before allocating.
  std::optional<uint64_t> remaining() const;
  const std::string& name() const { return name_; }
  Compression compression() const { return compression_; }

 private:
  InputStream(std::string name, Compression compression);
  absl::Status InitInflate();
  // Reads raw (file) bytes: from the fd, or from the in-memory data.
  absl::StatusOr<size_t> RawRead(char* dst, size_t n);
  absl::Status FillRaw();
  absl::StatusOr<size_t> ReadUncompressed(char* dst, size_t n);
  absl::StatusOr<size_t> ReadInflated(char* dst, size_t n);

  std::string name_;
  Compression compression_;
  int fd_ = -1;
  std::optional<uint64_t> raw_size_;  // file size, when it is a regular file
  bool from_memory_ = false;
  std::string memory_;
  size_t memory_pos_ = 0;

  // Raw bytes read from the source but not yet consumed: buffer_[buf_pos_, buf_end_).
  std::unique_ptr<char[]> buffer_;
  size_t buffer_size_ = 0;
  size_t buf_pos_ = 0;
  size_t buf_end_ = 0;
  uint64_t raw_offset_ = 0;  // raw bytes read from the source into the buffer (or past it)
  bool raw_eof_ = false;

  struct ZState;  // zlib's z_stream, kept out of the header
  std::unique_ptr<ZState> z_;
  bool member_started_ = false;  // inside a compressed member (EOF now would be truncation)
  bool done_ = false;
  absl::Status error_;  // sticky: set by the first failed Read

  uint64_t offset_ = 0;
};

class OutputStream {
 public:
  static constexpr size_t kDefaultBufferSize = 256 * 1024;

  // Creates (or truncates) `path`.
  static absl::StatusOr<std::unique_ptr<OutputStream>> Open(const std::string& path, Compression compression,
                                                            size_t buffer_size = kDefaultBufferSize);
  // Closes the file if Close was not called; errors are lost then, so call Close.
  ~OutputStream();
  OutputStream(const OutputStream&) = delete;
  OutputStream& operator=(const OutputStream&) = delete;

  absl::Status Write(std::string_view data);
  // Hands everything written so far to the OS (a compressed stream is sync-flushed, so a
  // reader can decode all of it).
  absl::Status Flush();
  // Finishes the compressed stream and closes the file. Later calls return OK and do nothing;
  // Write after Close is FailedPrecondition.
  absl::Status Close();

  // Uncompressed bytes written so far.
  uint64_t offset() const { return offset_; }
  const std::string& name() const { return name_; }

 private:
  OutputStream(std::string name, Compression compression);
  absl::Status WriteRaw(const char* data, size_t n);
  absl::Status FlushRawBuffer();
  absl::Status Deflate(const char* data, size_t n, int flush);

  std::string name_;
  Compression compression_;
  int fd_ = -1;
  std::unique_ptr<char[]> buffer_;  // raw bytes waiting for write(2)
  size_t buffer_size_ = 0;
  size_t buffered_ = 0;
  struct ZState;
  std::unique_ptr<ZState> z_;
  uint64_t offset_ = 0;
  bool closed_ = false;
};

}  // namespace tfdata
