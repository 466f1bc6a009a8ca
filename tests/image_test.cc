#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "lib/functions/function.h"
#include "lib/functions/image.h"

using namespace tfdata;

namespace {

std::unique_ptr<Function> Make(const pipeline::Function& spec) {
  auto fn = CreateFunction(spec, FunctionOptions{});
  INFO(fn.status().ToString());
  REQUIRE(fn.ok());
  return std::move(fn).value();
}

std::unique_ptr<Function> MakeDecode(int channels) {
  pipeline::Function spec;
  spec.mutable_decode_jpeg()->set_channels(channels);
  return Make(spec);
}

Tensor Apply(const Function& fn, Tensor t, uint64_t index = 0) {
  auto out = fn.Apply({std::move(t)}, FunctionContext{index, 0});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  return (*out)[0];
}

std::string ApplyError(const Function& fn, Tensor t) {
  auto out = fn.Apply({std::move(t)}, FunctionContext{});
  REQUIRE_FALSE(out.ok());
  return std::string(out.status().message());
}

// An image [h, w, c] whose pixel (y, x) has the values f(y, x, ch).
template <typename T, typename F>
Tensor MakeImage(int64_t h, int64_t w, int64_t c, F f) {
  std::vector<T> v;
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t ch = 0; ch < c; ++ch) v.push_back(static_cast<T>(f(y, x, ch)));
  return Tensor::FromVector<T>({h, w, c}, v);
}

Tensor Solid(int64_t h, int64_t w, std::vector<int> rgb) {
  return MakeImage<uint8_t>(h, w, static_cast<int64_t>(rgb.size()),
                            [&](int64_t, int64_t, int64_t ch) { return rgb[ch]; });
}

std::string Jpeg(const Tensor& image, int quality = 95) {
  auto bytes = EncodeJpeg(image, quality);
  INFO(bytes.status().ToString());
  REQUIRE(bytes.ok());
  return *bytes;
}

int MaxAbsDiff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  int worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    worst = std::max(worst, static_cast<int>(std::abs(a.GetAsDouble(i) - b.GetAsDouble(i))));
  }
  return worst;
}

// A hand-assembled 8x8 grayscale JPEG: quantization all 1, one-symbol Huffman tables (DC
// category 10, AC end-of-block), and a single block whose DC coefficient 576 makes every pixel
// 128 + 576 / 8 = 200. The progressive variant has only DC scans, repeated `scans` times
// (libjpeg merely warns about the repeats).
std::string HandMadeJpeg(bool progressive = false, int scans = 1) {
  std::string b = "\xFF\xD8";                                                        // SOI
  b += std::string("\xFF\xDB\x00\x43\x00", 5) + std::string(64, '\x01');             // DQT 0, all ones
  b += std::string(progressive ? "\xFF\xC2" : "\xFF\xC0", 2);                        // SOF0 / SOF2
  b += std::string("\x00\x0B\x08\x00\x08\x00\x08\x01\x01\x11\x00", 11);              // 8x8, 1 component
  b += std::string("\xFF\xC4\x00\x14\x00\x01", 6) + std::string(15, '\0') + "\x0A";  // DC: {10}
  b += std::string("\xFF\xC4\x00\x14\x10\x01", 6) + std::string(16, '\0');           // AC: {EOB}
  for (int i = 0; i < scans; ++i) {
    if (progressive) {  // DC-only scan: Ss = Se = 0; bits: DC code 0, 576 (10 bits), padding
      b += std::string("\xFF\xDA\x00\x08\x01\x01\x00\x00\x00\x00", 10) + "\x48\x1F";
    } else {  // bits: DC code 0, 576 (10 bits), EOB code 0, padding
      b += std::string("\xFF\xDA\x00\x08\x01\x01\x00\x00\x3F\x00", 10) + "\x48\x0F";
    }
  }
  return b + "\xFF\xD9";  // EOI
}

ElementSpec Spec(DType dtype, Shape shape) { return ElementSpec{{TensorSpec{dtype, std::move(shape), false}}, false}; }

}  // namespace

// ---- decode_jpeg ----------------------------------------------------------------------------

