#include "lib/core/element_codec.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>

#include "fmt/format.h"
#include "lib/core/status_macros.h"

namespace tfdata {
namespace {

// Payloads are the in-memory bytes; a big-endian port would have to byte-swap here.
static_assert(std::endian::native == std::endian::little, "the element codec assumes a little-endian host");

constexpr int kMaxRank = 32;
constexpr size_t kAlign = 8;
constexpr uint8_t kZeros[kAlign] = {};

size_t PaddingAt(size_t pos) { return (kAlign - pos % kAlign) % kAlign; }

// ---- encoding -----------------------------------------------------------------------------
// One walk over the element (Encode below) feeds a sink; the sinks decide whether bytes are
// counted, copied, or referenced, so the three encoders cannot disagree about the format.

struct SizeSink {
  size_t pos = 0;
  void Bytes(const void*, size_t n) { pos += n; }
  void Payload(const void*, size_t n) { pos += n; }
};

struct StringSink {
  std::string* out;
  size_t pos = 0;  // relative to the frame start, for alignment
  void Bytes(const void* p, size_t n) {
    out->append(static_cast<const char*>(p), n);
    pos += n;
  }
  void Payload(const void* p, size_t n) { Bytes(p, n); }
};

template <typename Sink>
void PutVarint(Sink& sink, uint64_t v) {
  uint8_t buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<uint8_t>(v);
  sink.Bytes(buf, n);
}

absl::Status CheckEncodable(const Element& element) {
  for (size_t i = 0; i < element.size(); ++i) {
    if (element[i].rank() > kMaxRank) {
      return absl::InvalidArgumentError(
          fmt::format("cannot encode component {} ({}): rank exceeds {}", i, element[i].TypeString(), kMaxRank));
    }
  }
  return absl::OkStatus();
}

template <typename Sink>
void Encode(const Element& element, Sink& sink) {
  const uint8_t magic = kElementFrameMagic;
  sink.Bytes(&magic, 1);
  PutVarint(sink, element.size());
  for (const Tensor& t : element) {
    const auto dtype = static_cast<uint8_t>(t.dtype());
    sink.Bytes(&dtype, 1);
    PutVarint(sink, static_cast<uint64_t>(t.rank()));
    for (int64_t d : t.shape()) PutVarint(sink, static_cast<uint64_t>(d));
    if (t.is_string()) {
      for (const std::string& s : t.strings()) {
        PutVarint(sink, s.size());
        sink.Bytes(s.data(), s.size());
      }
    } else {
      sink.Bytes(kZeros, PaddingAt(sink.pos));
      sink.Payload(t.raw(), t.nbytes());
    }
  }
}

// ---- decoding -----------------------------------------------------------------------------

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  const uint8_t* here() const { return data_ + pos_; }
  void Skip(size_t n) { pos_ += n; }

  // Errors report `at` (the start of the offending field), defaulting to the current byte.
  absl::Status Error(std::string_view what) const { return ErrorAt(what, pos_); }
  static absl::Status ErrorAt(std::string_view what, size_t at) {
    return absl::DataLossError(fmt::format("element frame: {} at byte {}", what, at));
  }

  absl::StatusOr<uint8_t> Byte(std::string_view what) {
    if (remaining() < 1) return Error(fmt::format("truncated {}", what));
    return data_[pos_++];
  }

