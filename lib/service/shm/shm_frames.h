// Elements in shared memory: the worker writes a response's element frames
// (lib/core/element_codec.h) one after another, each starting 8-byte aligned, and lists their
// sizes in the ShmResponse; the reader decodes them in place, so that numeric tensors alias the
// shared memory (no copy on the reader's side).
//
// DecodeShmResponse takes untrusted input (a worker's response and the bytes it wrote): a
// malformed one is a DataLoss error naming the element, never a crash or a read outside the
// buffer. Stateless and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/tensor.h"
#include "lib/service/common/data_transfer.h"
#include "proto/shm.pb.h"

namespace tfdata::service::shm {

// Bytes the frames of `elements` take, padding included.
size_t FramesBytes(const std::vector<Element>& elements);
// Writes the frames of `elements` to dst[0, FramesBytes(elements)) and lists their sizes in
// `*response`. InvalidArgument for an element with no frame encoding (rank > 32).
absl::Status WriteFrames(const std::vector<Element>& elements, uint8_t* dst, ShmResponse* response);

// The bytes the frames that `response` lists take, padding included: DataLoss when they add up to
// more than `limit`.
absl::StatusOr<size_t> FramesExtent(const ShmResponse& response, size_t limit);
// Decodes the elements that `response` lists from `frames` (which holds at least their extent),
// and the rest of the response. The numeric tensors alias `frames`.
absl::StatusOr<GetElementsResult> DecodeShmResponse(const ShmResponse& response, std::shared_ptr<Buffer> frames);

}  // namespace tfdata::service::shm