TEST_CASE("decode_jpeg round-trips solid colours with the right size and channels", "[image]") {
  const Tensor rgb = Solid(24, 40, {200, 100, 50});
  Tensor decoded = Apply(*MakeDecode(0), Tensor::String(Jpeg(rgb)));
  CHECK(decoded.dtype() == DType::kUInt8);
  CHECK(decoded.shape() == Shape{24, 40, 3});
  CHECK(MaxAbsDiff(decoded, rgb) <= 3);

  Tensor as_rgb = Apply(*MakeDecode(3), Tensor::String(Jpeg(rgb)));
  CHECK(as_rgb == decoded);

  // Grayscale from colour: BT.601 luma 0.299*200 + 0.587*100 + 0.114*50 = 124.2.
  Tensor gray = Apply(*MakeDecode(1), Tensor::String(Jpeg(rgb)));
  CHECK(gray.shape() == Shape{24, 40, 1});
  CHECK(MaxAbsDiff(gray, Solid(24, 40, {124})) <= 3);
}

TEST_CASE("decode_jpeg keeps grayscale files single-channel unless asked for RGB", "[image]") {
  const Tensor g = Solid(9, 13, {77});
  const std::string bytes = Jpeg(g);
  Tensor stored = Apply(*MakeDecode(0), Tensor::String(bytes));
  CHECK(stored.shape() == Shape{9, 13, 1});
  CHECK(MaxAbsDiff(stored, g) <= 2);
  Tensor rgb = Apply(*MakeDecode(3), Tensor::String(bytes));
  CHECK(rgb.shape() == Shape{9, 13, 3});
  CHECK(MaxAbsDiff(rgb, Solid(9, 13, {77, 77, 77})) <= 2);
}

TEST_CASE("decode_jpeg converts Adobe CMYK files to RGB or gray", "[image]") {
  // Inverted CMYK (255 = no ink): R = C' * K' / 255, so (255, 128, 0, 200) is about (200, 100, 0).
  const std::string bytes = Jpeg(Solid(8, 16, {255, 128, 0, 200}));
  Tensor rgb = Apply(*MakeDecode(0), Tensor::String(bytes));
  CHECK(rgb.shape() == Shape{8, 16, 3});
  CHECK(MaxAbsDiff(rgb, Solid(8, 16, {200, 100, 0})) <= 3);
  Tensor gray = Apply(*MakeDecode(1), Tensor::String(bytes));
  CHECK(MaxAbsDiff(gray, Solid(8, 16, {119})) <= 3);  // 0.299 * 200 + 0.587 * 100
}

TEST_CASE("decode_jpeg decodes a gradient closely at high quality", "[image]") {
  const Tensor img =
      MakeImage<uint8_t>(32, 48, 3, [](int64_t y, int64_t x, int64_t c) { return x * 3 + y * 2 + c * 10; });
  Tensor decoded = Apply(*MakeDecode(0), Tensor::String(Jpeg(img, 100)));
  double total = 0;
  for (int64_t i = 0; i < img.num_elements(); ++i) total += std::abs(img.GetAsDouble(i) - decoded.GetAsDouble(i));
  CHECK(total / static_cast<double>(img.num_elements()) < 2.0);
}

TEST_CASE("decode_jpeg decodes a hand-written JPEG exactly", "[image]") {
  Tensor gray = Apply(*MakeDecode(0), Tensor::String(HandMadeJpeg()));
  CHECK(gray == Solid(8, 8, {200}));
  Tensor rgb = Apply(*MakeDecode(3), Tensor::String(HandMadeJpeg()));
  CHECK(rgb == Solid(8, 8, {200, 200, 200}));
}

TEST_CASE("decode_jpeg decodes progressive files and bounds their scan count", "[image]") {
  CHECK(Apply(*MakeDecode(0), Tensor::String(HandMadeJpeg(true, 1))) == Solid(8, 8, {200}));
  CHECK(Apply(*MakeDecode(0), Tensor::String(HandMadeJpeg(true, 1000))) == Solid(8, 8, {200}));
  CHECK(ApplyError(*MakeDecode(0), Tensor::String(HandMadeJpeg(true, 1001))) ==
        "decode_jpeg: invalid JPEG data: more than 1000 progressive scans");
}

