#include <cstring>
#include <random>

#include <catch2/catch.hpp>

#include "lib/core/element_codec.h"

using namespace tfdata;

namespace {

std::string MustEncode(const Element& e) {
  std::string out;
  auto s = EncodeElement(e, &out);
  INFO(s.ToString());
  REQUIRE(s.ok());
  CHECK(out.size() == EncodedSize(e));
  return out;
}

std::shared_ptr<Buffer> ToBuffer(const std::string& bytes) {
  auto b = Buffer::Allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(b->mutable_data(), bytes.data(), bytes.size());
  return b;
}

void CheckRoundTrip(const Element& e) {
  const std::string frame = MustEncode(e);
  auto copied = DecodeElement(std::string_view(frame));
  INFO(copied.status().ToString());
  REQUIRE(copied.ok());
  CHECK(*copied == e);
  auto aliased = DecodeElement(ToBuffer(frame));
  INFO(aliased.status().ToString());
  REQUIRE(aliased.ok());
  CHECK(*aliased == e);
}

// One component of every dtype, with values that exercise each byte.
Element EveryDType() {
  return {
      Tensor::Vector<bool>({true, false, true}),
      Tensor::Vector<int8_t>({-128, 0, 127}),
      Tensor::Vector<int16_t>({-32768, 1, 32767}),
      Tensor::Vector<int32_t>({INT32_MIN, 2, INT32_MAX}),
      Tensor::Vector<int64_t>({INT64_MIN, 3, INT64_MAX}),
      Tensor::Vector<uint8_t>({0, 1, 255}),
      Tensor::Vector<uint16_t>({0, 1, 65535}),
      Tensor::Vector<uint32_t>({0, 1, UINT32_MAX}),
      Tensor::Vector<uint64_t>({0, 1, UINT64_MAX}),
      Tensor::Vector<float>({-1.5f, 0.0f, 3.25e10f}),
      Tensor::Vector<double>({-1e300, 0.5, 1e-300}),
      Tensor::Strings({3}, {"a", "", "xyz"}),
  };
}

std::string ErrorOf(std::string_view frame) {
  auto d = DecodeElement(frame);
  REQUIRE_FALSE(d.ok());
  return std::string(d.status().message());
}

}  // namespace

TEST_CASE("codec round trips every dtype", "[codec]") {
  const Element all = EveryDType();
  CheckRoundTrip(all);
  for (const Tensor& t : all) CheckRoundTrip({t});
}

TEST_CASE("codec round trips scalars, empty tensors and rank 3", "[codec]") {
  CheckRoundTrip(
      {Tensor::Scalar<int64_t>(42), Tensor::Scalar<bool>(true), Tensor::String("s"), Tensor::Scalar<double>(2.5)});
  CheckRoundTrip(
      {Tensor::Zeros(DType::kInt64, {0}), Tensor::Zeros(DType::kFloat32, {2, 0, 3}), Tensor::Strings({0}, {})});
  CheckRoundTrip({Tensor::FromVector<uint8_t>({2, 3, 4}, std::vector<uint8_t>(24, 7)),
                  Tensor::FromVector<float>({1, 2, 3}, {1, 2, 3, 4, 5, 6})});
  CheckRoundTrip({});  // an element with no components
}

TEST_CASE("codec round trips strings with embedded NULs and binary bytes", "[codec]") {
  std::string binary;
  for (int i = 0; i < 256; ++i) binary.push_back(static_cast<char>(i));
  const std::string big(300, 'q');  // a length that needs a two-byte varint
  CheckRoundTrip({Tensor::Strings({2, 2}, {std::string("a\0b", 3), binary, "", big})});
}

TEST_CASE("codec frame layout: magic, counts and 8-byte aligned payloads", "[codec]") {
  const std::string frame = MustEncode({Tensor::Scalar<int32_t>(0x01020304), Tensor::Scalar<int8_t>(5)});
  // magic, count, dtype, rank, pad to 8, payload, dtype, rank, pad to 16, payload.
  const std::string want = std::string("\xE1\x02\x04\x00\x00\x00\x00\x00\x04\x03\x02\x01\x02\x00\x00\x00\x05", 17);
  CHECK(frame == want);
}

TEST_CASE("codec EncodeElement appends and aligns relative to the frame start", "[codec]") {
  const Element e = EveryDType();
  std::string out = "abc";
  REQUIRE(EncodeElement(e, &out).ok());
  CHECK(out.substr(0, 3) == "abc");
  CHECK(out.substr(3) == MustEncode(e));
}

