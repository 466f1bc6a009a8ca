#include "lib/io/file_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "fmt/format.h"
#include "lib/core/status_macros.h"

namespace tfdata {
namespace {

// zlib counts in uInt (32 bits); larger requests are processed in pieces of this size.
constexpr size_t kMaxZChunk = size_t{1} << 30;

std::string ErrnoMessage(int err) { return std::error_code(err, std::generic_category()).message(); }

absl::Status ErrnoStatus(int err, const std::string& message) {
  const std::string full = fmt::format("{}: {}", message, ErrnoMessage(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(full);
    case EACCES:
    case EPERM: return absl::PermissionDeniedError(full);
    case EISDIR:
    case ENOTDIR: return absl::FailedPreconditionError(full);
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE: return absl::ResourceExhaustedError(full);
    case EIO: return absl::DataLossError(full);
    default: return absl::UnknownError(full);
  }
}

int WindowBits(Compression c) { return c == Compression::kGzip ? 16 + MAX_WBITS : MAX_WBITS; }

const char* KindName(Compression c) { return c == Compression::kGzip ? "gzip" : "zlib"; }

}  // namespace

const char* CompressionName(Compression compression) {
  switch (compression) {
    case Compression::kNone: return "NONE";
    case Compression::kGzip: return "GZIP";
    case Compression::kZlib: return "ZLIB";
  }
  return "?";
}

// ---- InputStream --------------------------------------------------------------------------

struct InputStream::ZState {
  z_stream s{};
  bool initialized = false;
  ~ZState() {
    if (initialized) inflateEnd(&s);
  }
};

InputStream::InputStream(std::string name, Compression compression)
    : name_(std::move(name)), compression_(compression) {}

InputStream::~InputStream() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::Open(const std::string& path, Compression compression,
                                                               size_t buffer_size) {
  std::unique_ptr<InputStream> s(new InputStream(path, compression));
  s->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (s->fd_ < 0) return ErrnoStatus(errno, fmt::format("cannot open {}", path));
  struct stat st;
  if (fstat(s->fd_, &st) != 0) return ErrnoStatus(errno, fmt::format("cannot stat {}", path));
  if (S_ISDIR(st.st_mode)) return ErrnoStatus(EISDIR, fmt::format("cannot open {}", path));
  if (S_ISREG(st.st_mode)) s->raw_size_ = static_cast<uint64_t>(st.st_size);
  s->buffer_size_ = std::max<size_t>(buffer_size, 4096);
  s->buffer_ = std::make_unique<char[]>(s->buffer_size_);
  TFD_RETURN_IF_ERROR(s->InitInflate());
  return s;
}

absl::StatusOr<std::unique_ptr<InputStream>> InputStream::FromString(std::string name, std::string data,
                                                                     Compression compression) {
  std::unique_ptr<InputStream> s(new InputStream(std::move(name), compression));
  s->from_memory_ = true;
  s->raw_size_ = data.size();
  s->memory_ = std::move(data);
  s->buffer_size_ = 64 * 1024;
  s->buffer_ = std::make_unique<char[]>(s->buffer_size_);
  TFD_RETURN_IF_ERROR(s->InitInflate());
  return s;
}

absl::Status InputStream::InitInflate() {
  if (compression_ == Compression::kNone) return absl::OkStatus();
  z_ = std::make_unique<ZState>();
  const int rc = inflateInit2(&z_->s, WindowBits(compression_));
  if (rc != Z_OK) {
    return absl::ResourceExhaustedError(
        fmt::format("{}: cannot start {} decompression (zlib error {})", name_, KindName(compression_), rc));
  }
  z_->initialized = true;
  return absl::OkStatus();
}

std::optional<uint64_t> InputStream::remaining() const {
  if (compression_ != Compression::kNone || !raw_size_) return std::nullopt;
  // Clamped: a file that grew after Open may already be read past its original size.
  return *raw_size_ > offset_ ? *raw_size_ - offset_ : 0;
}

absl::StatusOr<size_t> InputStream::RawRead(char* dst, size_t n) {
  if (from_memory_) {
    const size_t k = std::min(n, memory_.size() - memory_pos_);
    std::memcpy(dst, memory_.data() + memory_pos_, k);
    memory_pos_ += k;
    return k;
  }
  for (;;) {
    const ssize_t r = read(fd_, dst, n);
    if (r >= 0) return static_cast<size_t>(r);
    if (errno == EINTR) continue;
    return ErrnoStatus(errno, fmt::format("{}: read failed at byte {}", name_, raw_offset_));
  }
}

absl::Status InputStream::FillRaw() {
  if (buf_pos_ < buf_end_ || raw_eof_) return absl::OkStatus();
  TFD_ASSIGN_OR_RETURN(size_t got, RawRead(buffer_.get(), buffer_size_));
  buf_pos_ = 0;
  buf_end_ = got;
  raw_offset_ += got;
  if (got == 0) raw_eof_ = true;
  return absl::OkStatus();
}

absl::StatusOr<size_t> InputStream::Read(char* dst, size_t n) {
  TFD_RETURN_IF_ERROR(error_);
  auto got = compression_ == Compression::kNone ? ReadUncompressed(dst, n) : ReadInflated(dst, n);
  // Errors are sticky: after corrupt data the stream position is meaningless.
  if (!got.ok()) error_ = got.status();
  return got;
}

absl::StatusOr<size_t> InputStream::ReadUncompressed(char* dst, size_t n) {
  size_t total = 0;
  while (total < n) {
    if (buf_pos_ < buf_end_) {
      const size_t k = std::min(n - total, buf_end_ - buf_pos_);
      std::memcpy(dst + total, buffer_.get() + buf_pos_, k);
      buf_pos_ += k;
      total += k;
      offset_ += k;
      continue;
    }
    if (raw_eof_) break;
    if (n - total >= buffer_size_) {
      // Large reads bypass the buffer to save a copy.
      TFD_ASSIGN_OR_RETURN(size_t got, RawRead(dst + total, n - total));
      raw_offset_ += got;
      total += got;
      offset_ += got;
      if (got == 0) raw_eof_ = true;
      continue;
    }
    TFD_RETURN_IF_ERROR(FillRaw());
  }
  return total;
}

absl::StatusOr<size_t> InputStream::ReadInflated(char* dst, size_t n) {
  z_stream& z = z_->s;
  size_t total = 0;
  while (total < n && !done_) {
    if (buf_pos_ == buf_end_) {
      TFD_RETURN_IF_ERROR(FillRaw());
      if (buf_pos_ == buf_end_) {
        if (member_started_) {
          return absl::DataLossError(fmt::format("{}: truncated {} data at byte {} (the compressed stream ends early)",
                                                 name_, KindName(compression_), raw_offset_));
        }
        done_ = true;  // EOF between members (or an empty file): a clean end
        break;
      }
    }
    z.next_in = reinterpret_cast<Bytef*>(buffer_.get() + buf_pos_);
    z.avail_in = static_cast<uInt>(buf_end_ - buf_pos_);  // <= buffer_size_, which fits
    const size_t want = std::min(n - total, kMaxZChunk);
    z.next_out = reinterpret_cast<Bytef*>(dst + total);
    z.avail_out = static_cast<uInt>(want);
    member_started_ = true;
    const int rc = inflate(&z, Z_NO_FLUSH);
    buf_pos_ = buf_end_ - z.avail_in;
    const size_t produced = want - z.avail_out;
    total += produced;
    offset_ += produced;
    if (rc == Z_STREAM_END) {
      // Another member may follow (concatenated gzip files are one stream).
      member_started_ = false;
      inflateReset(&z);
      continue;
    }
    if (rc == Z_OK || (rc == Z_BUF_ERROR && z.avail_in == 0)) continue;
    const uint64_t at = raw_offset_ - (buf_end_ - buf_pos_);
    return absl::DataLossError(fmt::format("{}: corrupt {} data at byte {}: {}", name_, KindName(compression_), at,
                                           z.msg != nullptr ? z.msg : fmt::format("zlib error {}", rc)));
  }
  return total;
}

// ---- OutputStream -------------------------------------------------------------------------

struct OutputStream::ZState {
  z_stream s{};
  bool initialized = false;
  ~ZState() {
    if (initialized) deflateEnd(&s);
  }
};

OutputStream::OutputStream(std::string name, Compression compression)
    : name_(std::move(name)), compression_(compression) {}

OutputStream::~OutputStream() {
  if (!closed_) Close().IgnoreError();
}

absl::StatusOr<std::unique_ptr<OutputStream>> OutputStream::Open(const std::string& path, Compression compression,
                                                                 size_t buffer_size) {
  std::unique_ptr<OutputStream> s(new OutputStream(path, compression));
  s->fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (s->fd_ < 0) {
    s->closed_ = true;
    return ErrnoStatus(errno, fmt::format("cannot create {}", path));
  }
  s->buffer_size_ = std::max<size_t>(buffer_size, 4096);
  s->buffer_ = std::make_unique<char[]>(s->buffer_size_);
  if (compression != Compression::kNone) {
    s->z_ = std::make_unique<ZState>();
    const int rc =
        deflateInit2(&s->z_->s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WindowBits(compression), 8, Z_DEFAULT_STRATEGY);
    if (rc != Z_OK) {
      close(s->fd_);
      s->closed_ = true;  // nothing to finish
      return absl::ResourceExhaustedError(
          fmt::format("{}: cannot start {} compression (zlib error {})", path, KindName(compression), rc));
    }
    s->z_->initialized = true;
  }
  return s;
}

absl::Status OutputStream::FlushRawBuffer() {
  size_t done = 0;
  while (done < buffered_) {
    const ssize_t w = write(fd_, buffer_.get() + done, buffered_ - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, fmt::format("{}: write failed", name_));
    }
    done += static_cast<size_t>(w);
  }
  buffered_ = 0;
  return absl::OkStatus();
}

absl::Status OutputStream::WriteRaw(const char* data, size_t n) {
  if (buffered_ + n > buffer_size_) TFD_RETURN_IF_ERROR(FlushRawBuffer());
  if (n >= buffer_size_) {
    // Large writes go straight to the file.
    while (n > 0) {
      const ssize_t w = write(fd_, data, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, fmt::format("{}: write failed", name_));
      }
      data += w;
      n -= static_cast<size_t>(w);
    }
    return absl::OkStatus();
  }
  std::memcpy(buffer_.get() + buffered_, data, n);
  buffered_ += n;
  return absl::OkStatus();
}

