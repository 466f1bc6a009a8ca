// Pixel parity with TensorFlow: decode_jpeg (both dct_methods), resize (bilinear and nearest),
// center_crop, random_crop (the window property), normalize and parse_example, each against
// outputs that TensorFlow produced (tests/fixtures/tf: the inputs, TF's outputs, the manifest;
// bench/tf_fixtures/make_fixtures.py made them, with the TF version its header names). Each op's
// largest difference is printed and bounded; docs/pipeline.md records them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "lib/functions/function.h"
#include "tests/test_util.h"

using namespace tfdata;

namespace {

const std::string kDir = std::string(TFDATA_SOURCE_DIR) + "/tests/fixtures/tf/";

using Fields = std::map<std::string, std::string>;

// The manifest's lines of one kind, as key=value maps.
std::vector<Fields> Lines(const std::string& kind) {
  std::vector<Fields> out;
  std::istringstream in(testing::ReadFile(kDir + "manifest.txt"));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> tokens = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (tokens.empty() || tokens[0] != kind) continue;
    Fields f;
    for (size_t i = 1; i < tokens.size(); ++i) {
      const size_t eq = tokens[i].find('=');
      REQUIRE(eq != std::string::npos);
      f[tokens[i].substr(0, eq)] = tokens[i].substr(eq + 1);
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Fields> Cases(const std::string& op) {
  std::vector<Fields> out;
  for (Fields& f : Lines("case")) {
    if (f.at("op") == op) out.push_back(std::move(f));
  }
  REQUIRE(!out.empty());
  return out;
}

Shape ParseShape(const std::string& s) {
  Shape shape;
  if (s == "scalar") return shape;
  for (absl::string_view d : absl::StrSplit(s, ',')) {
    int64_t v = 0;
    REQUIRE(absl::SimpleAtoi(d, &v));
    shape.push_back(v);
  }
  return shape;
}

DType ParseDType(const std::string& s) {
  if (s == "uint8") return DType::kUInt8;
  if (s == "int64") return DType::kInt64;
  if (s == "float32") return DType::kFloat32;
  REQUIRE(s == "string");
  return DType::kString;
}

// A tensor file: raw little-endian values, or for strings a uint32 length and the bytes each.
Tensor Load(const std::string& file, DType dtype, const Shape& shape) {
  const std::string bytes = testing::ReadFile(kDir + file);
  if (dtype == DType::kString) {
    std::vector<std::string> values;
    for (size_t at = 0; at < bytes.size();) {
      REQUIRE(at + 4 <= bytes.size());
      uint32_t n = 0;
      std::memcpy(&n, bytes.data() + at, 4);
      REQUIRE(at + 4 + n <= bytes.size());
      values.emplace_back(bytes.substr(at + 4, n));
      at += 4 + n;
    }
    return Tensor::Strings(shape, std::move(values));
  }
  Tensor t = Tensor::Zeros(dtype, shape);
  REQUIRE(bytes.size() == t.nbytes());
  if (!bytes.empty()) std::memcpy(t.mutable_raw(), bytes.data(), bytes.size());
  return t;
}

Tensor Expected(const Fields& c) {
  return Load(c.at("expected"), ParseDType(c.at("dtype")), ParseShape(c.at("shape")));
}

// The input of a case: an encoded file (a string scalar) or a tensor file.
Tensor Input(const Fields& c) {
  const std::string& name = c.at("input");
  for (const Fields& t : Lines("tensor")) {
    if (t.at("file") == name) return Load(name, ParseDType(t.at("dtype")), ParseShape(t.at("shape")));
  }
  return Tensor::String(testing::ReadFile(kDir + name));
}

Tensor Run(const pipeline::Function& spec, Tensor input) {
  auto fn = CreateFunction(spec, FunctionOptions{});
  INFO(fn.status().ToString());
  REQUIRE(fn.ok());
  auto out = (*fn)->Apply({std::move(input)}, FunctionContext{});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  return (*out)[0];
}

// The largest absolute difference, after checking dtype and shape (NaN equals NaN).
double MaxDiff(const Tensor& got, const Tensor& want) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  double worst = 0;
  for (int64_t i = 0; i < got.num_elements(); ++i) {
    double a = 0, b = 0;
    switch (got.dtype()) {
      case DType::kUInt8: a = got.data<uint8_t>()[i], b = want.data<uint8_t>()[i]; break;
      case DType::kInt64:
        if (got.data<int64_t>()[i] != want.data<int64_t>()[i]) return INFINITY;
        continue;
      case DType::kFloat32: {
        const float x = got.data<float>()[i], y = want.data<float>()[i];
        if (std::isnan(x) || std::isnan(y)) {
          if (std::isnan(x) != std::isnan(y)) return INFINITY;
          continue;
        }
        if (x == y) continue;  // infinities, and -0 == 0
        a = x, b = y;
        break;
      }
      default: FAIL("unexpected dtype");
    }
    worst = std::max(worst, std::abs(a - b));
  }
  return worst;
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> out;
  for (absl::string_view v : absl::StrSplit(s, ',')) {
    float f = 0;
    REQUIRE(absl::SimpleAtof(v, &f));
    out.push_back(f);
  }
  return out;
}

}  // namespace

TEST_CASE("TF parity: decode_jpeg matches tf.io.decode_jpeg for both dct_methods", "[parity]") {
  std::map<std::string, double> worst;
  for (const Fields& c : Cases("decode_jpeg")) {
    INFO(c.at("id"));
    pipeline::Function spec;
    spec.mutable_decode_jpeg()->set_channels(std::stoi(c.at("channels")));
    if (c.at("dct_method") == "INTEGER_ACCURATE") {
      spec.mutable_decode_jpeg()->set_dct_method(pipeline::DecodeJpeg::INTEGER_ACCURATE);
    } else {
      REQUIRE(c.at("dct_method") == "INTEGER_FAST");  // the default: nothing set
    }
    const double d = MaxDiff(Run(spec, Input(c)), Expected(c));
    worst[c.at("dct_method")] = std::max(worst[c.at("dct_method")], d);
    CHECK(d == 0);
  }
  WARN("decode_jpeg largest difference: INTEGER_FAST " << worst["INTEGER_FAST"] << ", INTEGER_ACCURATE "
                                                       << worst["INTEGER_ACCURATE"]);
}

TEST_CASE("TF parity: resize matches tf.image.resize, bilinear and nearest, antialias off", "[parity]") {
  std::map<std::string, double> worst;
  for (const Fields& c : Cases("resize")) {
    INFO(c.at("id"));
    REQUIRE(c.at("antialias") == "0");
    pipeline::Function spec;
    spec.mutable_resize()->set_height(std::stoll(c.at("height")));
    spec.mutable_resize()->set_width(std::stoll(c.at("width")));
    if (c.at("method") == "nearest") spec.mutable_resize()->set_method(pipeline::Resize::NEAREST);
    const double d = MaxDiff(Run(spec, Input(c)), Expected(c));
    worst[c.at("method")] = std::max(worst[c.at("method")], d);
    if (c.at("method") == "nearest") {
      CHECK(d == 0);
    } else {
      CHECK(d <= 1e-3);  // float rounding only; an index or weight off would be >= 0.1
    }
  }
  WARN("resize largest difference: bilinear " << worst["bilinear"] << ", nearest " << worst["nearest"]);
}

TEST_CASE("TF parity: center_crop matches tf.image.resize_with_crop_or_pad", "[parity]") {
  for (const Fields& c : Cases("center_crop")) {
    INFO(c.at("id"));
    pipeline::Function spec;
    spec.mutable_center_crop()->set_height(std::stoll(c.at("height")));
    spec.mutable_center_crop()->set_width(std::stoll(c.at("width")));
    CHECK(MaxDiff(Run(spec, Input(c)), Expected(c)) == 0);
  }
}

TEST_CASE("TF parity: random_crop gives a window of the input", "[parity]") {
  for (const Fields& c : Cases("random_crop")) {
    INFO(c.at("id"));
    const Tensor in = Input(c);
    const int64_t h = std::stoll(c.at("height")), w = std::stoll(c.at("width"));
    const int64_t ih = in.shape()[0], iw = in.shape()[1], ch = in.shape()[2];
    for (uint64_t seed = 1; seed <= 8; ++seed) {
      pipeline::Function spec;
      spec.mutable_random_crop()->set_height(h);
      spec.mutable_random_crop()->set_width(w);
      spec.mutable_random_crop()->set_seed(seed);
      const Tensor out = Run(spec, in);
      REQUIRE(out.shape() == Shape{h, w, ch});
      bool found = false;
      for (int64_t top = 0; top + h <= ih && !found; ++top) {
        for (int64_t left = 0; left + w <= iw && !found; ++left) {
          bool same = true;
          for (int64_t y = 0; y < h && same; ++y) {
            same = std::memcmp(out.data<uint8_t>() + y * w * ch, in.data<uint8_t>() + ((top + y) * iw + left) * ch,
                               static_cast<size_t>(w * ch)) == 0;
          }
          found = same;
        }
      }
      CHECK(found);
    }
  }
}

TEST_CASE("TF parity: normalize matches (x - mean) / std in float32", "[parity]") {
  double worst = 0;
  for (const Fields& c : Cases("normalize")) {
    INFO(c.at("id"));
    pipeline::Function spec;
    for (float m : Floats(c.at("mean"))) spec.mutable_normalize()->add_mean(m);
    for (float s : Floats(c.at("std"))) spec.mutable_normalize()->add_std(s);
    const double d = MaxDiff(Run(spec, Input(c)), Expected(c));
    worst = std::max(worst, d);
    CHECK(d <= 1e-5);
  }
  WARN("normalize largest difference: " << worst);
}

TEST_CASE("TF parity: parse_example matches tf.io.parse_single_example", "[parity]") {
  for (const Fields& c : Cases("parse_example")) {
    INFO(c.at("id"));
    pipeline::Function spec;
    pipeline::FeatureSpec* f = spec.mutable_parse_example()->add_feature();
    f->set_name(c.at("feature"));
    const std::string& dtype = c.at("feature_dtype");
    f->set_dtype(dtype == "int64" ? pipeline::INT64 : dtype == "float32" ? pipeline::FLOAT32 : pipeline::STRING);
    f->set_var_len(c.at("var_len") == "1");
    if (!f->var_len() && c.at("spec_shape") != "scalar") {
      for (int64_t d : ParseShape(c.at("spec_shape"))) f->add_shape(d);
    }
    if (c.at("default") != "none") {
      const Shape shape = ParseShape(c.at("spec_shape"));
      pipeline::TensorValue* v = f->mutable_default_value();
      v->set_dtype(f->dtype());
      if (shape.empty()) v->set_scalar(true);
      for (int64_t d : shape) v->add_shape(d);
      for (absl::string_view item : absl::StrSplit(c.at("default"), ',')) {
        if (dtype == "int64") {
          int64_t x = 0;
          REQUIRE(absl::SimpleAtoi(item, &x));
          v->add_int_values(x);
        } else if (dtype == "float32") {
          float x = 0;
          REQUIRE(absl::SimpleAtof(item, &x));
          v->add_float_values(x);
        } else {
          REQUIRE(absl::ConsumePrefix(&item, "hex:"));
          std::string bytes;
          for (size_t i = 0; i + 1 < item.size(); i += 2) {
            bytes.push_back(static_cast<char>(std::stoi(std::string(item.substr(i, 2)), nullptr, 16)));
          }
          v->add_string_values(bytes);
        }
      }
    }
    const Tensor got = Run(spec, Input(c));
    const Tensor want = Expected(c);
    if (want.dtype() == DType::kString) {
      CHECK(got == want);
    } else {
      CHECK(MaxDiff(got, want) == 0);
    }
  }
}
