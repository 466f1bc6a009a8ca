#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "lib/core/element_codec.h"
#include "lib/service/common/elements_wire.h"
#include "proto/service.pb.h"
#include "tests/wire_util.h"

namespace tfdata::service {
namespace {

GetElementsResult Sample() {
  GetElementsResult r;
  std::vector<float> big(100000, 1.5f);  // referenced, not copied, by the encoder
  r.elements = {{Tensor::Scalar<int64_t>(7)},
                {Tensor::Vector<float>(big), Tensor::String("label")},
                {Tensor::Strings({2}, {"a", ""}), Tensor::Scalar<bool>(true)}};
  r.end_of_sequence = true;
  r.first_index = 300;
  return r;
}

TEST_CASE("elements wire: the bytes are a GetElementsResponse protobuf", "[wire]") {
  const GetElementsResult in = Sample();
  auto encoded = EncodeElements(in);
  REQUIRE(encoded.ok());
  const std::string bytes = Join(*encoded);
  CHECK(bytes.size() == encoded->size);
  GetElementsResponse proto;
  REQUIRE(proto.ParseFromString(bytes));
  REQUIRE(proto.elements_size() == 3);
  CHECK(proto.end_of_sequence());
  CHECK(proto.first_index() == 300);
  for (int i = 0; i < 3; ++i) {
    auto e = DecodeElement(std::string_view(proto.elements(i)));
    REQUIRE(e.ok());
    CHECK(*e == in.elements[i]);
  }
  // And protobuf's own encoding decodes here.
  auto back = DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(proto.SerializeAsString())});
  REQUIRE(back.ok());
  CHECK(back->elements == in.elements);
  CHECK(back->first_index == 300);
}

TEST_CASE("elements wire: large payloads are referenced, and any split of the bytes decodes the same", "[wire]") {
  const GetElementsResult in = Sample();
  auto encoded = EncodeElements(in);
  REQUIRE(encoded.ok());
  bool referenced = false;
  for (const auto& [p, n] : encoded->ranges) referenced |= p == in.elements[1][0].raw();
  CHECK(referenced);
  const std::string bytes = Join(*encoded);
  for (size_t piece : {1, 3, 7, 64, 4099}) {
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t at = 0; at < bytes.size(); at += piece)
      pieces.push_back(Bytes(bytes).subspan(at, std::min(piece, bytes.size() - at)));
    auto out = DecodeElements(pieces);
    REQUIRE(out.ok());
    CHECK(out->elements == in.elements);
    CHECK(out->end_of_sequence);
    // Numeric payloads alias one aligned buffer rather than being copied again.
    CHECK(out->elements[1][0].buffer() == out->elements[0][0].buffer());
    CHECK(reinterpret_cast<uintptr_t>(out->elements[1][0].raw()) % 8 == 0);
  }
}

TEST_CASE("elements wire: empty responses and unknown fields", "[wire]") {
  auto empty = DecodeElements({});
  REQUIRE(empty.ok());
  CHECK(empty->elements.empty());
  CHECK_FALSE(empty->end_of_sequence);
  // Field 9 (varint), field 10 (fixed64), field 11 (bytes) and field 12 (fixed32) are skipped.
  std::string bytes = "\x48\x05";
  bytes += std::string("\x51", 1) + std::string(8, '\x01');
  bytes += "\x5a\x02xy";
  bytes += std::string("\x65", 1) + std::string(4, '\x02');
  bytes += "\x10\x01";
  auto out = DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(bytes)});
  REQUIRE(out.ok());
  CHECK(out->elements.empty());
  CHECK(out->end_of_sequence);
}

SplitRun Run(int64_t epoch, int64_t split, int64_t first_seq, int64_t count, bool end) {
  SplitRun run;
  run.set_epoch(epoch);
  run.set_split(split);
  run.set_first_seq(first_seq);
  run.set_count(count);
  run.set_split_end(end);
  return run;
}

