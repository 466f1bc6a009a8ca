// Compression on the wire: snappy frames in GetElements responses and COMPRESSION_AUTO's rule.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/core/element_codec.h"
#include "lib/service/common/elements_wire.h"
#include "lib/service/common/wire_compression.h"
#include "proto/service.pb.h"
#include "tests/wire_util.h"

namespace tfdata::service {
namespace {

absl::StatusOr<GetElementsResult> Decode(const std::string& s) {
  return DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(s)});
}

std::vector<Element> Compressible(int n) {
  std::vector<Element> out;
  for (int i = 0; i < n; ++i)
    out.push_back({Tensor::Vector<float>(std::vector<float>(4096, 0.0f)), Tensor::String("label")});
  return out;
}
std::vector<Element> Incompressible(int n) {
  std::mt19937_64 rng(7);
  std::vector<Element> out;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> v(2048);
    for (auto& x : v) x = static_cast<int64_t>(rng());
    out.push_back({Tensor::Vector<int64_t>(v)});
  }
  return out;
}

TEST_CASE("wire compression: compressed responses are protobuf and decode to the same elements",
          "[wire][compression]") {
  GetElementsResult in;
  in.elements = Compressible(3);
  in.elements.push_back({Tensor::Scalar<int64_t>(42)});
  in.first_index = 9;
  in.elements_skipped = 5;
  in.compress = true;
  const std::vector<Element> want = in.elements;
  auto encoded = EncodeElements(in);
  REQUIRE(encoded.ok());
  const std::string bytes = Join(*encoded);
  GetElementsResponse proto;
  REQUIRE(proto.ParseFromString(bytes));
  CHECK(proto.elements_size() == 0);
  CHECK(proto.compressed_elements_size() == 4);
  CHECK(proto.elements_skipped() == 5);
  // Far smaller than the 3 x 16 KiB of zeros.
  CHECK(bytes.size() < 3000);
  for (size_t piece : {1, 5, 100, 100000}) {
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t at = 0; at < bytes.size(); at += piece)
      pieces.push_back(Bytes(bytes).subspan(at, std::min(piece, bytes.size() - at)));
    auto out = DecodeElements(pieces);
    REQUIRE(out.ok());
    CHECK(out->elements == want);
    CHECK(out->first_index == 9);
    CHECK(out->elements_skipped == 5);
  }
}

// Encodes `elements` with compression asked for; returns the bytes on the wire.
std::string EncodeCompressed(std::vector<Element> elements) {
  GetElementsResult in;
  in.elements = std::move(elements);
  in.compress = true;
  auto encoded = EncodeElements(std::move(in));
  REQUIRE(encoded.ok());
  return Join(*encoded);
}

TEST_CASE("wire compression: a response snappy cannot shrink by an eighth travels plain", "[wire][compression]") {
  const std::vector<Element> want = Incompressible(3);
  const std::string bytes = EncodeCompressed(want);
  GetElementsResponse proto;
  REQUIRE(proto.ParseFromString(bytes));
  CHECK(proto.compressed_elements_size() == 0);
  CHECK(proto.elements_size() == 3);
  auto out = Decode(bytes);
  REQUIRE(out.ok());
  CHECK(out->elements == want);
  // One random element among compressible ones: the response as a whole still shrinks enough.
  std::vector<Element> mixed = Incompressible(1);
  for (Element& e : Compressible(4)) mixed.push_back(std::move(e));
  GetElementsResponse mixed_proto;
  REQUIRE(mixed_proto.ParseFromString(EncodeCompressed(std::move(mixed))));
  CHECK(mixed_proto.elements_size() == 0);
  CHECK(mixed_proto.compressed_elements_size() == 5);
}

