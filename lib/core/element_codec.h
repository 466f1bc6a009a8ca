// The binary form of an Element: what travels over the network between workers and clients.
//
// Frame layout (all integers are unsigned LEB128 varints unless noted):
//   magic      1 byte, 0xE1 (high nibble: tfdata element, low nibble: format version 1)
//   count      number of components
//   per component, in order:
//     dtype    1 byte, the tfdata::DType value
//     rank     0..32
//     dims     `rank` varints, each <= INT64_MAX
//     payload  numeric: zero bytes up to the next multiple of 8 from the frame start, then
//                       the values as raw little-endian bytes (row-major);
//              string:  for each value, its length then its bytes.
// The frame ends exactly after the last payload.
//
// Numeric payloads are 8-byte aligned relative to the frame start, so a decoder whose frame
// starts 8-byte aligned in memory (any Buffer::Allocate) can alias the values in place.
//
// Decoding handles untrusted input: every count, rank, dim and length is checked against the
// bytes that remain (overflow-safe), so a malformed frame yields a DataLoss error
// "element frame: ... at byte N", never a crash; memory use stays proportional to the frame
// size whatever the dims and counts claim.
//
// All functions are stateless and thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/core/tensor.h"

namespace tfdata {

inline constexpr uint8_t kElementFrameMagic = 0xE1;
// Numeric payloads at least this large are referenced, not copied, by FrameWriter.
inline constexpr size_t kMinSliceBytes = 4096;

// Appends the frame of `element` to `*out` (the frame starts at out->size(); alignment is
// relative to that point). InvalidArgument for a tensor of rank > 32.
absl::Status EncodeElement(const Element& element, std::string* out);

// Writes the frame of `element` to dst[0, EncodedSize(element)), which the caller provides
// (alignment is relative to dst), and returns its size. For a destination that is not a string:
// shared memory, where the frame goes without an intermediate copy. InvalidArgument for a rank > 32.
absl::StatusOr<size_t> EncodeElementTo(const Element& element, uint8_t* dst);

// The exact number of bytes EncodeElement appends.
size_t EncodedSize(const Element& element);

// Writes frames (and whatever bytes the caller puts around them, e.g. a container's headers) as a
// list of byte ranges to send in order with a vectored write. Numeric payloads of at least
// kMinSliceBytes are referenced, not copied: the caller keeps the elements (or copies of their
// tensors) alive and unchanged while it uses Ranges(). Everything else is copied into the
// writer's own storage. A FrameWriter is used from one thread at a time.
class FrameWriter {
 public:
  void AppendBytes(const void* data, size_t size);
  // Appends `v` as an unsigned LEB128 varint (as used by the frame format and protobuf).
  void AppendVarint(uint64_t v);
  // Appends one frame, byte-identical to EncodeElement's. InvalidArgument for a rank > 32.
  absl::Status AppendElement(const Element& element);
  // Bytes appended so far.
  size_t size() const { return size_; }
  // The appended bytes in order. Valid until the next append, or until the writer is moved or destroyed.
  std::vector<std::pair<const void*, size_t>> Ranges() const;

 private:
  struct Sink;
  struct Segment {
    const void* external;  // nullptr: bytes [offset, offset + size) of storage_
    size_t offset;
    size_t size;
  };
  std::string storage_;
  std::vector<Segment> segments_;
  size_t size_ = 0;
};

// Decodes a frame that fills `frame` exactly. Numeric tensors alias `frame` (sharing it, so it
// stays alive as long as they do) when their values are suitably aligned in memory; otherwise
// they are copied. String values are always copied.
absl::StatusOr<Element> DecodeElement(std::shared_ptr<Buffer> frame);

// Decodes the frame that fills bytes [offset, offset + size) of `buffer`, aliasing it like the
// overload above (numeric values alias when `offset` is 8-byte aligned). Error positions are
// relative to `offset`. InvalidArgument when the range is outside the buffer.
absl::StatusOr<Element> DecodeElement(std::shared_ptr<Buffer> buffer, size_t offset, size_t size);

// Decodes a frame that fills `bytes` exactly; the result copies everything it needs and does
// not refer to `bytes` afterwards.
absl::StatusOr<Element> DecodeElement(std::string_view bytes);

}  // namespace tfdata
