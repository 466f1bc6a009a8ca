// resize, random_crop, center_crop, random_flip_left_right and normalize.
//
// Accepted inputs (see image.h): the geometric functions take rank-3 images [h, w, c] only;
// resize needs a numeric dtype (the result is float32), crops and flip take any non-string dtype
// and keep it. normalize takes any numeric tensor whose last dimension is the channel axis.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"
#include "lib/functions/image.h"

namespace tfdata {
namespace {

bool DTypeAccepted(DType d, ImageDTypes dtypes) {
  if (d == DType::kString) return false;
  return dtypes == ImageDTypes::kAny || d != DType::kBool;
}

absl::Status NotAnImage(std::string_view fn, int component, ImageDTypes dtypes, const std::string& got) {
  const char* want = dtypes == ImageDTypes::kNumeric ? "a numeric image [height, width, channels]"
                                                     : "an image [height, width, channels]";
  return absl::InvalidArgumentError(fmt::format("{}: component {} must be {}, got {}", fn, component, want, got));
}

// ---- resize -----------------------------------------------------------------------------

// One output coordinate's source taps, as tf.image.resize (bilinear, half-pixel centers):
// in = (out + 0.5) * scale - 0.5, clamped to the image; computed in float like TensorFlow.
struct Tap {
  int64_t lo, hi;  // source indices (already multiplied by the stride for x)
  float lerp;
};

std::vector<Tap> Taps(int64_t in_size, int64_t out_size, int64_t stride) {
  std::vector<Tap> taps(static_cast<size_t>(out_size));
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    const float in = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float f = std::floor(in);
    const int64_t lo = std::clamp<int64_t>(static_cast<int64_t>(f), 0, in_size - 1);
    const int64_t hi = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(in)), 0, in_size - 1);
    taps[static_cast<size_t>(i)] = Tap{lo * stride, hi * stride, in - f};
  }
  return taps;
}

// kC > 0 fixes the channel count at compile time for the common cases (1, 3).
template <int kC, typename T>
void ResizeRows(const T* in, int64_t w, int64_t c_rt, const std::vector<Tap>& ys, const std::vector<Tap>& xs,
                float* out) {
  const int64_t c = kC > 0 ? kC : c_rt;
  for (const Tap& y : ys) {
    const T* top = in + y.lo * w * c;
    const T* bottom = in + y.hi * w * c;
    for (const Tap& x : xs) {
      for (int64_t ch = 0; ch < c; ++ch) {
        const float tl = static_cast<float>(top[x.lo + ch]);
        const float tr = static_cast<float>(top[x.hi + ch]);
        const float bl = static_cast<float>(bottom[x.lo + ch]);
        const float br = static_cast<float>(bottom[x.hi + ch]);
        const float t = tl + (tr - tl) * x.lerp;
        const float b = bl + (br - bl) * x.lerp;
        *out++ = t + (b - t) * y.lerp;
      }
    }
  }
}

// NEAREST's source index of each output coordinate, as tf.image.resize (half-pixel centers):
// floor((out + 0.5) * scale), at most the last; computed in float like TensorFlow.
std::vector<int64_t> NearestIndices(int64_t in_size, int64_t out_size) {
  std::vector<int64_t> idx(static_cast<size_t>(out_size));
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    const float in = (static_cast<float>(i) + 0.5f) * scale;
    idx[static_cast<size_t>(i)] = std::min<int64_t>(static_cast<int64_t>(std::floor(in)), in_size - 1);
  }
  return idx;
}

// Copies each output pixel from its nearest source pixel, whatever the dtype.
Tensor ResizeNearest(const Tensor& img, int64_t height, int64_t width) {
  const int64_t w = img.shape()[1], c = img.shape()[2];
  const size_t pixel = static_cast<size_t>(c) * DTypeSize(img.dtype());
  const std::vector<int64_t> ys = NearestIndices(img.shape()[0], height);
  const std::vector<int64_t> xs = NearestIndices(w, width);
  Tensor out = UninitializedTensor(img.dtype(), {height, width, c});
  const uint8_t* src = img.raw();
  uint8_t* dst = out.mutable_raw();
  for (int64_t y : ys) {
    const uint8_t* row = src + static_cast<size_t>(y * w) * pixel;
    for (int64_t x : xs) {
      std::memcpy(dst, row + static_cast<size_t>(x) * pixel, pixel);
      dst += pixel;
    }
  }
  return out;
}