TEST_CASE("decode_jpeg reports truncated and garbage data as errors", "[image]") {
  auto fn = MakeDecode(0);
  const std::string good =
      Jpeg(MakeImage<uint8_t>(16, 16, 3, [](int64_t y, int64_t x, int64_t c) { return y * 16 + x + c; }));
  // Every prefix that cuts into the image data fails (only dropping the final EOI may pass).
  for (size_t n = 0; n + 2 < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(ApplyError(*fn, Tensor::String(good.substr(0, n))).rfind("decode_jpeg: invalid JPEG data: ", 0) == 0);
  }
  CHECK(ApplyError(*fn, Tensor::String("not a jpeg at all")).rfind("decode_jpeg: invalid JPEG data: ", 0) == 0);
  CHECK_FALSE(fn->Apply({Tensor::String(std::string("\xFF\xD8") + std::string(100, '\x55'))}, {}).ok());

  // Corrupted bytes anywhere: an error or some image, never a crash.
  std::srand(7);
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[static_cast<size_t>(std::rand()) % bad.size()] = static_cast<char>(std::rand());
    auto out = fn->Apply({Tensor::String(bad)}, {});
    if (out.ok()) CHECK((*out)[0].dtype() == DType::kUInt8);
  }
}

TEST_CASE("decode_jpeg checks its input type and channels", "[image]") {
  auto fn = MakeDecode(3);
  auto spec = fn->OutputSpec(Spec(DType::kString, {}));
  REQUIRE(spec.ok());
  CHECK(spec->DebugString() == "(uint8[?, ?, 3])");
  CHECK(MakeDecode(0)->OutputSpec(Spec(DType::kString, {}))->DebugString() == "(uint8[?, ?, ?])");
  CHECK(fn->OutputSpec(Spec(DType::kInt64, {})).status().message() ==
        "decode_jpeg: component 0 must be a string scalar (JPEG bytes), got int64[]");
  CHECK_FALSE(fn->OutputSpec(Spec(DType::kString, {2})).ok());
  CHECK(fn->OutputSpec(ElementSpec::Unknown()).ok());
  CHECK(ApplyError(*fn, Tensor::Scalar<int64_t>(1)) ==
        "decode_jpeg: component 0 must be a string scalar (JPEG bytes), got int64[]");

  pipeline::Function bad;
  bad.mutable_decode_jpeg()->set_channels(2);
  auto made = CreateFunction(bad, FunctionOptions{});
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().message().find("channels") != std::string::npos);
}

TEST_CASE("DecodeJpegImage refuses images over the pixel limit before decoding", "[image]") {
  const std::string bytes = Jpeg(Solid(64, 64, {1, 2, 3}));
  CHECK(DecodeJpegImage(bytes, 0, 64 * 64).ok());
  auto big = DecodeJpegImage(bytes, 0, 64 * 64 - 1);
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("more than the limit") != std::string::npos);
}

// ---- resize -------------------------------------------------------------------------------

static std::unique_ptr<Function> MakeResizeFn(int64_t h, int64_t w) {
  pipeline::Function spec;
  spec.mutable_resize()->set_height(h);
  spec.mutable_resize()->set_width(w);
  return Make(spec);
}

TEST_CASE("resize upsamples 2x2 to 4x4 bilinearly with half-pixel centers", "[image]") {
  // Source coordinates of the outputs: -0.25 (clamped), 0.25, 0.75, 1.25 (clamped), so each
  // row/column [a, b] becomes [a, 0.75a + 0.25b, 0.25a + 0.75b, b].
  Tensor out = Apply(*MakeResizeFn(4, 4), Tensor::FromVector<uint8_t>({2, 2, 1}, {0, 4, 8, 12}));
  CHECK(out.dtype() == DType::kFloat32);
  CHECK(out.shape() == Shape{4, 4, 1});
  const std::vector<float> want = {0, 1, 3, 4, 2, 3, 5, 6, 6, 7, 9, 10, 8, 9, 11, 12};
  for (size_t i = 0; i < want.size(); ++i) CHECK(out.data<float>()[i] == Approx(want[i]));
}

