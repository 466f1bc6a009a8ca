// Counting what a run produced, for the live progress line and the closing summary.
// Not thread-safe: owned by the loop that writes the elements.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "lib/core/tensor.h"

namespace tfdata {

// "1.5 MB", "812 B" (decimal units).
std::string HumanBytes(double bytes);
// "12.3 k", "4.56 M".
std::string HumanCount(double n);

class RunStats {
 public:
  // With `progress` set, Add() redraws a one-line progress display on `out` (a terminal) at
  // most 5 times a second.
  explicit RunStats(bool progress = false, FILE* out = stderr);

  void Add(const Element& element);
  int64_t elements() const { return elements_; }
  uint64_t bytes() const { return bytes_; }
  double seconds() const;

  // Clears the progress line (if any) and returns the summary:
  // "10 elements, 80 B in 0.00 s (7.1 k elements/s, 57 kB/s)".
  std::string Finish();

 private:
  bool progress_;
  FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  int64_t elements_ = 0;
  uint64_t bytes_ = 0;
  bool drawn_ = false;
};

}  // namespace tfdata
