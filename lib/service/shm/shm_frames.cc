#include "lib/service/shm/shm_frames.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/core/element_codec.h"

namespace tfdata::service::shm {
namespace {

constexpr size_t kAlign = 8;
size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

size_t FramesBytes(const std::vector<Element>& elements) {
  size_t n = 0;
  for (const Element& e : elements) n += AlignUp(EncodedSize(e));
  return n;
}

absl::Status WriteFrames(const std::vector<Element>& elements, uint8_t* dst, ShmResponse* response) {
  // Each frame is encoded in place: small elements (scalars) would otherwise go through a
  // FrameWriter's storage and a second copy.
  for (const Element& e : elements) {
    auto size = EncodeElementTo(e, dst);
    if (!size.ok()) return size.status();
    const size_t padded = AlignUp(*size);
    std::memset(dst + *size, 0, padded - *size);
    dst += padded;
    response->add_frame_sizes(*size);
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> FramesExtent(const ShmResponse& response, size_t limit) {
  size_t total = 0;
  for (int i = 0; i < response.frame_sizes_size(); ++i) {
    const uint64_t size = response.frame_sizes(i);
    if (size > limit || AlignUp(static_cast<size_t>(size)) > limit - total) {
      return absl::DataLossError(absl::StrCat("shared-memory response: element ", i, " (", size,
                                              " bytes) ends beyond the ", limit, " bytes written"));
    }
    total += AlignUp(static_cast<size_t>(size));
  }
  return total;
}

absl::StatusOr<GetElementsResult> DecodeShmResponse(const ShmResponse& response, std::shared_ptr<Buffer> frames) {
  auto extent = FramesExtent(response, frames->size());
  if (!extent.ok()) return extent.status();
  GetElementsResult result;
  result.end_of_sequence = response.end_of_sequence();
  result.first_index = response.first_index();
  result.elements_skipped = response.elements_skipped();
  if (result.first_index < 0 || result.elements_skipped < 0) {
    return absl::DataLossError("shared-memory response: a negative first_index or elements_skipped");
  }
  uint64_t run_elements = 0;
  for (const SplitRun& run : response.split_runs()) {
    if (run.epoch() < 0 || run.split() < 0 || run.first_seq() < 0 || run.count() < 0 ||
        run.count() > response.frame_sizes_size() ||
        run.count() > std::numeric_limits<int64_t>::max() - run.first_seq()) {
      return absl::DataLossError(absl::StrCat(
          "shared-memory response: split run with a negative or overflowing position (", run.ShortDebugString(), ")"));
    }
    run_elements += static_cast<uint64_t>(run.count());
    result.split_runs.push_back(run);
  }
  if (!result.split_runs.empty() && run_elements != static_cast<uint64_t>(response.frame_sizes_size())) {
    return absl::DataLossError(absl::StrCat("shared-memory response: split runs cover ", run_elements,
                                            " elements, the response has ", response.frame_sizes_size()));
  }
  result.elements.reserve(response.frame_sizes_size());
  size_t offset = 0;
  for (int i = 0; i < response.frame_sizes_size(); ++i) {
    const auto size = static_cast<size_t>(response.frame_sizes(i));
    auto e = DecodeElement(frames, offset, size);
    if (!e.ok()) {
      return absl::DataLossError(
          absl::StrCat("shared-memory response: element ", i, " (frame at byte ", offset, "): ", e.status().message()));
    }
    result.elements.push_back(*std::move(e));
    offset += AlignUp(size);
  }
  return result;
}

}  // namespace tfdata::service::shm