class ResizeFn final : public Function {
 public:
  ResizeFn(int component, int64_t height, int64_t width, bool nearest, MemoryScope memory)
      : component_(component), height_(height), width_(width), nearest_(nearest), memory_(std::move(memory)) {}
  std::string_view name() const override { return "resize"; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_ASSIGN_OR_RETURN(const TensorSpec* img, CheckImageSpec(name(), input, component_, ImageDTypes::kNumeric));
    if (img == nullptr) return input;
    ElementSpec out = input;
    out.components[static_cast<size_t>(component_)] = TensorSpec{
        nearest_ ? img->dtype : DType::kFloat32, {height_, width_, img->unknown_rank ? -1 : img->shape[2]}, false};
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    TFD_ASSIGN_OR_RETURN(const Tensor* img, CheckImageTensor(name(), input, component_, ImageDTypes::kNumeric));
    TFD_ASSIGN_OR_RETURN(Tensor out, ResizeImage(*img, height_, width_, nearest_, &memory_));
    input[static_cast<size_t>(component_)] = std::move(out);
    return input;
  }

 private:
  int component_;
  int64_t height_, width_;
  bool nearest_;
  MemoryScope memory_;
};

// ---- random_crop / center_crop ------------------------------------------------------------

// Copies the [height, width, c] window at (top, left) of `img`.
Tensor CropWindow(const Tensor& img, int64_t top, int64_t left, int64_t height, int64_t width) {
  const int64_t w = img.shape()[1], c = img.shape()[2];
  const size_t px = static_cast<size_t>(c) * DTypeSize(img.dtype());
  Tensor out = UninitializedTensor(img.dtype(), {height, width, c});
  const uint8_t* src = img.raw() + (static_cast<size_t>(top * w + left)) * px;
  uint8_t* dst = out.mutable_raw();
  const size_t row = static_cast<size_t>(width) * px;
  for (int64_t y = 0; y < height; ++y) {
    if (row > 0) std::memcpy(dst + static_cast<size_t>(y) * row, src + static_cast<size_t>(y * w) * px, row);
  }
  return out;
}

// Shared by both crops: argument and shape checks; Window() picks the offsets.
class CropFn : public Function {
 public:
  CropFn(int component, int64_t height, int64_t width) : component_(component), height_(height), width_(width) {}

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_ASSIGN_OR_RETURN(const TensorSpec* img, CheckImageSpec(name(), input, component_, ImageDTypes::kAny));
    if (img == nullptr) return input;
    if (!img->unknown_rank) {
      const int64_t h = img->shape[0], w = img->shape[1];
      if ((h >= 0 && h < height_) || (w >= 0 && w < width_)) return TooSmall(img->DebugString());
    }
    ElementSpec out = input;
    out.components[static_cast<size_t>(component_)] =
        TensorSpec{img->dtype, {height_, width_, img->unknown_rank ? -1 : img->shape[2]}, false};
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(const Tensor* img, CheckImageTensor(name(), input, component_, ImageDTypes::kAny));
    const int64_t h = img->shape()[0], w = img->shape()[1];
    if (h < height_ || w < width_) return TooSmall(img->TypeString());
    if (h == height_ && w == width_) return input;  // the whole image: share it, copy nothing
    int64_t top = 0, left = 0;
    Window(h - height_, w - width_, ctx, &top, &left);
    input[static_cast<size_t>(component_)] = CropWindow(*img, top, left, height_, width_);
    return input;
  }

 protected:
  // Offsets of the window, given how much room there is (>= 0) in each direction.
  virtual void Window(int64_t spare_h, int64_t spare_w, const FunctionContext& ctx, int64_t* top,
                      int64_t* left) const = 0;

 private:
  absl::Status TooSmall(const std::string& got) const {
    return absl::InvalidArgumentError(fmt::format("{}: component {} ({}) is smaller than the crop window [{}, {}]",
                                                  name(), component_, got, height_, width_));
  }

  int component_;
  int64_t height_, width_;
};

// Per-function salts keep two functions given the same seed from drawing correlated numbers
// (e.g. random_crop and random_flip_left_right both with seed 42).
constexpr uint64_t kCropSalt = 0x6a09e667f3bcc908ULL;
constexpr uint64_t kFlipSalt = 0xbb67ae8584caa73bULL;

class RandomCropFn final : public CropFn {
 public:
  RandomCropFn(int component, int64_t height, int64_t width, uint64_t seed)
      : CropFn(component, height, width), seed_(seed ^ kCropSalt) {}
  std::string_view name() const override { return "random_crop"; }