TEST_CASE("codec decoding from a Buffer aliases numeric payloads", "[codec]") {
  const Element e = {Tensor::Vector<int64_t>({1, 2, 3}), Tensor::String("x"), Tensor::Vector<float>({1, 2}),
                     Tensor::Vector<int16_t>({7})};
  auto frame = ToBuffer(MustEncode(e));
  auto d = DecodeElement(frame);
  REQUIRE(d.ok());
  CHECK(*d == e);
  CHECK((*d)[0].buffer().get() == frame.get());
  CHECK((*d)[2].buffer().get() == frame.get());
  CHECK((*d)[3].buffer().get() == frame.get());

  // The string_view decoder copies.
  auto c = DecodeElement(std::string_view(reinterpret_cast<const char*>(frame->data()), frame->size()));
  REQUIRE(c.ok());
  CHECK((*c)[0].buffer().get() != frame.get());

  // A frame that starts misaligned in memory is decoded by copying.
  const std::string bytes = MustEncode(e);
  auto backing = Buffer::Allocate(bytes.size() + 1);
  std::memcpy(backing->mutable_data() + 1, bytes.data(), bytes.size());
  auto shifted = Buffer::Wrap(backing->data() + 1, bytes.size(), backing);
  auto m = DecodeElement(shifted);
  REQUIRE(m.ok());
  CHECK(*m == e);
  CHECK((*m)[0].buffer().get() != shifted.get());
  CHECK_FALSE(DecodeElement(std::shared_ptr<Buffer>()).ok());
}

std::string Join(const std::vector<std::pair<const void*, size_t>>& ranges) {
  std::string joined;
  for (const auto& [p, n] : ranges) joined.append(static_cast<const char*>(p), n);
  return joined;
}

TEST_CASE("codec: FrameWriter ranges concatenate to the frames and reference large payloads", "[codec]") {
  std::vector<int64_t> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i * 31);
  const Element e = {Tensor::Scalar<int8_t>(1), Tensor::Vector<int64_t>(big), Tensor::String("mid"),
                     Tensor::Vector<float>(std::vector<float>(2000, 0.25f)), Tensor::Vector<int32_t>({9})};
  FrameWriter w;
  w.AppendBytes("hdr", 3);
  REQUIRE(w.AppendElement(e).ok());
  w.AppendBytes("|", 1);
  REQUIRE(w.AppendElement(e).ok());
  const auto ranges = w.Ranges();
  const std::string frame = MustEncode(e);
  CHECK(Join(ranges) == "hdr" + frame + "|" + frame);
  CHECK(w.size() == 4 + 2 * frame.size());
  int references = 0;
  size_t copied = 0;
  for (const auto& [p, n] : ranges) {
    if (p == e[1].raw()) ++references;
    if (p != e[1].raw() && p != e[3].raw()) copied += n;
  }
  CHECK(references == 2);
  CHECK(copied < 200);  // the large payloads were not copied

  // Small elements come out as one range of the writer's storage.
  FrameWriter small;
  for (int i = 0; i < 3; ++i) REQUIRE(small.AppendElement({Tensor::Scalar<int64_t>(i)}).ok());
  REQUIRE(small.Ranges().size() == 1);
  CHECK(Join(small.Ranges()) == MustEncode({Tensor::Scalar<int64_t>(0)}) + MustEncode({Tensor::Scalar<int64_t>(1)}) +
                                    MustEncode({Tensor::Scalar<int64_t>(2)}));
  FrameWriter bad;
  CHECK_FALSE(bad.AppendElement({Tensor::Zeros(DType::kInt8, Shape(33, 1))}).ok());
}

TEST_CASE("codec: EncodeElementTo writes EncodeElement's bytes in place, and no more", "[codec]") {
  std::vector<int64_t> big(5000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i * 31);
  for (const Element& e :
       {EveryDType(), Element{Tensor::Scalar<int64_t>(7)}, Element{},
        Element{Tensor::Vector<int64_t>(big), Tensor::String("mid"), Tensor::Zeros(DType::kFloat32, {0, 3})}}) {
    const std::string frame = MustEncode(e);
    REQUIRE(EncodedSize(e) == frame.size());
    std::string dst(frame.size() + 16, '\x5a');  // guard bytes after the frame
    auto written = EncodeElementTo(e, reinterpret_cast<uint8_t*>(dst.data()));
    REQUIRE(written.ok());
    CHECK(*written == frame.size());
    CHECK(dst.substr(0, frame.size()) == frame);
    CHECK(dst.substr(frame.size()) == std::string(16, '\x5a'));
  }
  uint8_t unused[8];
  CHECK(absl::IsInvalidArgument(EncodeElementTo({Tensor::Zeros(DType::kInt8, Shape(33, 1))}, unused).status()));
}

TEST_CASE("codec: decoding a frame inside a larger buffer aliases it at the offset", "[codec]") {
  const Element e = {Tensor::Vector<int64_t>({1, 2, 3}), Tensor::String("s")};
  const std::string frame = MustEncode(e);
  auto buffer = Buffer::Allocate(64 + frame.size() + 5);
  std::memcpy(buffer->mutable_data() + 64, frame.data(), frame.size());
  auto d = DecodeElement(buffer, 64, frame.size());
  REQUIRE(d.ok());
  CHECK(*d == e);
  CHECK((*d)[0].buffer() == buffer);
  CHECK((*d)[0].raw() > buffer->data() + 64);
  // A range past the end, and a frame that does not fill its range, are errors.
  CHECK(absl::IsInvalidArgument(DecodeElement(buffer, 64, frame.size() + 6).status()));
  CHECK(absl::IsDataLoss(DecodeElement(buffer, 64, frame.size() + 1).status()));
}

