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
// Numeric payloads at least this large are referenced, not copied, by EncodeElementSlices.
inline constexpr size_t kMinSliceBytes = 4096;

// Appends the frame of `element` to `*out` (the frame starts at out->size(); alignment is
// relative to that point). InvalidArgument for a tensor of rank > 32.
absl::Status EncodeElement(const Element& element, std::string* out);

// The exact number of bytes EncodeElement appends.
size_t EncodedSize(const Element& element);

// The same frame as EncodeElement, as a list of byte ranges to write in order (e.g. with
// writev). Numeric payloads of at least kMinSliceBytes are not copied: their slices point into
// the tensors' own buffers, so the caller must keep `element` (or copies of its tensors) alive
// and unchanged while it uses `slices`. Everything else is written into `*header_storage`
// (cleared first), which must also outlive the use of `slices` and must not be modified.
// `*slices` is cleared first.
absl::Status EncodeElementSlices(const Element& element, std::string* header_storage,
                                 std::vector<std::pair<const void*, size_t>>* slices);

// Decodes a frame that fills `frame` exactly. Numeric tensors alias `frame` (sharing it, so it
// stays alive as long as they do) when their values are suitably aligned in memory; otherwise
// they are copied. String values are always copied.
absl::StatusOr<Element> DecodeElement(std::shared_ptr<Buffer> frame);

// Decodes a frame that fills `bytes` exactly; the result copies everything it needs and does
// not refer to `bytes` afterwards.
absl::StatusOr<Element> DecodeElement(std::string_view bytes);

}  // namespace tfdata