 protected:
  void Window(int64_t spare_h, int64_t spare_w, const FunctionContext& ctx, int64_t* top,
              int64_t* left) const override {
    SplitMix rng{ElementSeed(seed_, ctx)};
    *top = static_cast<int64_t>(UniformBelow(rng.Next(), static_cast<uint64_t>(spare_h) + 1));
    *left = static_cast<int64_t>(UniformBelow(rng.Next(), static_cast<uint64_t>(spare_w) + 1));
  }

 private:
  uint64_t seed_;
};

class CenterCropFn final : public CropFn {
 public:
  using CropFn::CropFn;
  std::string_view name() const override { return "center_crop"; }

 protected:
  // Rounds down like tf.image.resize_with_crop_or_pad: odd spare rows go to the bottom/right.
  void Window(int64_t spare_h, int64_t spare_w, const FunctionContext&, int64_t* top, int64_t* left) const override {
    *top = spare_h / 2;
    *left = spare_w / 2;
  }
};

// ---- random_flip_left_right ---------------------------------------------------------------

// kPx > 0 fixes the pixel size in bytes so that memcpy becomes a plain move.
template <size_t kPx>
void MirrorRows(const uint8_t* src, uint8_t* dst, int64_t rows, int64_t w, size_t px_rt) {
  const size_t px = kPx > 0 ? kPx : px_rt;
  for (int64_t y = 0; y < rows; ++y) {
    const uint8_t* s = src + static_cast<size_t>(y * w) * px;
    uint8_t* d = dst + static_cast<size_t>(y * w) * px;
    for (int64_t x = 0; x < w; ++x)
      std::memcpy(d + static_cast<size_t>(x) * px, s + static_cast<size_t>(w - 1 - x) * px, px);
  }
}

class RandomFlipFn final : public Function {
 public:
  RandomFlipFn(int component, uint64_t seed) : component_(component), seed_(seed ^ kFlipSalt) {}
  std::string_view name() const override { return "random_flip_left_right"; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_RETURN_IF_ERROR(CheckImageSpec(name(), input, component_, ImageDTypes::kAny).status());
    return input;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext& ctx) const override {
    TFD_ASSIGN_OR_RETURN(const Tensor* img, CheckImageTensor(name(), input, component_, ImageDTypes::kAny));
    SplitMix rng{ElementSeed(seed_, ctx)};
    // Not flipped (or nothing to flip): pass the image through untouched.
    if ((rng.Next() >> 63) == 0 || img->num_elements() == 0) return input;
    const int64_t h = img->shape()[0], w = img->shape()[1];
    const size_t px = static_cast<size_t>(img->shape()[2]) * DTypeSize(img->dtype());
    Tensor out = UninitializedTensor(img->dtype(), img->shape());
    switch (px) {
      case 1: MirrorRows<1>(img->raw(), out.mutable_raw(), h, w, px); break;
      case 3: MirrorRows<3>(img->raw(), out.mutable_raw(), h, w, px); break;
      case 4: MirrorRows<4>(img->raw(), out.mutable_raw(), h, w, px); break;
      case 12: MirrorRows<12>(img->raw(), out.mutable_raw(), h, w, px); break;
      default: MirrorRows<0>(img->raw(), out.mutable_raw(), h, w, px); break;
    }
    input[static_cast<size_t>(component_)] = std::move(out);
    return input;
  }

 private:
  int component_;
  uint64_t seed_;
};

// ---- normalize ----------------------------------------------------------------------------

// normalize repeats its per-channel values to a multiple of this (exactly this for 1, 2, 3, 4,
// ... channels) so that the inner loop has a fixed trip count and vectorizes.
constexpr size_t kNormalizeBlock = 48;