TEST_CASE("resize downsamples 4x4 to 2x2 by averaging 2x2 blocks, per channel", "[image]") {
  Tensor img =
      MakeImage<float>(4, 4, 2, [](int64_t y, int64_t x, int64_t c) { return (y * 4 + x) * (c == 0 ? 1 : -1); });
  Tensor out = Apply(*MakeResizeFn(2, 2), img);
  CHECK(out.shape() == Shape{2, 2, 2});
  const std::vector<float> want = {2.5f, -2.5f, 4.5f, -4.5f, 10.5f, -10.5f, 12.5f, -12.5f};
  for (size_t i = 0; i < want.size(); ++i) CHECK(out.data<float>()[i] == Approx(want[i]));
}

TEST_CASE("resize to the same size is the identity and constants stay constant", "[image]") {
  Tensor img = MakeImage<int16_t>(5, 7, 3, [](int64_t y, int64_t x, int64_t c) { return y * 100 - x * 10 + c; });
  Tensor same = Apply(*MakeResizeFn(5, 7), img);
  for (int64_t i = 0; i < img.num_elements(); ++i) CHECK(same.data<float>()[i] == img.GetAsDouble(i));

  Tensor constant = Apply(*MakeResizeFn(13, 3), Solid(5, 7, {42, 42, 42, 42}));
  CHECK(constant.shape() == Shape{13, 3, 4});
  for (float v : constant.values<float>()) CHECK(v == 42.0f);
}

TEST_CASE("resize validates arguments and input types", "[image]") {
  auto fn = MakeResizeFn(8, 6);
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {-1, -1, 3}))->DebugString() == "(float32[8, 6, 3])");
  CHECK(fn->OutputSpec(Spec(DType::kString, {})).status().message() ==
        "resize: component 0 must be a numeric image [height, width, channels], got string[]");
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {4, 4})).status().message() ==
        "resize: component 0 must be a numeric image [height, width, channels], got uint8[4, 4]");
  CHECK_FALSE(fn->OutputSpec(Spec(DType::kBool, {4, 4, 1})).ok());
  CHECK(fn->OutputSpec(ElementSpec::Unknown()).ok());
  CHECK(ApplyError(*fn, Tensor::Vector<float>({1, 2})) ==
        "resize: component 0 must be a numeric image [height, width, channels], got float32[2]");
  CHECK(ApplyError(*fn, Tensor::Zeros(DType::kUInt8, {0, 3, 3})).find("empty image") != std::string::npos);

  pipeline::Function bad;
  bad.mutable_resize()->set_height(0);
  bad.mutable_resize()->set_width(4);
  auto made = CreateFunction(bad, FunctionOptions{});
  REQUIRE_FALSE(made.ok());
  CHECK(made.status().message().find("height and width must be > 0") != std::string::npos);
  bad.mutable_resize()->set_height(1 << 20);
  bad.mutable_resize()->set_width(1 << 20);
  CHECK_FALSE(CreateFunction(bad, FunctionOptions{}).ok());
}

// ---- crops --------------------------------------------------------------------------------

static std::unique_ptr<Function> MakeRandomCropFn(int64_t h, int64_t w, uint64_t seed) {
  pipeline::Function spec;
  spec.mutable_random_crop()->set_height(h);
  spec.mutable_random_crop()->set_width(w);
  spec.mutable_random_crop()->set_seed(seed);
  return Make(spec);
}

TEST_CASE("center_crop takes the centered window", "[image]") {
  pipeline::Function spec;
  spec.mutable_center_crop()->set_height(2);
  spec.mutable_center_crop()->set_width(3);
  auto fn = Make(spec);
  Tensor img = MakeImage<int32_t>(4, 5, 1, [](int64_t y, int64_t x, int64_t) { return y * 5 + x; });
  CHECK(Apply(*fn, img) == Tensor::FromVector<int32_t>({2, 3, 1}, {6, 7, 8, 11, 12, 13}));
  // Odd spare room rounds the offset down.
  Tensor odd = MakeImage<int32_t>(3, 4, 1, [](int64_t y, int64_t x, int64_t) { return y * 4 + x; });
  CHECK(Apply(*fn, odd) == Tensor::FromVector<int32_t>({2, 3, 1}, {0, 1, 2, 4, 5, 6}));
  CHECK(fn->OutputSpec(Spec(DType::kFloat64, {-1, -1, 3}))->DebugString() == "(float64[2, 3, 3])");
}

