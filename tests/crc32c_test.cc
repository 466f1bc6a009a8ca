#include <catch2/catch.hpp>

#include <string>

#include "lib/io/crc32c.h"

using namespace tfdata;

// Expected values come from RFC 3720 (B.4) and an independent bitwise implementation.
TEST_CASE("crc32c matches published vectors", "[crc32c]") {
  CHECK(Crc32c("") == 0u);
  CHECK(Crc32c("123456789") == 0xE3069283u);
  CHECK(Crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(Crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string inc;
  for (int i = 0; i < 32; ++i) inc.push_back(static_cast<char>(i));
  CHECK(Crc32c(inc) == 0x46DD794Eu);
}

TEST_CASE("crc32c extend equals the crc of the concatenation", "[crc32c]") {
  std::string data;
  for (int i = 0; i < 1000; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  const uint32_t whole = Crc32c(data);
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{500}, size_t{999}, size_t{1000}}) {
    const uint32_t a = Crc32c(std::string_view(data).substr(0, split));
    CHECK(Crc32cExtend(a, data.data() + split, data.size() - split) == whole);
  }
}

TEST_CASE("crc32c hardware and portable paths agree at every length and alignment", "[crc32c]") {
  std::string data;
  for (int i = 0; i < 300; ++i) data.push_back(static_cast<char>((i * 131) ^ (i >> 3)));
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= data.size(); len += 13) {
      INFO("start " << start << " len " << len);
      CHECK(Crc32cExtend(0, data.data() + start, len) == internal::Crc32cExtendPortable(0, data.data() + start, len));
    }
  }
}

TEST_CASE("crc32c hardware and portable paths agree on long buffers (the three-chain rounds)", "[crc32c]") {
  // Rounds of 3 x 4096 and 3 x 256 bytes, joined by shift tables: lengths at and around each
  // round's edges, from several starting registers.
  std::string data;
  uint32_t x = 12345;
  for (int i = 0; i < 3 * 3 * 4096 + 3 * 256 + 100; ++i) {
    x = x * 1103515245u + 12345u;
    data.push_back(static_cast<char>(x >> 24));
  }
  for (size_t len : {size_t{767}, size_t{768}, size_t{769}, size_t{775}, size_t{1536}, size_t{12287}, size_t{12288},
                     size_t{12289}, size_t{12288 + 768}, size_t{20000}, size_t{24576}, data.size() - 1, data.size()}) {
    for (uint32_t start : {0u, 1u, 0xdeadbeefu}) {
      for (size_t offset : {size_t{0}, size_t{3}}) {
        if (offset + len > data.size()) continue;
        INFO("len " << len << " start " << start << " offset " << offset);
        CHECK(Crc32cExtend(start, data.data() + offset, len) ==
              internal::Crc32cExtendPortable(start, data.data() + offset, len));
      }
    }
  }
  CHECK(Crc32c(std::string(40000, '\0')) == internal::Crc32cExtendPortable(0, std::string(40000, '\0').data(), 40000));
}

TEST_CASE("masked crcs match TFRecord's masking and unmask inverts it", "[crc32c]") {
  CHECK(MaskCrc(0) == 0xa282ead8u);
  CHECK(MaskCrc(0xE3069283u) == 0xc78ab0e5u);
  for (uint32_t c : {0u, 1u, 0xE3069283u, 0xffffffffu, 0x80000000u}) CHECK(UnmaskCrc(MaskCrc(c)) == c);
  CHECK(MaskCrc(0xE3069283u) != 0xE3069283u);
}