absl::Status OutputStream::Deflate(const char* data, size_t n, int flush) {
  z_stream& z = z_->s;
  do {
    const size_t piece = std::min(n, kMaxZChunk);
    // zlib does not modify the input; its API is just not const-correct.
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data));
    z.avail_in = static_cast<uInt>(piece);
    data += piece;
    n -= piece;
    const int piece_flush = n == 0 ? flush : Z_NO_FLUSH;
    for (;;) {
      if (buffered_ == buffer_size_) TFD_RETURN_IF_ERROR(FlushRawBuffer());
      z.next_out = reinterpret_cast<Bytef*>(buffer_.get() + buffered_);
      z.avail_out = static_cast<uInt>(buffer_size_ - buffered_);
      const int rc = deflate(&z, piece_flush);
      buffered_ = buffer_size_ - z.avail_out;
      if (rc == Z_STREAM_ERROR) {
        return absl::InternalError(fmt::format("{}: {} compression failed", name_, KindName(compression_)));
      }
      if (piece_flush == Z_FINISH) {
        if (rc == Z_STREAM_END) break;
        continue;
      }
      // Output space left over means zlib has nothing more to emit for this input.
      if (z.avail_in == 0 && z.avail_out != 0) break;
    }
  } while (n > 0);
  return absl::OkStatus();
}

absl::Status OutputStream::Write(std::string_view data) {
  if (closed_) return absl::FailedPreconditionError(fmt::format("{}: write after close", name_));
  if (data.empty()) return absl::OkStatus();
  if (compression_ == Compression::kNone) {
    TFD_RETURN_IF_ERROR(WriteRaw(data.data(), data.size()));
  } else {
    TFD_RETURN_IF_ERROR(Deflate(data.data(), data.size(), Z_NO_FLUSH));
  }
  offset_ += data.size();
  return absl::OkStatus();
}

absl::Status OutputStream::Flush() {
  if (closed_) return absl::FailedPreconditionError(fmt::format("{}: flush after close", name_));
  if (compression_ != Compression::kNone) TFD_RETURN_IF_ERROR(Deflate(nullptr, 0, Z_SYNC_FLUSH));
  return FlushRawBuffer();
}

absl::Status OutputStream::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status status;
  if (compression_ != Compression::kNone) status.Update(Deflate(nullptr, 0, Z_FINISH));
  if (status.ok()) status.Update(FlushRawBuffer());
  if (close(fd_) != 0 && status.ok()) status = ErrnoStatus(errno, fmt::format("{}: close failed", name_));
  fd_ = -1;
  return status;
}

}  // namespace tfdata