class NormalizeFn final : public Function {
 public:
  // `mean` and `std` hold the per-channel values (`channels` of them) repeated, see MakeNormalize.
  NormalizeFn(int component, size_t channels, std::vector<float> mean, std::vector<float> std)
      : component_(component), channels_(channels), mean_(std::move(mean)), std_(std::move(std)) {}
  std::string_view name() const override { return "normalize"; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(name(), component_, input));
    if (input.unknown) return input;
    const TensorSpec& t = input.components[static_cast<size_t>(component_)];
    if (t.dtype == DType::kString || t.dtype == DType::kBool) return NotNumeric(t.DebugString());
    if (!t.unknown_rank) {
      TFD_RETURN_IF_ERROR(CheckChannels(t.shape.empty() ? 0 : t.shape.back(), t.shape.empty(), t.DebugString()));
    }
    ElementSpec out = input;
    out.components[static_cast<size_t>(component_)].dtype = DType::kFloat32;
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(name(), component_, input.size()));
    const Tensor& t = input[static_cast<size_t>(component_)];
    if (t.is_string() || t.dtype() == DType::kBool) return NotNumeric(t.TypeString());
    TFD_RETURN_IF_ERROR(CheckChannels(t.rank() == 0 ? 0 : t.shape().back(), t.rank() == 0, t.TypeString()));
    Tensor out = UninitializedTensor(DType::kFloat32, t.shape());
    VisitNumeric(t.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const size_t n = static_cast<size_t>(t.num_elements());
      mean_.size() == kNormalizeBlock ? Run<T, kNormalizeBlock>(t.data<T>(), n, out.mutable_data<float>())
                                      : Run<T, 0>(t.data<T>(), n, out.mutable_data<float>());
    });
    input[static_cast<size_t>(component_)] = std::move(out);
    return input;
  }

 private:
  absl::Status NotNumeric(const std::string& got) const {
    return absl::InvalidArgumentError(
        fmt::format("normalize: component {} must be a numeric tensor, got {}", component_, got));
  }
  // `channels` is the last dimension (-1 unknown); a scalar has none.
  absl::Status CheckChannels(int64_t channels, bool scalar, const std::string& got) const {
    const size_t n = channels_;
    if (n == 1 || (!scalar && (channels < 0 || static_cast<size_t>(channels) == n))) return absl::OkStatus();
    return absl::InvalidArgumentError(fmt::format(
        "normalize: component {} ({}) must have {} channels (last dimension) to match the {} mean/std values",
        component_, got, n, n));
  }

  // Writes (src - mean) / std; the value count is a multiple of the channel count (checked).
  template <typename T, size_t kFixed>
  void Run(const T* __restrict src, size_t total, float* __restrict dst) const {
    const size_t block = kFixed > 0 ? kFixed : mean_.size();
    const float* __restrict mean = mean_.data();
    const float* __restrict stddev = std_.data();
    size_t i = 0;
    for (; i + block <= total; i += block) {
      for (size_t j = 0; j < block; ++j) dst[i + j] = (static_cast<float>(src[i + j]) - mean[j]) / stddev[j];
    }
    for (size_t j = 0; i < total; ++i, ++j) dst[i] = (static_cast<float>(src[i]) - mean[j]) / stddev[j];
  }

  int component_;
  size_t channels_;
  std::vector<float> mean_, std_;  // per-channel values, repeated (see the constructor)
};

}  // namespace

absl::StatusOr<Tensor> ResizeImage(const Tensor& img, int64_t height, int64_t width, bool nearest,
                                   const MemoryScope* memory) {
  const int64_t h = img.shape()[0], w = img.shape()[1], c = img.shape()[2];
  if (h == 0 || w == 0) {
    return absl::InvalidArgumentError(fmt::format("resize: cannot resize an empty image {}", img.TypeString()));
  }
  const DType out_dtype = nearest ? img.dtype() : DType::kFloat32;
  if (memory != nullptr) {
    TFD_RETURN_IF_ERROR(memory->get().CheckAllocation(
        height * width * c * static_cast<int64_t>(DTypeSize(out_dtype)), memory->where,
        fmt::format("a resized {} [{}, {}, {}] image", DTypeName(out_dtype), height, width, c)));
  }
  if (nearest) return ResizeNearest(img, height, width);
  const std::vector<Tap> ys = Taps(h, height, 1);
  const std::vector<Tap> xs = Taps(w, width, c);
  Tensor out = UninitializedTensor(DType::kFloat32, {height, width, c});
  float* dst = out.mutable_data<float>();
  VisitNumeric(img.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = img.data<T>();
    c == 3   ? ResizeRows<3>(src, w, c, ys, xs, dst)
    : c == 1 ? ResizeRows<1>(src, w, c, ys, xs, dst)
             : ResizeRows<0>(src, w, c, ys, xs, dst);
  });
  return out;
}

absl::StatusOr<const TensorSpec*> CheckImageSpec(std::string_view fn, const ElementSpec& spec, int component,
                                                 ImageDTypes dtypes) {
  TFD_RETURN_IF_ERROR(CheckComponent(fn, component, spec));
  if (spec.unknown) return nullptr;
  const TensorSpec& t = spec.components[static_cast<size_t>(component)];
  if (!DTypeAccepted(t.dtype, dtypes) || (!t.unknown_rank && t.shape.size() != 3)) {
    return NotAnImage(fn, component, dtypes, t.DebugString());
  }
  return &t;
}

