#include <google/protobuf/text_format.h>
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>

#include "lib/functions/function.h"
#include "proto/example.pb.h"

using namespace tfdata;

namespace {

pipeline::ParseExample Spec(const std::string& text) {
  pipeline::ParseExample spec;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(text, &spec));
  return spec;
}

std::unique_ptr<Function> Make(const std::string& text) {
  auto fn = MakeParseExample(Spec(text));
  REQUIRE(fn.ok());
  return std::move(*fn);
}

std::string MakeCreateError(const std::string& text) {
  auto fn = MakeParseExample(Spec(text));
  REQUIRE_FALSE(fn.ok());
  return std::string(fn.status().message());
}

std::string Serialize(const std::string& example_text) {
  tensorflow::Example ex;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(example_text, &ex));
  return ex.SerializeAsString();
}

absl::StatusOr<Element> Parse(const Function& fn, const std::string& serialized) {
  return fn.Apply({Tensor::String(serialized)}, FunctionContext{});
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

const char* kExample = R"(
  features {
    feature { key: "id" value { int64_list { value: 7 } } }
    feature { key: "xy" value { float_list { value: [1.5, -2] } } }
    feature { key: "m" value { int64_list { value: [1, 2, 3, 4] } } }
    feature { key: "tags" value { bytes_list { value: ["a", "bc", "d"] } } }
  })";

}  // namespace

TEST_CASE("parse_example yields one tensor per feature in spec order", "[parse_example]") {
  auto fn = Make(R"(
    feature { name: "tags" dtype: STRING var_len: true }
    feature { name: "id" dtype: INT64 }
    feature { name: "xy" dtype: FLOAT32 shape: 2 }
    feature { name: "m" dtype: INT64 shape: [2, 2] })");
  auto out = Parse(*fn, Serialize(kExample));
  REQUIRE(out.ok());
  REQUIRE(out->size() == 4);
  CHECK((*out)[0] == Tensor::Strings({3}, {"a", "bc", "d"}));
  CHECK((*out)[1] == Tensor::Scalar<int64_t>(7));
  CHECK((*out)[2] == Tensor::Vector<float>({1.5f, -2.0f}));
  CHECK((*out)[3] == Tensor::FromVector<int64_t>({2, 2}, {1, 2, 3, 4}));
}

TEST_CASE("parse_example replaces only its component and reports the output spec", "[parse_example]") {
  auto fn = Make(R"(component: 1
    feature { name: "id" dtype: INT64 }
    feature { name: "tags" dtype: STRING var_len: true })");
  Element in = {Tensor::Scalar<int32_t>(5), Tensor::String(Serialize(kExample)), Tensor::Scalar<float>(2)};
  auto out = fn->Apply(in, FunctionContext{});
  REQUIRE(out.ok());
  CHECK(ElementTypeString(*out) == "(int32[], int64[], string[3], float32[])");

  ElementSpec spec = SpecOf(in);
  auto out_spec = fn->OutputSpec(spec);
  REQUIRE(out_spec.ok());
  CHECK(out_spec->DebugString() == "(int32[], int64[], string[?], float32[])");
  CHECK(fn->OutputSpec(ElementSpec::Unknown())->unknown);

  auto bad = fn->OutputSpec(SpecOf({Tensor::Scalar<int32_t>(5), Tensor::Scalar<int64_t>(1)}));
  REQUIRE_FALSE(bad.ok());
  CHECK(std::string(bad.status().message()).find("component 1 must be a string scalar") != std::string::npos);
  CHECK_FALSE(fn->OutputSpec(SpecOf({Tensor::String("x")})).ok());  // no component 1
  CHECK_FALSE(fn->Apply({Tensor::Scalar<int32_t>(5), Tensor::Strings({1}, {"x"})}, FunctionContext{}).ok());
}

