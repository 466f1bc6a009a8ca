// CRC-32C (Castagnoli polynomial, reflected 0x82F63B78), as used by TFRecord files.
//
// The value is the standard one (initial value ~0, final xor ~0): Crc32c("123456789") is
// 0xE3069283. Uses SSE4.2's crc32 instruction when the CPU has it, else slicing-by-8 tables.
// All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tfdata {

// The CRC of data[0, n) appended to a stream whose CRC was `crc` (0 for an empty stream), so
// Crc32cExtend(Crc32c(a), b) == Crc32c(a + b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

// TFRecord stores masked CRCs: a CRC of data that itself contains CRCs is error-prone, so the
// stored value is rotated and offset.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
inline uint32_t UnmaskCrc(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

namespace internal {
// The portable table-driven implementation, exposed so tests can compare it with the
// hardware path.
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);
}  // namespace internal

}  // namespace tfdata
