// How far a parallel map's threads may run ahead of its consumer (its window, in elements).
//
// Threads claim chunks of the free window, a wake-up each; with a window of a few elements per
// thread, a cheap function (parse_example, about 8 us) spends more on wake-ups than on work, and
// two threads ran slower than one (docs/performance.md, "Side by side with TensorFlow"). So small
// elements get a larger window, up to 64 per thread, as long as it holds at most kMapWindowBytes;
// large elements keep the floor, so a map never holds more than before this rule plus 16 MiB.
// Pure functions; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tfdata {

inline constexpr int64_t kMapWindowBytes = 16 << 20;

// The smallest window: max(4 x threads, 16), or 64 x threads when a function batches (a Python
// function: its round trips are amortised over chunks).
inline int64_t MinMapWindow(int parallel, bool batches) {
  return batches ? 64 * int64_t{parallel} : std::max<int64_t>(4 * int64_t{parallel}, 16);
}

// The window for elements of `average_bytes` (as ElementMemoryBytes counts them; 0: not known
// yet): kMapWindowBytes' worth, between MinMapWindow and 64 x threads.
inline int64_t MapWindow(int parallel, bool batches, int64_t average_bytes) {
  const int64_t floor = MinMapWindow(parallel, batches);
  const int64_t ceiling = std::max(floor, 64 * int64_t{parallel});
  if (average_bytes <= 0) return floor;
  return std::clamp(kMapWindowBytes / average_bytes, floor, ceiling);
}

}  // namespace tfdata