TEST_CASE("random_crop windows are valid, seeded and vary per element", "[image]") {
  auto fn = MakeRandomCropFn(3, 4, 42);
  Tensor img = MakeImage<uint16_t>(10, 12, 2, [](int64_t y, int64_t x, int64_t c) { return y * 1000 + x * 10 + c; });
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (uint64_t i = 0; i < 50; ++i) {
    Tensor crop = Apply(*fn, img, i);
    REQUIRE(crop.shape() == Shape{3, 4, 2});
    REQUIRE(crop.dtype() == DType::kUInt16);
    const int64_t top = crop.data<uint16_t>()[0] / 1000, left = crop.data<uint16_t>()[0] / 10 % 100;
    CHECK(top + 3 <= 10);
    CHECK(left + 4 <= 12);
    for (int64_t y = 0; y < 3; ++y)
      for (int64_t x = 0; x < 4; ++x)
        for (int64_t c = 0; c < 2; ++c)
          CHECK(crop.data<uint16_t>()[(y * 4 + x) * 2 + c] == (top + y) * 1000 + (left + x) * 10 + c);
    offsets.insert({top, left});
    // Same seed and element: same window, whichever function object computes it.
    CHECK(Apply(*MakeRandomCropFn(3, 4, 42), img, i) == crop);
  }
  CHECK(offsets.size() > 10);
  int differ = 0;
  for (uint64_t i = 0; i < 20; ++i) differ += Apply(*MakeRandomCropFn(3, 4, 43), img, i) != Apply(*fn, img, i);
  CHECK(differ > 10);
}

TEST_CASE("crops reject images smaller than the window", "[image]") {
  auto fn = MakeRandomCropFn(5, 5, 1);
  CHECK(ApplyError(*fn, Solid(4, 9, {1, 2, 3})) ==
        "random_crop: component 0 (uint8[4, 9, 3]) is smaller than the crop window [5, 5]");
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {-1, 3, 3})).status().message() ==
        "random_crop: component 0 (uint8[?, 3, 3]) is smaller than the crop window [5, 5]");
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {-1, -1, 3}))->DebugString() == "(uint8[5, 5, 3])");
  CHECK(fn->OutputSpec(Spec(DType::kString, {5, 5, 1})).status().message() ==
        "random_crop: component 0 must be an image [height, width, channels], got string[5, 5, 1]");
  Tensor exact = Solid(5, 5, {9});
  CHECK(Apply(*fn, exact) == exact);
  pipeline::Function bad;
  bad.mutable_center_crop()->set_height(3);
  CHECK_FALSE(CreateFunction(bad, FunctionOptions{}).ok());  // width 0
}

// ---- random_flip_left_right ---------------------------------------------------------------

TEST_CASE("random_flip_left_right mirrors about half of the images", "[image]") {
  pipeline::Function spec;
  spec.mutable_random_flip_left_right()->set_seed(5);
  auto fn = Make(spec);
  Tensor img = MakeImage<uint8_t>(2, 3, 3, [](int64_t y, int64_t x, int64_t c) { return y * 30 + x * 3 + c; });
  Tensor mirror = MakeImage<uint8_t>(2, 3, 3, [](int64_t y, int64_t x, int64_t c) { return y * 30 + (2 - x) * 3 + c; });
  int flipped = 0;
  std::vector<bool> decisions;
  for (uint64_t i = 0; i < 200; ++i) {
    Tensor out = Apply(*fn, img, i);
    const bool f = out != img;
    if (f) CHECK(out == mirror);
    flipped += f;
    decisions.push_back(f);
  }
  CHECK(flipped > 70);
  CHECK(flipped < 130);
  auto again = Make(spec);
  for (uint64_t i = 0; i < 200; ++i) CHECK((Apply(*again, img, i) != img) == decisions[i]);

  // Wider pixels (float32 x 2 channels) mirror whole pixels.
  Tensor f32 = MakeImage<float>(1, 4, 2, [](int64_t, int64_t x, int64_t c) { return x + c * 0.5; });
  for (uint64_t i = 0; i < 10; ++i) {
    Tensor out = Apply(*fn, f32, i);
    if (out != f32) CHECK(out == Tensor::FromVector<float>({1, 4, 2}, {3, 3.5f, 2, 2.5f, 1, 1.5f, 0, 0.5f}));
  }
  CHECK(fn->OutputSpec(Spec(DType::kBool, {4, 4, 1}))->DebugString() == "(bool[4, 4, 1])");
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {4, 4, 1, 1})).status().message() ==
        "random_flip_left_right: component 0 must be an image [height, width, channels], got uint8[4, 4, 1, 1]");
}