  absl::StatusOr<uint64_t> Varint(std::string_view what) {
    const size_t start = pos_;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (remaining() < 1) return ErrorAt(fmt::format("truncated {}", what), start);
      const uint8_t b = data_[pos_++];
      // The tenth byte may only hold the top bit of a 64-bit value.
      if (shift == 63 && b > 1) return ErrorAt(fmt::format("{} varint overflows 64 bits", what), start);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return ErrorAt(fmt::format("{} varint is too long", what), start);
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

absl::StatusOr<Tensor> DecodeTensor(Reader& r, const std::shared_ptr<Buffer>& frame, size_t base) {
  const size_t start = r.pos();
  TFD_ASSIGN_OR_RETURN(const uint8_t raw_dtype, r.Byte("dtype"));
  if (!IsValidDType(raw_dtype)) return Reader::ErrorAt(fmt::format("invalid dtype {}", raw_dtype), start);
  const auto dtype = static_cast<DType>(raw_dtype);

  const size_t rank_at = r.pos();
  TFD_ASSIGN_OR_RETURN(const uint64_t rank, r.Varint("rank"));
  if (rank > kMaxRank) return Reader::ErrorAt(fmt::format("rank {} exceeds {}", rank, kMaxRank), rank_at);

  Shape shape;
  shape.reserve(static_cast<size_t>(rank));
  // Bounding the product of the nonzero dims keeps every element count computed from this
  // shape (here and in later code) free of overflow, even when some dim is 0.
  int64_t bound = 1;
  for (uint64_t i = 0; i < rank; ++i) {
    const size_t dim_at = r.pos();
    TFD_ASSIGN_OR_RETURN(const uint64_t d, r.Varint("dimension"));
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Reader::ErrorAt(fmt::format("dimension {} is too large", d), dim_at);
    }
    const auto dim = static_cast<int64_t>(d);
    if (__builtin_mul_overflow(bound, dim == 0 ? 1 : dim, &bound)) {
      return Reader::ErrorAt("shape has too many elements", dim_at);
    }
    shape.push_back(dim);
  }
  const auto n = static_cast<uint64_t>(NumElements(shape));

  if (dtype == DType::kString) {
    // Each value takes at least its one-byte length, which bounds the vector we reserve.
    if (n > r.remaining()) {
      return r.Error(fmt::format("{} strings cannot fit in the remaining {} bytes", n, r.remaining()));
    }
    std::vector<std::string> values;
    values.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      const size_t len_at = r.pos();
      TFD_ASSIGN_OR_RETURN(const uint64_t len, r.Varint("string length"));
      if (len > r.remaining()) {
        return Reader::ErrorAt(fmt::format("string length {} exceeds the remaining {} bytes", len, r.remaining()),
                               len_at);
      }
      values.emplace_back(reinterpret_cast<const char*>(r.here()), static_cast<size_t>(len));
      r.Skip(static_cast<size_t>(len));
    }
    return Tensor::Strings(std::move(shape), std::move(values));
  }

  const size_t pad = PaddingAt(r.pos());
  if (pad > r.remaining()) return r.Error("truncated padding");
  for (size_t i = 0; i < pad; ++i) {
    if (r.here()[i] != 0) return r.Error("nonzero padding");
  }
  r.Skip(pad);
  const size_t size = DTypeSize(dtype);
  if (n > r.remaining() / size) {
    return r.Error(fmt::format("{} payload needs {} values of {} bytes, only {} bytes remain", DTypeName(dtype), n,
                               size, r.remaining()));
  }
  const size_t bytes = static_cast<size_t>(n) * size;
  if (dtype == DType::kBool) {
    // Any other byte value is undefined behavior once read as bool.
    for (size_t i = 0; i < bytes; ++i) {
      if (r.here()[i] > 1) return Reader::ErrorAt(fmt::format("invalid bool value {}", r.here()[i]), r.pos() + i);
    }
  }
  const bool aligned = reinterpret_cast<uintptr_t>(r.here()) % size == 0;
  if (frame != nullptr && aligned && bytes > 0) {
    auto t = Tensor::FromBuffer(dtype, std::move(shape), frame, base + r.pos(), bytes);
    r.Skip(bytes);
    return t;
  }
  Tensor t = Tensor::Zeros(dtype, std::move(shape));
  if (bytes > 0) std::memcpy(t.mutable_raw(), r.here(), bytes);
  r.Skip(bytes);
  return t;
}

// `frame`, when set, is the buffer that `data` points into, at `base` (for aliasing).
absl::StatusOr<Element> Decode(const uint8_t* data, size_t size, const std::shared_ptr<Buffer>& frame,
                               size_t base = 0) {
  Reader r(data, size);
  TFD_ASSIGN_OR_RETURN(const uint8_t magic, r.Byte("magic byte"));
  if (magic != kElementFrameMagic) {
    return Reader::ErrorAt(fmt::format("bad magic byte 0x{:02x} (expected 0x{:02x})", magic, kElementFrameMagic), 0);
  }
  const size_t count_at = r.pos();
  TFD_ASSIGN_OR_RETURN(const uint64_t count, r.Varint("component count"));
  // A component takes at least two bytes (dtype and rank).
  if (count > r.remaining() / 2) {
    return Reader::ErrorAt(fmt::format("{} components cannot fit in the remaining {} bytes", count, r.remaining()),
                           count_at);
  }
  Element element;
  element.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    TFD_ASSIGN_OR_RETURN(Tensor t, DecodeTensor(r, frame, base));
    element.push_back(std::move(t));
  }
  if (r.remaining() != 0) return r.Error(fmt::format("{} trailing bytes", r.remaining()));
  return element;
}

}  // namespace

