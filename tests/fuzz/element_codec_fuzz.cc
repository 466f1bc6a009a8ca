// libFuzzer target for the element codec: arbitrary bytes must decode or fail cleanly, and
// whatever decodes must survive a re-encode / decode round trip unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "lib/core/element_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto copied = tfdata::DecodeElement(bytes);

  // The aliasing decoder must agree with the copying one.
  auto frame = tfdata::Buffer::Allocate(size);
  if (size > 0) std::memcpy(frame->mutable_data(), data, size);
  auto aliased = tfdata::DecodeElement(frame);
  if (copied.ok() != aliased.ok()) std::abort();
  if (!copied.ok()) return 0;
  if (*copied != *aliased) std::abort();

  std::string again;
  if (!tfdata::EncodeElement(*copied, &again).ok()) std::abort();
  if (again.size() != tfdata::EncodedSize(*copied)) std::abort();
  auto back = tfdata::DecodeElement(std::string_view(again));
  if (!back.ok() || *back != *copied) std::abort();

  tfdata::FrameWriter writer;
  if (!writer.AppendElement(*copied).ok()) std::abort();
  std::string joined;
  for (const auto& [p, n] : writer.Ranges()) joined.append(static_cast<const char*>(p), n);
  if (joined != again) std::abort();
  return 0;
}