TEST_CASE("elements wire: split runs travel with the elements, and must cover them exactly", "[wire]") {
  GetElementsResult in = Sample();
  // Element 0 ends split 4 of epoch 1; split 5 is empty; elements 1 and 2 open split 6.
  in.split_runs = {Run(1, 4, 9, 1, true), Run(1, 5, 0, 0, true), Run(1, 6, 0, 2, false)};
  for (bool compress : {false, true}) {
    in.compress = compress;
    auto encoded = EncodeElements(in);
    REQUIRE(encoded.ok());
    const std::string bytes = Join(*encoded);
    GetElementsResponse proto;
    REQUIRE(proto.ParseFromString(bytes));
    REQUIRE(proto.split_runs_size() == 3);
    CHECK(proto.split_runs(1).split() == 5);
    CHECK(proto.split_runs(1).split_end());
    auto back = DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(bytes)});
    REQUIRE(back.ok());
    CHECK(back->elements == in.elements);
    REQUIRE(back->split_runs.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(back->split_runs[i].ShortDebugString() == in.split_runs[i].ShortDebugString());
  }
  auto decode_with = [&](std::vector<SplitRun> runs) {
    GetElementsResponse proto;
    for (const Element& e : in.elements) {
      REQUIRE(EncodeElement(e, proto.add_elements()).ok());
    }
    for (const SplitRun& r : runs) *proto.add_split_runs() = r;
    return DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(proto.SerializeAsString())});
  };
  auto short_runs = decode_with({Run(0, 1, 0, 2, false)});
  REQUIRE(absl::IsDataLoss(short_runs.status()));
  CHECK(std::string(short_runs.status().message()).find("split runs cover 2 elements, the response has 3") !=
        std::string::npos);
  CHECK(absl::IsDataLoss(decode_with({Run(0, 1, 0, 4, false)}).status()));
  CHECK(absl::IsDataLoss(decode_with({Run(0, -1, 0, 3, false)}).status()));
  CHECK(absl::IsDataLoss(decode_with({Run(0, 1, 0, 3, false), Run(0, 1, 3, int64_t{1} << 62, false)}).status()));
  CHECK(absl::IsDataLoss(decode_with({Run(0, 1, std::numeric_limits<int64_t>::max(), 3, false)}).status()));
  // A run field that is not a SplitRun.
  CHECK(absl::IsDataLoss(
      DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(std::string("\x32\x01\xff", 3))}).status()));
}

TEST_CASE("elements wire: malformed responses are DataLoss errors naming the byte", "[wire]") {
  auto decode = [](const std::string& s) { return DecodeElements(std::vector<std::span<const uint8_t>>{Bytes(s)}); };
  auto encoded = EncodeElements(Sample());
  REQUIRE(encoded.ok());
  const std::string good = Join(*encoded);
  // Every truncation fails cleanly (or, cut exactly between fields, decodes a prefix).
  for (size_t n = 0; n < good.size(); n += (n < 200 ? 1 : 997)) {
    auto r = decode(good.substr(0, n));
    if (!r.ok()) CHECK(absl::IsDataLoss(r.status()));
  }
  auto r = decode("\x0a\x05\xe1");
  REQUIRE(absl::IsDataLoss(r.status()));
  CHECK(std::string(r.status().message()).find("length 5 exceeds the remaining 1 bytes at byte 1") !=
        std::string::npos);
  CHECK(absl::IsDataLoss(decode("\x0a\x01\x00").status()));  // a frame with a bad magic byte
  CHECK(absl::IsDataLoss(decode("\x08\x01").status()));      // field 1 as a varint
  CHECK(absl::IsDataLoss(decode("\x0b").status()));          // wire type 3 (groups)
  CHECK(absl::IsDataLoss(decode("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff").status()));
  auto huge = decode("\x0a\xff\xff\xff\xff\x0f");  // claims 4 GiB
  REQUIRE(absl::IsDataLoss(huge.status()));
}

}  // namespace
}  // namespace tfdata::service