TEST_CASE("parse_example uses defaults for missing features", "[parse_example]") {
  auto fn = Make(R"(
    feature { name: "absent" dtype: FLOAT32 shape: 2 default_value { float_values: [0.5, 1] } }
    feature { name: "absent_i" dtype: INT64 default_value { int_values: -1 } }
    feature { name: "absent_f" dtype: FLOAT32 default_value { int_values: 3 } }
    feature { name: "absent_s" dtype: STRING var_len: true default_value { } }
    feature { name: "id" dtype: INT64 default_value { int_values: 99 } })");
  auto out = Parse(*fn, Serialize(kExample));
  REQUIRE(out.ok());
  CHECK((*out)[0] == Tensor::Vector<float>({0.5f, 1.0f}));
  CHECK((*out)[1] == Tensor::Scalar<int64_t>(-1));
  CHECK((*out)[2] == Tensor::Scalar<float>(3.0f));
  CHECK((*out)[3] == Tensor::Strings({0}, {}));
  CHECK((*out)[4] == Tensor::Scalar<int64_t>(7));  // present: the default is not used
}

TEST_CASE("parse_example errors name the feature", "[parse_example]") {
  const std::string ex = Serialize(kExample);
  auto missing = Parse(*Make(R"(feature { name: "x" dtype: INT64 })"), ex);
  REQUIRE_FALSE(missing.ok());
  CHECK(std::string(missing.status().message()) == "parse_example: feature 'x' missing and has no default");

  auto kind = Parse(*Make(R"(feature { name: "id" dtype: FLOAT32 })"), ex);
  REQUIRE_FALSE(kind.ok());
  CHECK(std::string(kind.status().message()) ==
        "parse_example: feature 'id' is a int64_list but the spec's dtype float32 needs a float_list");

  auto count = Parse(*Make(R"(feature { name: "xy" dtype: FLOAT32 shape: 3 })"), ex);
  REQUIRE_FALSE(count.ok());
  CHECK(std::string(count.status().message()) ==
        "parse_example: feature 'xy' in the example has 2 value(s); expected 3 for shape [3]");

  auto garbage = Parse(*Make(R"(feature { name: "id" dtype: INT64 })"), "\xff\xff\xff");
  REQUIRE_FALSE(garbage.ok());
  CHECK(std::string(garbage.status().message()) == "parse_example: component 0 is not a serialized tf.train.Example");

  auto not_string = Make(R"(feature { name: "id" dtype: INT64 })")->Apply({Tensor::Scalar<int64_t>(1)}, {});
  REQUIRE_FALSE(not_string.ok());
  CHECK(std::string(not_string.status().message()).find("must be a string scalar") != std::string::npos);
}

TEST_CASE("parse_example validates its spec at creation", "[parse_example]") {
  CHECK(MakeCreateError("") == "parse_example: no features given (add `feature { name: ... }`)");
  CHECK(MakeCreateError(R"(feature { dtype: INT64 })") == "parse_example: feature 0 has no name");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: FLOAT64 })") ==
        "parse_example: feature 'a' dtype must be INT64, FLOAT32 or STRING, got FLOAT64");
  CHECK(MakeCreateError(R"(feature { name: "a" })") ==
        "parse_example: feature 'a' dtype must be INT64, FLOAT32 or STRING, got DTYPE_UNSPECIFIED");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: INT64 } feature { name: "a" dtype: STRING })") ==
        "parse_example: feature 'a' is listed twice");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: INT64 shape: 2 default_value { int_values: 1 } })") ==
        "parse_example: feature 'a' default_value has 1 value(s); expected 2 for shape [2]");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: INT64 default_value { string_values: "x" } })") ==
        "parse_example: feature 'a' default_value has string_values but the feature's dtype is int64");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: INT64 default_value { float_values: 1.5 } })") ==
        "parse_example: feature 'a' default_value 1.5 is not an int64");
  CHECK(MakeCreateError(R"(feature { name: "a" dtype: INT64 shape: -1 })") ==
        "parse_example: feature 'a' has an invalid shape [-1]");
}

