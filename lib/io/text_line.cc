#include "lib/io/text_line.h"

#include <cstring>

#include "lib/core/status_macros.h"

namespace tfdata {
namespace {
constexpr size_t kChunk = 64 * 1024;
}  // namespace

TextLineReader::TextLineReader(std::unique_ptr<InputStream> in) : in_(std::move(in)) {}

absl::StatusOr<std::unique_ptr<TextLineReader>> TextLineReader::Open(const std::string& path, Compression compression) {
  TFD_ASSIGN_OR_RETURN(auto in, InputStream::Open(path, compression));
  return std::unique_ptr<TextLineReader>(new TextLineReader(std::move(in)));
}

absl::StatusOr<std::unique_ptr<TextLineReader>> TextLineReader::FromString(std::string name, std::string data,
                                                                           Compression compression) {
  TFD_ASSIGN_OR_RETURN(auto in, InputStream::FromString(std::move(name), std::move(data), compression));
  return std::unique_ptr<TextLineReader>(new TextLineReader(std::move(in)));
}

absl::StatusOr<bool> TextLineReader::Next(std::string* line) {
  size_t scanned = pos_;  // no '\n' in buf_[pos_, scanned): don't rescan it after refilling
  for (;;) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.data() + scanned, '\n', buf_.size() - scanned));
    if (nl != nullptr || (eof_ && pos_ < buf_.size())) {
      const size_t end = nl != nullptr ? static_cast<size_t>(nl - buf_.data()) : buf_.size();
      size_t len = end - pos_;
      if (len > 0 && buf_[pos_ + len - 1] == '\r') --len;
      line->assign(buf_, pos_, len);
      pos_ = nl != nullptr ? end + 1 : end;
      ++line_number_;
      return true;
    }
    if (eof_) return false;
    // Drop consumed bytes before growing, so the buffer holds about one line plus a chunk.
    buf_.erase(0, pos_);
    pos_ = 0;
    scanned = buf_.size();
    buf_.resize(scanned + kChunk);
    auto got = in_->Read(buf_.data() + scanned, kChunk);
    if (!got.ok()) {
      buf_.resize(scanned);
      return got.status();
    }
    buf_.resize(scanned + *got);
    if (*got < kChunk) eof_ = true;
  }
}

}  // namespace tfdata
