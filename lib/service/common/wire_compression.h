// Compression of elements on the wire (GetElementsResponse.compressed_elements): the names of the
// kinds, snappy per element frame, and the measurement behind COMPRESSION_AUTO.
//
// Stateless functions; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/tensor.h"
#include "proto/service.pb.h"

namespace tfdata::service {

// "none", "snappy", "auto": the --compression flag's values.
std::string CompressionFlagName(Compression c);
absl::StatusOr<Compression> ParseCompression(std::string_view flag);

// The element's frame, snappy-compressed. InvalidArgument for an element without a frame encoding.
absl::StatusOr<std::string> CompressElement(const Element& element);

// What snappy does to a sample of a task's element stream.
struct CompressionSample {
  int64_t bytes = 0;                  // uncompressed frame bytes measured
  double ratio = 1;                   // compressed / uncompressed
  double compress_bytes_per_s = 0;    // of uncompressed input, one thread
  double decompress_bytes_per_s = 0;  // of uncompressed output, one thread
};
// Compresses and decompresses (up to 4 MiB of) the elements' frames, keeping the fastest of 5
// timed runs (costs ~10-40 ms once per task).
CompressionSample MeasureSnappy(const std::vector<Element>& elements);

// COMPRESSION_AUTO's rule. Sending uncompressed moves data at the link's rate; compressed, the
// stream moves at the slowest of compressing, decompressing and the link carrying `ratio` of the
// bytes. Compress when that is clearly (20%) faster and saves at least 10% of the bytes.
bool ShouldCompress(const CompressionSample& sample, double link_bytes_per_s);
// The estimated throughput (uncompressed bytes/s) of the stream when compressed.
double CompressedThroughput(const CompressionSample& sample, double link_bytes_per_s);

}  // namespace tfdata::service
