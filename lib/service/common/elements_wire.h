// The bytes of a GetElements response, written and read without protobuf's copies.
//
// The bytes are exactly the protobuf encoding of GetElementsResponse (proto/service.proto), so any
// protobuf client can read them: for each element, field 1 (tag 0x0A), its length, and its
// element frame (lib/core/element_codec.h) -- or, when the result asks for compression, field 4
// (tag 0x22) and the snappy-compressed frame (unless snappy saves less than an eighth of the
// response's frames: then all go as field 1); then field 2 (end_of_sequence), field 3
// (first_index) and field 5 (elements_skipped) when not zero, and field 6 (split_runs, exactly-once
// tasks), each an encoded SplitRun; the decoder checks that the runs cover exactly the elements. The decoder accepts
// both element fields in any mix, so readers never need to be told whether a dataset is compressed.
//
// What makes it fast: the encoder references large tensor payloads instead of copying them (the
// transport writes them straight from the tensors), and the decoder copies each frame once, from
// the received pieces into one 8-byte aligned buffer per response that the decoded tensors alias.
//
// The decoder takes untrusted input: any malformed response is a DataLoss error naming the byte,
// never a crash, and memory stays proportional to the response size. Stateless and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/service/common/data_transfer.h"

namespace tfdata::service {

struct EncodedElements {
  // The response bytes, in order; they stay valid (and unchanged) while `keep_alive` lives.
  std::vector<std::pair<const void*, size_t>> ranges;
  size_t size = 0;
  std::shared_ptr<const void> keep_alive;
  // When the result asked for compression: the frames' plain bytes, what snappy made of them, and
  // whether the response went compressed (it did not when snappy saved less than an eighth).
  struct Compression {
    bool tried = false, sent_compressed = false;
    size_t plain_bytes = 0, compressed_bytes = 0;
  } compression;
};

// Takes ownership of the elements (the ranges point into them). InvalidArgument for an element
// that has no frame encoding (a rank above 32).
absl::StatusOr<EncodedElements> EncodeElements(GetElementsResult result);

// Decodes the response held by `pieces` concatenated (e.g. a received message's slices); the
// result does not refer to the pieces afterwards.
absl::StatusOr<GetElementsResult> DecodeElements(std::span<const std::span<const uint8_t>> pieces);

}  // namespace tfdata::service