TEST_CASE("wire compression: a response may mix plain and compressed elements, in order", "[wire][compression]") {
  GetElementsResponse proto;
  Element a{Tensor::Scalar<int64_t>(1)}, b{Tensor::String("two")}, c{Tensor::Scalar<int64_t>(3)};
  std::string frame;
  REQUIRE(EncodeElement(a, &frame).ok());
  proto.add_elements(frame);
  auto cb = CompressElement(b);
  REQUIRE(cb.ok());
  proto.add_compressed_elements(*cb);
  frame.clear();
  REQUIRE(EncodeElement(c, &frame).ok());
  proto.add_elements(frame);
  // Repeated fields serialize grouped by field; rebuild the interleaved order by hand.
  GetElementsResponse first, second, third;
  first.add_elements(proto.elements(0));
  second.add_compressed_elements(proto.compressed_elements(0));
  third.add_elements(proto.elements(1));
  auto out = Decode(first.SerializeAsString() + second.SerializeAsString() + third.SerializeAsString());
  REQUIRE(out.ok());
  REQUIRE(out->elements.size() == 3);
  CHECK(out->elements[0] == a);
  CHECK(out->elements[1] == b);
  CHECK(out->elements[2] == c);
}

TEST_CASE("wire compression: corrupt snappy data is a DataLoss error, never a crash", "[wire][compression]") {
  auto cb = CompressElement(Compressible(1)[0]);
  REQUIRE(cb.ok());
  GetElementsResponse proto;
  proto.add_compressed_elements(*cb);
  const std::string good = proto.SerializeAsString();
  for (size_t n = 1; n < good.size(); n += 7) CHECK_FALSE(Decode(good.substr(0, n)).ok());
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  auto r = Decode(flipped);
  if (!r.ok()) CHECK(absl::IsDataLoss(r.status()));
  // A header claiming far more than the data could expand to.
  GetElementsResponse huge;
  huge.add_compressed_elements(std::string("\xff\xff\xff\xff\x0f\x00", 6));
  auto h = Decode(huge.SerializeAsString());
  REQUIRE(absl::IsDataLoss(h.status()));
  CHECK(std::string(h.status().message()).find("invalid snappy header") != std::string::npos);
  GetElementsResponse empty;
  empty.add_compressed_elements("");
  CHECK(absl::IsDataLoss(Decode(empty.SerializeAsString()).status()));
}

TEST_CASE("wire compression: auto compresses compressible streams on slow links only", "[compression]") {
  const CompressionSample zeros = MeasureSnappy(Compressible(64));
  const CompressionSample noise = MeasureSnappy(Incompressible(64));
  CHECK(zeros.ratio < 0.1);
  CHECK(noise.ratio > 0.95);
  CHECK(zeros.compress_bytes_per_s > 0);
  CHECK(zeros.decompress_bytes_per_s > 0);
  CHECK(zeros.bytes > 0);
  // The rule itself, on fixed figures (measured speeds depend on the machine's load).
  const double gigabit = 125e6, loopback = 20e9;
  const CompressionSample text{1 << 20, 0.4, 500e6, 1500e6};
  const CompressionSample random{1 << 20, 1.0, 800e6, 3000e6};
  CHECK(ShouldCompress(text, gigabit));          // 125 MB/s -> min(500, 1500, 312) MB/s
  CHECK_FALSE(ShouldCompress(random, gigabit));  // saves nothing
  CHECK_FALSE(ShouldCompress(text, 450e6));      // 450 -> min(500, 1500, 1125) = 500: not 20% better
  CHECK_FALSE(ShouldCompress(text, loopback));   // faster than snappy compresses
  CHECK_FALSE(ShouldCompress(CompressionSample{}, gigabit));
  CHECK(CompressedThroughput(text, gigabit) == Approx(312.5e6));
}

TEST_CASE("wire compression: flag names", "[compression]") {
  for (Compression c : {COMPRESSION_NONE, COMPRESSION_SNAPPY, COMPRESSION_AUTO}) {
    auto back = ParseCompression(CompressionFlagName(c));
    REQUIRE(back.ok());
    CHECK(*back == c);
  }
  auto bad = ParseCompression("zip");
  REQUIRE(absl::IsInvalidArgument(bad.status()));
  CHECK(std::string(bad.status().message()).find("none, snappy or auto") != std::string::npos);
}

}  // namespace
}  // namespace tfdata::service
