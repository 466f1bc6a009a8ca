// libFuzzer target for the GetElements response decoder (what a reader accepts from a worker):
// arbitrary bytes, cut into pieces at data-chosen points as a transport would, must decode or fail
// cleanly; however they are cut, the result must be the same; what decodes must re-encode to bytes
// that decode to the same elements, plain and snappy-compressed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include "lib/service/common/elements_wire.h"

using tfdata::service::DecodeElements;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t cut = data[0];  // piece length for the second decode
  std::span<const uint8_t> bytes(data + 1, size - 1);
  const std::vector<std::span<const uint8_t>> whole = {bytes};
  auto a = DecodeElements(whole);
  std::vector<std::span<const uint8_t>> pieces;
  for (size_t at = 0; at < bytes.size(); at += cut + 1)
    pieces.push_back(bytes.subspan(at, std::min(cut + 1, bytes.size() - at)));
  auto b = DecodeElements(pieces);
  if (a.ok() != b.ok()) std::abort();
  if (!a.ok()) return 0;
  if (a->elements != b->elements || a->end_of_sequence != b->end_of_sequence || a->first_index != b->first_index ||
      a->elements_skipped != b->elements_skipped) {
    std::abort();
  }
  // Re-encoded plain and snappy-compressed (field 4), both decode to the same result.
  for (bool compress : {false, true}) {
    tfdata::service::GetElementsResult copy = *a;
    copy.compress = compress;
    auto encoded = tfdata::service::EncodeElements(std::move(copy));
    if (!encoded.ok()) std::abort();
    std::vector<std::span<const uint8_t>> ranges;
    for (const auto& [p, n] : encoded->ranges) ranges.emplace_back(static_cast<const uint8_t*>(p), n);
    auto c = DecodeElements(ranges);
    if (!c.ok() || c->elements != a->elements || c->end_of_sequence != a->end_of_sequence ||
        c->elements_skipped != a->elements_skipped) {
      std::abort();
    }
  }
  return 0;
}
