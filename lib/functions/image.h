// Internal helpers shared by the image functions (decode_jpeg, resize, random_crop, center_crop,
// random_flip_left_right, normalize) and their tests.
//
// Images are rank-3 tensors [height, width, channels] in row-major (HWC) order. The geometric
// functions accept only rank 3: a [h, w] tensor is ambiguous with a batch of vectors, and being
// strict makes a forgotten decode/expand step fail at validation instead of producing garbage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fmt/format.h"
#include "lib/core/element_spec.h"
#include "lib/core/memory_budget.h"
#include "lib/core/tensor.h"

namespace tfdata {

// Upper bound on the pixels (height * width) of a decoded or resized image. It keeps a hostile
// JPEG header (65500 x 65500) or a typo in a resize from allocating gigabytes.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// Which dtypes an image function accepts.
enum class ImageDTypes {
  kNumeric,  // integers and floats (arithmetic on the values)
  kAny,      // anything but string (the values are only moved around)
};

// Checks that component `component` of `spec` is an image [h, w, c] with an accepted dtype.
// Returns that component's spec, or nullptr when the element spec is unknown (nothing to check).
// Errors read "<fn>: component 0 must be an image [height, width, channels], got string[]".
absl::StatusOr<const TensorSpec*> CheckImageSpec(std::string_view fn, const ElementSpec& spec, int component,
                                                 ImageDTypes dtypes);

// The same check on a concrete element; returns the image tensor.
absl::StatusOr<const Tensor*> CheckImageTensor(std::string_view fn, const Element& element, int component,
                                               ImageDTypes dtypes);

// Decodes JPEG bytes to uint8 [h, w, c]. `channels`: 0 = as stored (1 for grayscale, else 3),
// 1 = grayscale, 3 = RGB. CMYK/YCCK files are converted to RGB. Images with more than
// `max_pixels` pixels are rejected before any pixel memory is allocated (the fuzzer passes a
// smaller bound than decode_jpeg does).
// `accurate_dct`: libjpeg's accurate integer IDCT (TF's INTEGER_ACCURATE) instead of the fast one
// (TF's default, INTEGER_FAST). `min_height` and `min_width` > 0: decode at the smallest DCT scale
// M/8 (M = 1..8) whose output is at least that big (the full size when none is).
absl::StatusOr<Tensor> DecodeJpegImage(std::string_view data, int channels, int64_t max_pixels = kMaxImagePixels,
                                       const MemoryScope* memory = nullptr, bool accurate_dct = false,
                                       int64_t min_height = 0, int64_t min_width = 0);

// Resizes a numeric image [h, w, c] to [height, width, c] as tf.image.resize without
// antialiasing: bilinear to float32, or nearest keeping the dtype. The output's allocation is
// checked against `memory` when given.
absl::StatusOr<Tensor> ResizeImage(const Tensor& image, int64_t height, int64_t width, bool nearest,
                                   const MemoryScope* memory = nullptr);

// Encodes a uint8 [h, w, c] image as a baseline JPEG (quality 1..100, 4:2:0 chroma subsampling
// for RGB). c is 1 (gray), 3 (RGB) or 4: CMYK stored the way Adobe applications do (inverted,
// 255 = no ink), with the Adobe marker. For tests and test data.
absl::StatusOr<std::string> EncodeJpeg(const Tensor& image_uint8_hwc, int quality);

// A tensor whose bytes the caller overwrites entirely (skips Tensor::Zeros' memset).
inline Tensor UninitializedTensor(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  return *Tensor::FromBuffer(dtype, std::move(shape), Buffer::Allocate(bytes), 0, bytes);
}

// Calls f(T{}) with the C++ type of a numeric dtype; does nothing for bool and string.
template <typename F>
void VisitNumeric(DType d, F&& f) {
  switch (d) {
    case DType::kInt8: f(int8_t{}); break;
    case DType::kInt16: f(int16_t{}); break;
    case DType::kInt32: f(int32_t{}); break;
    case DType::kInt64: f(int64_t{}); break;
    case DType::kUInt8: f(uint8_t{}); break;
    case DType::kUInt16: f(uint16_t{}); break;
    case DType::kUInt32: f(uint32_t{}); break;
    case DType::kUInt64: f(uint64_t{}); break;
    case DType::kFloat32: f(float{}); break;
    case DType::kFloat64: f(double{}); break;
    case DType::kBool:
    case DType::kString: break;
  }
}

// The creation-time check of a `component` field.
inline absl::Status CheckComponentArg(std::string_view fn, int component) {
  if (component >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}: component must be >= 0, got {}", fn, component));
}

// The creation-time check of height/width fields (resize and the crops).
inline absl::Status CheckSizeArgs(std::string_view fn, int64_t height, int64_t width) {
  if (height <= 0 || width <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: height and width must be > 0, got height {} and width {}", fn, height, width));
  }
  if (height > kMaxImagePixels / width) {
    return absl::InvalidArgumentError(
        fmt::format("{}: height * width ({} x {}) exceeds the limit of {} pixels", fn, height, width, kMaxImagePixels));
  }
  return absl::OkStatus();
}

// A small deterministic random stream for one element, seeded from ElementSeed. SplitMix64:
// cheap to seed (unlike std::mt19937_64) and identical on every platform.
struct SplitMix {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
};

// A value in [0, n) from 64 random bits (multiply-shift: no modulo bias worth speaking of, and
// the same on every platform, unlike std::uniform_int_distribution). n must be > 0.
inline uint64_t UniformBelow(uint64_t bits, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
}

}  // namespace tfdata