TEST_CASE("codec rejects tensors of rank above 32", "[codec]") {
  std::string out;
  CHECK_FALSE(EncodeElement({Tensor::Zeros(DType::kInt8, Shape(33, 1))}, &out).ok());
  CheckRoundTrip({Tensor::Zeros(DType::kInt8, Shape(32, 1))});
}

TEST_CASE("codec: every truncation of a valid frame fails cleanly", "[codec]") {
  Element e = EveryDType();
  e.push_back(Tensor::FromVector<int32_t>({2, 1, 2}, {1, 2, 3, 4}));
  const std::string frame = MustEncode(e);
  for (size_t n = 0; n < frame.size(); ++n) {
    auto d = DecodeElement(std::string_view(frame.data(), n));
    INFO("prefix " << n);
    REQUIRE_FALSE(d.ok());
    CHECK(d.status().code() == absl::StatusCode::kDataLoss);
    CHECK_THAT(std::string(d.status().message()), Catch::StartsWith("element frame: "));
    CHECK_FALSE(DecodeElement(ToBuffer(frame.substr(0, n))).ok());
  }
  CHECK_THAT(ErrorOf(frame + "x"), Catch::Contains("1 trailing bytes"));
}

TEST_CASE("codec: malformed frames name the problem and the byte", "[codec]") {
  using namespace std::string_literals;
  CHECK_THAT(ErrorOf("\x00\x00"s), Catch::Contains("bad magic byte 0x00 (expected 0xe1) at byte 0"));
  CHECK_THAT(ErrorOf("\xE1\xff\xff\xff\xff\x0f"s), Catch::Contains("components cannot fit"));
  CHECK_THAT(ErrorOf("\xE1\x01\x0d\x00"s), Catch::Contains("invalid dtype 13 at byte 2"));
  CHECK_THAT(ErrorOf("\xE1\x01\x00\x00"s), Catch::Contains("invalid dtype 0"));
  CHECK_THAT(ErrorOf("\xE1\x01\x05\x21"s), Catch::Contains("rank 33 exceeds 32 at byte 3"));
  // A huge claimed dimension must not allocate: it fails against the remaining bytes.
  CHECK_THAT(ErrorOf("\xE1\x01\x05\x01\xff\xff\xff\xff\xff\xff\x01\0\0\0\0\0"s),
             Catch::Contains("only 0 bytes remain"));
  CHECK_THAT(ErrorOf("\xE1\x01\x0c\x01\xff\xff\xff\xff\x0f"s), Catch::Contains("strings cannot fit"));
  // Dims above INT64_MAX, products that overflow, varints longer than 64 bits.
  CHECK_THAT(ErrorOf("\xE1\x01\x05\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"s), Catch::Contains("too large"));
  CHECK_THAT(ErrorOf("\xE1\x01\x05\x03\x00\xff\xff\xff\xff\x0f\xff\xff\xff\xff\x0f"s),
             Catch::Contains("too many elements"));
  CHECK_THAT(ErrorOf("\xE1\x01\x05\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02"s), Catch::Contains("overflows"));
  CHECK_THAT(ErrorOf("\xE1\x01\x01\x00\x00\x00\x00\x01\x00\x00\x02"s), Catch::Contains("nonzero padding"));
  CHECK_THAT(ErrorOf("\xE1\x01\x01\x00\x00\x00\x00\x00\x02"s), Catch::Contains("invalid bool value 2 at byte 8"));
  CHECK_THAT(ErrorOf("\xE1\x01\x0c\x00\x05"
                     "ab"s),
             Catch::Contains("string length 5 exceeds"));
  CHECK_THAT(ErrorOf(""), Catch::Contains("truncated magic byte at byte 0"));
}

TEST_CASE("codec: random corruption never crashes", "[codec]") {
  Element e = EveryDType();
  e.push_back(Tensor::Strings({2}, {std::string(200, 'a'), "b"}));
  const std::string frame = MustEncode(e);
  std::mt19937_64 rng(1234);
  int decoded = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    std::string bad = frame;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    auto d = DecodeElement(std::string_view(bad));
    if (d.ok()) {
      ++decoded;
      // Whatever decodes must re-encode into a frame that decodes to the same element.
      std::string again;
      REQUIRE(EncodeElement(*d, &again).ok());
      auto d2 = DecodeElement(ToBuffer(again));
      REQUIRE(d2.ok());
      CHECK(*d2 == *d);
    } else {
      CHECK_THAT(std::string(d.status().message()), Catch::StartsWith("element frame: "));
    }
  }
  CHECK(decoded > 0);  // payload flips leave valid frames
  for (int iter = 0; iter < 2000; ++iter) {
    std::string junk(rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    if (!junk.empty() && (rng() & 1)) junk[0] = static_cast<char>(kElementFrameMagic);
    (void)DecodeElement(std::string_view(junk));
  }
}