// ---- normalize ----------------------------------------------------------------------------

static pipeline::Function NormalizeSpec(const std::vector<float>& mean, const std::vector<float>& stddev) {
  pipeline::Function spec;
  for (float m : mean) spec.mutable_normalize()->add_mean(m);
  for (float s : stddev) spec.mutable_normalize()->add_std(s);
  return spec;
}
static std::unique_ptr<Function> MakeNormalizeFn(std::vector<float> mean, std::vector<float> stddev) {
  return Make(NormalizeSpec(mean, stddev));
}

TEST_CASE("normalize subtracts and divides per channel", "[image]") {
  auto fn = MakeNormalizeFn({10, 20, 30}, {2, 4, 5});
  Tensor out = Apply(*fn, Tensor::FromVector<uint8_t>({1, 2, 3}, {12, 24, 35, 10, 20, 30}));
  CHECK(out == Tensor::FromVector<float>({1, 2, 3}, {1, 1, 1, 0, 0, 0}));
  // One value broadcasts over every channel and any rank; std alone scales.
  CHECK(Apply(*MakeNormalizeFn({1}, {2}), Tensor::Vector<int32_t>({1, 3, 5})) == Tensor::Vector<float>({0, 1, 2}));
  CHECK(Apply(*MakeNormalizeFn({}, {255}), Tensor::Scalar<uint8_t>(51)) == Tensor::Scalar<float>(0.2f));
  CHECK(Apply(*MakeNormalizeFn({1, 2}, {2}), Tensor::FromVector<double>({2, 2}, {3, 4, 5, 6})) ==
        Tensor::FromVector<float>({2, 2}, {1, 1, 2, 2}));
  CHECK(fn->OutputSpec(Spec(DType::kUInt8, {-1, -1, 3}))->DebugString() == "(float32[?, ?, 3])");
}

TEST_CASE("normalize matches the formula on long inputs with any channel count", "[image]") {
  for (int64_t c : {1, 3, 5}) {
    std::vector<float> mean, stddev;
    for (int64_t k = 0; k < c; ++k) {
      mean.push_back(static_cast<float>(k));
      stddev.push_back(static_cast<float>(k + 1));
    }
    Tensor img = MakeImage<int16_t>(11, 13, c, [](int64_t y, int64_t x, int64_t ch) { return y * 50 - x * 7 + ch; });
    Tensor out = Apply(*MakeNormalizeFn(mean, stddev), img);
    for (int64_t i = 0; i < img.num_elements(); ++i) {
      const int64_t k = i % c;
      CHECK(out.data<float>()[i] == (static_cast<float>(img.GetAsDouble(i)) - mean[k]) / stddev[k]);
    }
  }
}

TEST_CASE("normalize rejects bad counts, zero std and channel mismatches", "[image]") {
  auto create = [](std::vector<float> mean, std::vector<float> stddev) {
    return CreateFunction(NormalizeSpec(mean, stddev), FunctionOptions{}).status();
  };
  CHECK(create({1, 2, 3}, {1, 2}).message() ==
        "normalize: mean has 3 values and std has 2; each must have 1 value or one per channel");
  CHECK(create({0}, {1, 0, 1}).message() == "normalize: std[1] must be finite and non-zero, got 0");
  CHECK_FALSE(create({}, {}).ok());
  CHECK_FALSE(create({NAN}, {1}).ok());

  auto fn = MakeNormalizeFn({1, 2, 3}, {1});
  CHECK(ApplyError(*fn, Solid(2, 2, {1, 2, 3, 4})) ==
        "normalize: component 0 (uint8[2, 2, 4]) must have 3 channels (last dimension) to match the 3 mean/std values");
  CHECK_FALSE(fn->Apply({Tensor::Scalar<float>(1)}, {}).ok());
  CHECK_FALSE(fn->OutputSpec(Spec(DType::kFloat32, {2, 4})).ok());
  CHECK(fn->OutputSpec(Spec(DType::kFloat32, {2, -1}))->DebugString() == "(float32[2, ?])");
  CHECK(fn->OutputSpec(Spec(DType::kString, {2, 3})).status().message() ==
        "normalize: component 0 must be a numeric tensor, got string[2, 3]");
  CHECK(fn->OutputSpec(Spec(DType::kFloat32, {3})).ok());
  pipeline::Function other_component = NormalizeSpec({0}, {});
  other_component.mutable_normalize()->set_component(2);
  CHECK(Make(other_component)->OutputSpec(Spec(DType::kFloat32, {3})).status().message() ==
        "normalize: component 2 does not exist; the element has 1 component(s)");
}