absl::StatusOr<const Tensor*> CheckImageTensor(std::string_view fn, const Element& element, int component,
                                               ImageDTypes dtypes) {
  TFD_RETURN_IF_ERROR(CheckComponent(fn, component, element.size()));
  const Tensor& t = element[static_cast<size_t>(component)];
  if (!DTypeAccepted(t.dtype(), dtypes) || t.rank() != 3) return NotAnImage(fn, component, dtypes, t.TypeString());
  return &t;
}

absl::StatusOr<std::unique_ptr<Function>> MakeResize(const pipeline::Resize& spec, MemoryScope memory) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("resize", spec.component()));
  TFD_RETURN_IF_ERROR(CheckSizeArgs("resize", spec.height(), spec.width()));
  // One channel at least: a size the budget can never hold fails when the pipeline is built.
  TFD_RETURN_IF_ERROR(
      memory.get().CheckAllocation(spec.height() * spec.width() * 4, memory.where,
                                   fmt::format("a resized float32 [{}, {}, C] image", spec.height(), spec.width())));
  if (!pipeline::Resize::Method_IsValid(spec.method())) {
    return absl::InvalidArgumentError(fmt::format("resize: method must be BILINEAR or NEAREST, got {}", spec.method()));
  }
  return std::make_unique<ResizeFn>(spec.component(), spec.height(), spec.width(),
                                    spec.method() == pipeline::Resize::NEAREST, std::move(memory));
}

absl::StatusOr<std::unique_ptr<Function>> MakeRandomCrop(const pipeline::RandomCrop& spec) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("random_crop", spec.component()));
  TFD_RETURN_IF_ERROR(CheckSizeArgs("random_crop", spec.height(), spec.width()));
  return std::make_unique<RandomCropFn>(spec.component(), spec.height(), spec.width(),
                                        SeedOrRandom(spec.has_seed(), spec.seed()));
}

absl::StatusOr<std::unique_ptr<Function>> MakeCenterCrop(const pipeline::CenterCrop& spec) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("center_crop", spec.component()));
  TFD_RETURN_IF_ERROR(CheckSizeArgs("center_crop", spec.height(), spec.width()));
  return std::make_unique<CenterCropFn>(spec.component(), spec.height(), spec.width());
}

absl::StatusOr<std::unique_ptr<Function>> MakeRandomFlipLeftRight(const pipeline::RandomFlipLeftRight& spec) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("random_flip_left_right", spec.component()));
  return std::make_unique<RandomFlipFn>(spec.component(), SeedOrRandom(spec.has_seed(), spec.seed()));
}

absl::StatusOr<std::unique_ptr<Function>> MakeNormalize(const pipeline::Normalize& spec) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("normalize", spec.component()));
  std::vector<float> mean(spec.mean().begin(), spec.mean().end());
  std::vector<float> std(spec.std().begin(), spec.std().end());
  if (mean.empty() && std.empty()) {
    return absl::InvalidArgumentError("normalize: give mean and/or std (one value, or one per channel)");
  }
  if (mean.size() > 1 && std.size() > 1 && mean.size() != std.size()) {
    return absl::InvalidArgumentError(
        fmt::format("normalize: mean has {} values and std has {}; each must have 1 value or one per channel",
                    mean.size(), std.size()));
  }
  for (size_t i = 0; i < mean.size(); ++i) {
    if (!std::isfinite(mean[i])) {
      return absl::InvalidArgumentError(fmt::format("normalize: mean[{}] must be finite, got {}", i, mean[i]));
    }
  }
  for (size_t i = 0; i < std.size(); ++i) {
    if (!std::isfinite(std[i]) || std[i] == 0.0f) {
      return absl::InvalidArgumentError(
          fmt::format("normalize: std[{}] must be finite and non-zero, got {}", i, std[i]));
    }
  }
  // A missing list means the identity for that step (mean 0, std 1); one value broadcasts.
  const size_t n = std::max(mean.size(), std.size());
  const size_t len = n * kNormalizeBlock / std::gcd(n, kNormalizeBlock);
  std::vector<float> mean_rep(len), std_rep(len);
  for (size_t i = 0; i < len; ++i) {
    mean_rep[i] = mean.empty() ? 0.0f : mean[mean.size() == 1 ? 0 : i % n];
    std_rep[i] = std.empty() ? 1.0f : std[std.size() == 1 ? 0 : i % n];
  }
  return std::make_unique<NormalizeFn>(spec.component(), n, std::move(mean_rep), std::move(std_rep));
}

}  // namespace tfdata
