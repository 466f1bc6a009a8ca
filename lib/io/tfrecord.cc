#include "lib/io/tfrecord.h"

#include <algorithm>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/io/crc32c.h"

namespace tfdata {
namespace {

constexpr size_t kHeaderSize = 12;  // length + its CRC
constexpr size_t kFooterSize = 4;   // data CRC
// When the remaining size is unknown (compressed input), data is read in pieces that grow with
// what actually arrived, so a corrupt huge length hits EOF instead of allocating it up front.
constexpr uint64_t kMinChunk = 1 << 20;

uint64_t LoadLE64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
uint32_t LoadLE32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}
void StoreLE(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace

// ---- reader -------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::Open(const std::string& path, Compression compression) {
  TFD_ASSIGN_OR_RETURN(auto in, InputStream::Open(path, compression));
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(std::move(in)));
}

absl::StatusOr<std::unique_ptr<TFRecordReader>> TFRecordReader::FromString(std::string name, std::string data,
                                                                           Compression compression) {
  TFD_ASSIGN_OR_RETURN(auto in, InputStream::FromString(std::move(name), std::move(data), compression));
  return std::unique_ptr<TFRecordReader>(new TFRecordReader(std::move(in)));
}

absl::StatusOr<bool> TFRecordReader::Next(std::string* record) {
  TFD_RETURN_IF_ERROR(error_);
  auto more = ReadRecord(record);
  if (!more.ok()) error_ = more.status();
  return more;
}

absl::Status TFRecordReader::Truncated() const {
  return absl::DataLossError(fmt::format("{}: truncated record at byte {}", in_->name(), offset_));
}

absl::StatusOr<bool> TFRecordReader::ReadRecord(std::string* record) {
  char header[kHeaderSize];
  TFD_ASSIGN_OR_RETURN(size_t got, in_->Read(header, kHeaderSize));
  if (got == 0) return false;
  if (got < kHeaderSize) return Truncated();
  const uint64_t length = LoadLE64(header);
  if (UnmaskCrc(LoadLE32(header + 8)) != Crc32cExtend(0, header, 8)) {
    return absl::DataLossError(
        fmt::format("{}: corrupted record at byte {} (length checksum mismatch)", in_->name(), offset_));
  }
  TFD_RETURN_IF_ERROR(ReadData(length, record));
  char footer[kFooterSize];
  TFD_ASSIGN_OR_RETURN(got, in_->Read(footer, kFooterSize));
  if (got < kFooterSize) return Truncated();
  if (UnmaskCrc(LoadLE32(footer)) != Crc32c(*record)) {
    return absl::DataLossError(
        fmt::format("{}: corrupted record at byte {} (data checksum mismatch)", in_->name(), offset_));
  }
  offset_ = in_->offset();
  return true;
}

absl::Status TFRecordReader::ReadData(uint64_t length, std::string* record) {
  record->clear();
  if (const auto remaining = in_->remaining()) {
    // Known size: a length beyond it can only be a torn (or corrupt) file; never allocate it.
    if (length > *remaining || *remaining - length < kFooterSize) return Truncated();
    record->resize(static_cast<size_t>(length));
    TFD_ASSIGN_OR_RETURN(size_t got, in_->Read(record->data(), record->size()));
    if (got < length) return Truncated();
    return absl::OkStatus();
  }
  uint64_t have = 0;
  while (have < length) {
    const uint64_t chunk = std::min(length - have, std::max(kMinChunk, have));
    record->resize(static_cast<size_t>(have + chunk));
    TFD_ASSIGN_OR_RETURN(size_t got, in_->Read(record->data() + have, static_cast<size_t>(chunk)));
    have += got;
    if (got < chunk) return Truncated();
  }
  return absl::OkStatus();
}

// ---- writer -------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TFRecordWriter>> TFRecordWriter::Open(const std::string& path, Compression compression) {
  TFD_ASSIGN_OR_RETURN(auto out, OutputStream::Open(path, compression));
  return std::unique_ptr<TFRecordWriter>(new TFRecordWriter(std::move(out)));
}

TFRecordWriter::~TFRecordWriter() { Close().IgnoreError(); }

absl::Status TFRecordWriter::Write(std::string_view record) {
  char header[kHeaderSize];
  StoreLE(header, record.size(), 8);
  StoreLE(header + 8, MaskCrc(Crc32cExtend(0, header, 8)), 4);
  char footer[kFooterSize];
  StoreLE(footer, MaskCrc(Crc32c(record)), 4);
  TFD_RETURN_IF_ERROR(out_->Write(std::string_view(header, kHeaderSize)));
  TFD_RETURN_IF_ERROR(out_->Write(record));
  return out_->Write(std::string_view(footer, kFooterSize));
}

absl::Status TFRecordWriter::Flush() { return out_->Flush(); }

absl::Status TFRecordWriter::Close() { return out_->Close(); }

}  // namespace tfdata