absl::Status EncodeElement(const Element& element, std::string* out) {
  TFD_RETURN_IF_ERROR(CheckEncodable(element));
  out->reserve(out->size() + EncodedSize(element));
  StringSink sink{out};
  Encode(element, sink);
  return absl::OkStatus();
}

size_t EncodedSize(const Element& element) {
  SizeSink sink;
  Encode(element, sink);
  return sink.pos;
}

// Writes one frame to memory the caller sized with EncodedSize.
struct PointerSink {
  uint8_t* dst;
  size_t pos = 0;
  void Bytes(const void* p, size_t n) {
    if (n == 0) return;  // memcpy from a null pointer (an empty payload) is UB
    std::memcpy(dst + pos, p, n);
    pos += n;
  }
  void Payload(const void* p, size_t n) { Bytes(p, n); }
};

absl::StatusOr<size_t> EncodeElementTo(const Element& element, uint8_t* dst) {
  TFD_RETURN_IF_ERROR(CheckEncodable(element));
  PointerSink sink{dst};
  Encode(element, sink);
  return sink.pos;
}

// Feeds one frame into a FrameWriter; `pos` is relative to the frame start, for alignment.
struct FrameWriter::Sink {
  FrameWriter* w;
  size_t pos = 0;
  void Bytes(const void* p, size_t n) {
    w->AppendBytes(p, n);
    pos += n;
  }
  void Payload(const void* p, size_t n) {
    if (n < kMinSliceBytes) return Bytes(p, n);
    w->segments_.push_back({p, 0, n});
    w->size_ += n;
    pos += n;
  }
};

void FrameWriter::AppendBytes(const void* data, size_t size) {
  if (size == 0) return;
  if (segments_.empty() || segments_.back().external != nullptr) segments_.push_back({nullptr, storage_.size(), 0});
  storage_.append(static_cast<const char*>(data), size);
  segments_.back().size += size;
  size_ += size;
}

void FrameWriter::AppendVarint(uint64_t v) {
  struct {
    FrameWriter* w;
    void Bytes(const void* p, size_t n) { w->AppendBytes(p, n); }
  } sink{this};
  PutVarint(sink, v);
}

absl::Status FrameWriter::AppendElement(const Element& element) {
  TFD_RETURN_IF_ERROR(CheckEncodable(element));
  Sink sink{this};
  Encode(element, sink);
  return absl::OkStatus();
}

// Pointers into storage_ are taken only now, after it stopped growing (appends reallocate).
std::vector<std::pair<const void*, size_t>> FrameWriter::Ranges() const {
  std::vector<std::pair<const void*, size_t>> ranges;
  ranges.reserve(segments_.size());
  for (const Segment& s : segments_) {
    ranges.emplace_back(s.external != nullptr ? s.external : storage_.data() + s.offset, s.size);
  }
  return ranges;
}

absl::StatusOr<Element> DecodeElement(std::shared_ptr<Buffer> frame) {
  if (frame == nullptr) return absl::InvalidArgumentError("element frame: null buffer");
  return Decode(frame->data(), frame->size(), frame);
}

absl::StatusOr<Element> DecodeElement(std::shared_ptr<Buffer> buffer, size_t offset, size_t size) {
  if (buffer == nullptr) return absl::InvalidArgumentError("element frame: null buffer");
  if (offset > buffer->size() || size > buffer->size() - offset) {
    return absl::InvalidArgumentError(
        fmt::format("element frame: range [{}, +{}) is outside a buffer of {} bytes", offset, size, buffer->size()));
  }
  return Decode(buffer->data() + offset, size, buffer, offset);
}

absl::StatusOr<Element> DecodeElement(std::string_view bytes) {
  return Decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), nullptr);
}

}  // namespace tfdata
