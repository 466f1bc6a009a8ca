// libFuzzer target: decode_jpeg on arbitrary bytes must return an image or an error, never
// crash, leak or read out of bounds (built with ASan/UBSan, see CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lib/functions/image.h"

namespace {

// Smaller than decode_jpeg's own limit so that a header claiming a huge image cannot push a
// run over libFuzzer's memory limit or make single inputs take seconds.
constexpr int64_t kFuzzMaxPixels = int64_t{1} << 22;

// A decoded image must be consistent with what was asked for.
void CheckImage(const tfdata::Tensor& image, int channels) {
  const tfdata::Shape& s = image.shape();
  const bool ok = image.dtype() == tfdata::DType::kUInt8 && s.size() == 3 && s[0] > 0 && s[1] > 0 &&
                  (channels == 0 ? (s[2] == 1 || s[2] == 3) : s[2] == channels) &&
                  image.nbytes() == static_cast<size_t>(s[0] * s[1] * s[2]);
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto stored = tfdata::DecodeJpegImage(bytes, 0, kFuzzMaxPixels);
  if (!stored.ok()) return 0;
  CheckImage(*stored, 0);
  // Only inputs that decode are worth the grayscale/RGB conversion paths too, the accurate IDCT,
  // and a reduced-scale decode (its size is checked: at least the target, or the full image).
  for (int channels : {1, 3}) {
    auto image = tfdata::DecodeJpegImage(bytes, channels, kFuzzMaxPixels, nullptr, /*accurate_dct=*/true);
    if (image.ok()) CheckImage(*image, channels);
  }
  const int64_t h = stored->shape()[0], w = stored->shape()[1];
  const int64_t min_h = 1 + static_cast<int64_t>(data[size / 2]) % h,
                min_w = 1 + static_cast<int64_t>(data[size / 3]) % w;
  auto scaled = tfdata::DecodeJpegImage(bytes, 3, kFuzzMaxPixels, nullptr, false, min_h, min_w);
  if (scaled.ok()) {
    CheckImage(*scaled, 3);
    if (scaled->shape()[0] < min_h || scaled->shape()[1] < min_w || scaled->shape()[0] > h || scaled->shape()[1] > w) {
      std::abort();
    }
  }
  return 0;
}
