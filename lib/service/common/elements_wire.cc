#include "lib/service/common/elements_wire.h"

#include <cstring>
#include <limits>
#include <string>

#include "fmt/format.h"
#include "lib/core/element_codec.h"
#include "lib/core/status_macros.h"
#include "lib/service/common/wire_compression.h"
#include "snappy.h"

namespace tfdata::service {
namespace {

// Protobuf wire format of GetElementsResponse.
constexpr uint8_t kElementsTag = (1 << 3) | 2;       // field 1, length-delimited
constexpr uint8_t kEndOfSequenceTag = (2 << 3) | 0;  // field 2, varint
constexpr uint8_t kFirstIndexTag = (3 << 3) | 0;     // field 3, varint
constexpr uint8_t kCompressedTag = (4 << 3) | 2;     // field 4, length-delimited
constexpr uint8_t kSkippedTag = (5 << 3) | 0;        // field 5, varint
constexpr uint8_t kSplitRunTag = (6 << 3) | 2;       // field 6, length-delimited
// A SplitRun is five small fields; anything longer is not one.
constexpr uint64_t kMaxSplitRunBytes = 64;
// A snappy frame may claim at most this many times its size once decompressed (snappy's own
// format cannot exceed about 21x; anything above is corrupt and must not size an allocation).
constexpr uint64_t kMaxExpansion = 32;
constexpr size_t kAlign = 8;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Held {
  GetElementsResult result;
  FrameWriter writer;
};

void AppendTaggedVarint(FrameWriter& w, uint8_t tag, uint64_t v) {
  w.AppendBytes(&tag, 1);
  w.AppendVarint(v);
}

// Reads the concatenation of the pieces in order. A copy of the reader is a saved position.
class PieceReader {
 public:
  explicit PieceReader(std::span<const std::span<const uint8_t>> pieces) : pieces_(pieces) {
    for (const auto& p : pieces) remaining_ += p.size();
    Normalize();
  }

  size_t pos() const { return pos_; }
  size_t remaining() const { return remaining_; }

  absl::Status Error(std::string_view what, size_t at) const {
    return absl::DataLossError(fmt::format("GetElements response: {} at byte {}", what, at));
  }

  absl::StatusOr<uint64_t> Varint(std::string_view what) {
    const size_t start = pos_;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (remaining_ == 0) return Error(fmt::format("truncated {}", what), start);
      const uint8_t b = pieces_[piece_][offset_];
      Advance(1);
      if (shift == 63 && b > 1) return Error(fmt::format("{} overflows 64 bits", what), start);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return Error(fmt::format("{} is longer than 10 bytes", what), start);
  }

  // Skips n <= remaining() bytes.
  void Skip(size_t n) {
    while (n > 0) {
      const size_t k = std::min(n, pieces_[piece_].size() - offset_);
      Advance(k);
      n -= k;
    }
  }

  // Copies the next n <= remaining() bytes to dst.
  void Copy(uint8_t* dst, size_t n) {
    while (n > 0) {
      const size_t k = std::min(n, pieces_[piece_].size() - offset_);
      std::memcpy(dst, pieces_[piece_].data() + offset_, k);
      dst += k;
      Advance(k);
      n -= k;
    }
  }

 private:
  void Advance(size_t k) {
    offset_ += k;
    pos_ += k;
    remaining_ -= k;
    Normalize();
  }
  // Keeps (piece_, offset_) on a readable byte unless at the end.
  void Normalize() {
    while (piece_ < pieces_.size() && offset_ == pieces_[piece_].size()) {
      ++piece_;
      offset_ = 0;
    }
  }