// Wire bytes derived by hand from the protobuf encoding (tag = field << 3 | wire type):
//   Example.features (1, LEN)          0a 29
//     Features.feature entry (1, LEN)  0a 0b  key (1, LEN) 0a 01 'a'  value (2, LEN) 12 06
//       Feature.int64_list (3, LEN)    1a 04  Int64List.value packed (1, LEN) 0a 02 01 02
//     entry                            0a 0d  0a 01 'f'  12 08
//       Feature.float_list (2, LEN)    12 06  FloatList.value packed 0a 04 + 1.5f LE (00 00 c0 3f)
//     entry                            0a 0b  0a 01 's'  12 06
//       Feature.bytes_list (1, LEN)    0a 04  BytesList.value (1, LEN) 0a 02 'h' 'i'
TEST_CASE("a hand-encoded tf.train.Example parses (wire compatibility)", "[parse_example]") {
  const std::string wire =
      Bytes({0x0a, 0x29,                                                                               //
             0x0a, 0x0b, 0x0a, 0x01, 'a', 0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02,              //
             0x0a, 0x0d, 0x0a, 0x01, 'f', 0x12, 0x08, 0x12, 0x06, 0x0a, 0x04, 0x00, 0x00, 0xc0, 0x3f,  //
             0x0a, 0x0b, 0x0a, 0x01, 's', 0x12, 0x06, 0x0a, 0x04, 0x0a, 0x02, 'h',  'i'});
  auto fn = Make(R"(
    feature { name: "a" dtype: INT64 var_len: true }
    feature { name: "f" dtype: FLOAT32 }
    feature { name: "s" dtype: STRING })");
  auto out = Parse(*fn, wire);
  REQUIRE(out.ok());
  CHECK((*out)[0] == Tensor::Vector<int64_t>({1, 2}));
  CHECK((*out)[1] == Tensor::Scalar<float>(1.5f));
  CHECK((*out)[2] == Tensor::String("hi"));

  // The generated message encodes a one-feature Example to the same bytes we derived.
  tensorflow::Example ex;
  tensorflow::Int64List* ints = (*ex.mutable_features()->mutable_feature())["a"].mutable_int64_list();
  ints->add_value(1);
  ints->add_value(2);
  CHECK(ex.SerializeAsString() ==
        Bytes({0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'a', 0x12, 0x06, 0x1a, 0x04, 0x0a, 0x02, 0x01, 0x02}));

  // Writers may also emit the unpacked encoding (one tag per value: 08 01 08 02).
  const std::string unpacked =
      Bytes({0x0a, 0x0d, 0x0a, 0x0b, 0x0a, 0x01, 'a', 0x12, 0x06, 0x1a, 0x04, 0x08, 0x01, 0x08, 0x02});
  auto out2 = Parse(*Make(R"(feature { name: "a" dtype: INT64 shape: 2 })"), unpacked);
  REQUIRE(out2.ok());
  CHECK((*out2)[0] == Tensor::Vector<int64_t>({1, 2}));
}

TEST_CASE("parse_example: a feature with no list is missing to a fixed spec, empty to var_len (as TF)",
          "[parse_example]") {
  const std::string example = Serialize(R"(features { feature { key: "a" value {} } })");
  auto with_default =
      Make(R"(feature { name: "a" dtype: INT64 default_value { dtype: INT64 scalar: true int_values: -1 } })");
  auto out = Parse(*with_default, example);
  REQUIRE(out.ok());
  CHECK((*out)[0] == Tensor::Scalar<int64_t>(-1));
  auto required = Make(R"(feature { name: "a" dtype: FLOAT32 shape: 0 })");
  auto missing = Parse(*required, example);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("feature 'a' missing and has no default"));
  auto var_len = Make(R"(feature { name: "a" dtype: STRING var_len: true })");
  auto empty = Parse(*var_len, example);
  REQUIRE(empty.ok());
  CHECK((*empty)[0] == Tensor::Strings({0}, {}));
}