TEST_CASE("decode_jpeg with a target size decodes at the smallest DCT scale that covers it", "[image]") {
  const Tensor img =
      MakeImage<uint8_t>(270, 480, 3, [](int64_t y, int64_t x, int64_t c) { return (x / 2 + y + c * 40) % 256; });
  const std::string jpeg = Jpeg(img, 95);
  // 480x270 at 2/8 is 120x68 (rounded up): the smallest scale covering 100x60.
  auto small = DecodeJpegImage(jpeg, 3, kMaxImagePixels, nullptr, false, 60, 100);
  REQUIRE(small.ok());
  CHECK(small->shape() == Shape{68, 120, 3});
  auto exact = DecodeJpegImage(jpeg, 3, kMaxImagePixels, nullptr, false, 68, 120);
  REQUIRE(exact.ok());
  CHECK(exact->shape() == Shape{68, 120, 3});
  auto next = DecodeJpegImage(jpeg, 3, kMaxImagePixels, nullptr, false, 69, 120);
  REQUIRE(next.ok());
  CHECK(next->shape() == Shape{102, 180, 3});  // 3/8
  // A target larger than the image: the full size.
  auto full = DecodeJpegImage(jpeg, 0, kMaxImagePixels, nullptr, false, 1000, 1000);
  REQUIRE(full.ok());
  CHECK(full->shape() == Shape{270, 480, 3});
}

TEST_CASE("decode_jpeg with resize_height/width gives resize's float32 image, close to decode + resize", "[image]") {
  const Tensor img = MakeImage<uint8_t>(
      270, 480, 3, [](int64_t y, int64_t x, int64_t c) { return x * 200 / 480 + y * 50 / 270 + c * 2; });
  const Tensor jpeg = Tensor::String(Jpeg(img, 95));
  pipeline::Function fused;
  fused.mutable_decode_jpeg()->set_channels(3);
  fused.mutable_decode_jpeg()->set_resize_height(56);
  fused.mutable_decode_jpeg()->set_resize_width(56);
  pipeline::Function resize;
  resize.mutable_resize()->set_height(56);
  resize.mutable_resize()->set_width(56);
  const Tensor a = Apply(*Make(fused), jpeg);
  const Tensor b = Apply(*Make(resize), Apply(*MakeDecode(3), jpeg));
  REQUIRE(a.dtype() == DType::kFloat32);
  REQUIRE(a.shape() == Shape{56, 56, 3});
  REQUIRE(b.shape() == a.shape());
  // A smooth image: the scaled IDCT's averages and bilinear samples nearly agree.
  double worst = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) worst = std::max(worst, std::abs(a.GetAsDouble(i) - b.GetAsDouble(i)));
  CHECK(worst < 4.0);
  // Its output spec says so too.
  auto spec = Make(fused)->OutputSpec(ElementSpec{{TensorSpec{DType::kString, {}, false}}});
  REQUIRE(spec.ok());
  CHECK(spec->components[0].dtype == DType::kFloat32);
  CHECK(spec->components[0].shape == Shape{56, 56, 3});
  pipeline::Function half;
  half.mutable_decode_jpeg()->set_resize_height(56);
  auto bad = CreateFunction(half, FunctionOptions{});
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()) == "decode_jpeg: resize_height and resize_width go together");
}