  std::span<const std::span<const uint8_t>> pieces_;
  size_t piece_ = 0, offset_ = 0, pos_ = 0, remaining_ = 0;
};

}  // namespace

absl::StatusOr<EncodedElements> EncodeElements(GetElementsResult result) {
  auto held = std::make_shared<Held>();
  held->result = std::move(result);
  EncodedElements::Compression compression;
  if (held->result.compress) {
    // A response whose frames snappy cannot shrink by an eighth travels plain: decompressing would
    // cost the reader more than the bytes saved (forced snappy on random data halved throughput).
    // The choice is per response, so a response holds one element field only and a generic
    // protobuf reader keeps the order.
    std::vector<std::string> compressed;
    size_t plain_bytes = 0, compressed_bytes = 0;
    for (const Element& e : held->result.elements) {
      TFD_ASSIGN_OR_RETURN(std::string c, CompressElement(e));
      plain_bytes += EncodedSize(e);
      compressed_bytes += c.size();
      compressed.push_back(std::move(c));
    }
    compression = {.tried = true, .plain_bytes = plain_bytes, .compressed_bytes = compressed_bytes};
    if (compressed_bytes <= plain_bytes - plain_bytes / 8) {
      compression.sent_compressed = true;
      for (const std::string& c : compressed) {
        AppendTaggedVarint(held->writer, kCompressedTag, c.size());
        held->writer.AppendBytes(c.data(), c.size());
      }
    } else {
      held->result.compress = false;
    }
  }
  if (!held->result.compress) {
    for (const Element& e : held->result.elements) {
      AppendTaggedVarint(held->writer, kElementsTag, EncodedSize(e));
      TFD_RETURN_IF_ERROR(held->writer.AppendElement(e));
    }
  }
  if (held->result.end_of_sequence) {
    const uint8_t eos[] = {kEndOfSequenceTag, 1};
    held->writer.AppendBytes(eos, sizeof(eos));
  }
  if (held->result.first_index != 0) {
    AppendTaggedVarint(held->writer, kFirstIndexTag, static_cast<uint64_t>(held->result.first_index));
  }
  if (held->result.elements_skipped != 0) {
    AppendTaggedVarint(held->writer, kSkippedTag, static_cast<uint64_t>(held->result.elements_skipped));
  }
  for (const SplitRun& run : held->result.split_runs) {
    const std::string bytes = run.SerializeAsString();
    AppendTaggedVarint(held->writer, kSplitRunTag, bytes.size());
    held->writer.AppendBytes(bytes.data(), bytes.size());
  }
  EncodedElements out;
  out.ranges = held->writer.Ranges();
  out.size = held->writer.size();
  out.keep_alive = std::move(held);
  out.compression = compression;
  return out;
}

absl::StatusOr<GetElementsResult> DecodeElements(std::span<const std::span<const uint8_t>> pieces) {
  struct Frame {
    PieceReader at;
    size_t size;
    std::string compressed;  // field 4: the snappy bytes (size is then the uncompressed size)
  };
  std::vector<Frame> frames;
  GetElementsResult result;
  PieceReader r(pieces);
  size_t arena_size = 0;
  uint64_t run_elements = 0;  // elements the split runs cover
  while (r.remaining() > 0) {
    const size_t tag_at = r.pos();
    TFD_ASSIGN_OR_RETURN(const uint64_t tag, r.Varint("field tag"));
    const uint64_t field = tag >> 3, wire_type = tag & 7;
    if (field == 1 && wire_type != 2) return r.Error("field 1 (elements) is not length-delimited", tag_at);
    if (field == 2 && wire_type != 0) return r.Error("field 2 (end_of_sequence) is not a varint", tag_at);
    if (field == 3 && wire_type != 0) return r.Error("field 3 (first_index) is not a varint", tag_at);
    if (field == 4 && wire_type != 2) {
      return r.Error("field 4 (compressed_elements) is not length-delimited", tag_at);
    }
    if (field == 5 && wire_type != 0) return r.Error("field 5 (elements_skipped) is not a varint", tag_at);
    if (field == 6 && wire_type != 2) return r.Error("field 6 (split_runs) is not length-delimited", tag_at);
    switch (wire_type) {
      case 0: {
        TFD_ASSIGN_OR_RETURN(const uint64_t v, r.Varint(field == 2   ? "end_of_sequence"
                                                        : field == 3 ? "first_index"
                                                        : field == 5 ? "elements_skipped"
                                                                     : "varint field"));
        if (field == 2) result.end_of_sequence = v != 0;
        if (field == 3) result.first_index = static_cast<int64_t>(v);
        if (field == 5) result.elements_skipped = static_cast<int64_t>(v);
        break;
      }
      case 1:
      case 5: {
        const size_t n = wire_type == 1 ? 8 : 4;
        if (r.remaining() < n) return r.Error("truncated fixed-width field", tag_at);
        r.Skip(n);
        break;
      }
      case 2: {
        const size_t len_at = r.pos();
        TFD_ASSIGN_OR_RETURN(const uint64_t len, r.Varint("length"));
        if (len > r.remaining()) {
          return r.Error(fmt::format("length {} exceeds the remaining {} bytes", len, r.remaining()), len_at);
        }
        const auto n = static_cast<size_t>(len);
        if (field == 1) {
          frames.push_back({r, n, {}});
          arena_size += AlignUp(n);
        } else if (field == 4) {
          std::string compressed(n, '\0');
          PieceReader copy = r;
          copy.Copy(reinterpret_cast<uint8_t*>(compressed.data()), n);
          size_t uncompressed = 0;
          if (!snappy::GetUncompressedLength(compressed.data(), n, &uncompressed) ||
              uncompressed > kMaxExpansion * n + 64) {
            return r.Error("compressed element with an invalid snappy header", len_at);
          }
          frames.push_back({r, uncompressed, std::move(compressed)});
          arena_size += AlignUp(uncompressed);
        } else if (field == 6) {
          if (n > kMaxSplitRunBytes) return r.Error(fmt::format("split run of {} bytes", n), len_at);
          uint8_t bytes[kMaxSplitRunBytes];
          PieceReader copy = r;
          copy.Copy(bytes, n);
          SplitRun& run = result.split_runs.emplace_back();
          if (!run.ParseFromArray(bytes, static_cast<int>(n))) return r.Error("malformed split run", len_at);
          // Every element takes a few bytes, so a count above the response's size is a lie (and
          // bounding it keeps run_elements from wrapping).
          if (run.epoch() < 0 || run.split() < 0 || run.first_seq() < 0 || run.count() < 0 ||
              static_cast<uint64_t>(run.count()) > r.pos() + r.remaining() ||
              run.count() > std::numeric_limits<int64_t>::max() - run.first_seq()) {
            return r.Error(
                fmt::format("split run with a negative or overflowing position ({})", run.ShortDebugString()), len_at);
          }
          run_elements += static_cast<uint64_t>(run.count());
        }
        r.Skip(n);
        break;
      }
      default: return r.Error(fmt::format("unsupported wire type {}", wire_type), tag_at);
    }
  }
  if (!result.split_runs.empty() && run_elements != frames.size()) {
    return absl::DataLossError(fmt::format("GetElements response: split runs cover {} elements, the response has {}",
                                           run_elements, frames.size()));
  }
  if (frames.empty()) return result;
  // One copy into an aligned buffer, which the decoded numeric tensors then alias.
  std::shared_ptr<Buffer> arena = Buffer::Allocate(arena_size);
  result.elements.reserve(frames.size());
  size_t offset = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    Frame& f = frames[i];
    const size_t frame_at = f.at.pos();
    if (f.compressed.empty()) {
      f.at.Copy(arena->mutable_data() + offset, f.size);
    } else if (!snappy::RawUncompress(f.compressed.data(), f.compressed.size(),
                                      reinterpret_cast<char*>(arena->mutable_data() + offset))) {
      return absl::DataLossError(fmt::format(
          "GetElements response: element {} (compressed frame at byte {}): corrupt snappy data", i, frame_at));
    }
    const size_t padded = AlignUp(f.size);
    if (padded > f.size) std::memset(arena->mutable_data() + offset + f.size, 0, padded - f.size);
    auto e = DecodeElement(arena, offset, f.size);
    if (!e.ok()) {
      return absl::DataLossError(fmt::format("GetElements response: element {} (frame at byte {}): {}", i, frame_at,
                                             std::string(e.status().message())));
    }
    result.elements.push_back(*std::move(e));
    offset += padded;
  }
  return result;
}

}  // namespace tfdata::service
