#include "lib/io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TFDATA_CRC32C_X86 1
#include <nmmintrin.h>
#endif

namespace tfdata {
namespace {

constexpr uint32_t kPoly = 0x82F63B78u;  // Castagnoli, bit-reversed

// Slicing-by-8 tables, built at compile time so there is no initialization race.
// kTables[0] is the classic byte-at-a-time table; kTables[k][b] is the CRC contribution of byte
// b followed by k zero bytes, which lets eight input bytes be folded with independent lookups.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint32_t LoadLE32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

// `c` is the raw (pre-inverted) register value.
uint32_t ExtendPortableRaw(uint32_t c, const uint8_t* p, size_t n) {
  while (n >= 8) {
    const uint32_t lo = LoadLE32(p) ^ c;
    const uint32_t hi = LoadLE32(p + 4);
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^ kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return c;
}

#ifdef TFDATA_CRC32C_X86
// The crc32 instruction takes 3 cycles but can start one per cycle: one chain of them runs at a
// third of the speed. So long buffers go as three chains over three adjacent blocks, joined by
// crc(A || B) = Shift_|B|(crc(A)) ^ crc(B, starting from 0). Shift_n (the register after n zero
// bytes) is linear, so it is four 256-entry tables, built once from its 32 basis vectors.
constexpr size_t kLongBlock = 4096, kShortBlock = 256;

struct Shift {
  uint32_t t[4][256];
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

__attribute__((target("sse4.2"))) Shift MakeShift(size_t n) {
  uint32_t basis[32];
  for (int i = 0; i < 32; ++i) {
    uint64_t c = uint64_t{1} << i;
    for (size_t k = 0; k < n / 8; ++k) c = _mm_crc32_u64(c, 0);
    basis[i] = static_cast<uint32_t>(c);
  }
  Shift s{};
  for (int k = 0; k < 4; ++k) {
    for (uint32_t b = 0; b < 256; ++b) {
      for (int i = 0; i < 8; ++i) {
        if ((b >> i) & 1) s.t[k][b] ^= basis[8 * k + i];
      }
    }
  }
  return s;
}

// Consumes as many rounds of three `block`-byte blocks as `n` holds.
template <size_t block>
__attribute__((target("sse4.2"))) uint64_t ThreeChains(uint64_t c, const Shift& shift, const uint8_t*& p, size_t& n) {
  while (n >= 3 * block) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < block; i += 8) {
      uint64_t v0, v1, v2;
      std::memcpy(&v0, p + i, 8);  // unaligned-safe; x86 is little-endian as the CRC expects
      std::memcpy(&v1, p + block + i, 8);
      std::memcpy(&v2, p + 2 * block + i, 8);
      c = _mm_crc32_u64(c, v0);
      c1 = _mm_crc32_u64(c1, v1);
      c2 = _mm_crc32_u64(c2, v2);
    }
    c = shift(shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
    p += 3 * block;
    n -= 3 * block;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42Raw(uint32_t c, const uint8_t* p, size_t n) {
  static const Shift* const kLong = new Shift(MakeShift(kLongBlock));  // thread-safe static init
  static const Shift* const kShort = new Shift(MakeShift(kShortBlock));
  uint64_t c64 = c;
  c64 = ThreeChains<kLongBlock>(c64, *kLong, p, n);
  c64 = ThreeChains<kShortBlock>(c64, *kShort, p, n);
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c64);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

bool DetectSse42() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}
#endif

bool HaveHardware() {
#ifdef TFDATA_CRC32C_X86
  static const bool have = DetectSse42();  // thread-safe static init
  return have;
#else
  return false;
#endif
}

}  // namespace

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
#ifdef TFDATA_CRC32C_X86
  if (HaveHardware()) return ~ExtendSse42Raw(~crc, p, n);
#endif
  return ~ExtendPortableRaw(~crc, p, n);
}

namespace internal {
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n) {
  return ~ExtendPortableRaw(~crc, static_cast<const uint8_t*>(data), n);
}
}  // namespace internal

}  // namespace tfdata
