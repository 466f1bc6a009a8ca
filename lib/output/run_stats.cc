#include "lib/output/run_stats.h"

#include "fmt/format.h"

namespace tfdata {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} {}", b, units[u]) : fmt::format("{:.3g} {}", b, units[u]);
}

std::string HumanCount(double n) {
  const char* units[] = {"", " k", " M", " G"};
  int u = 0;
  while (n >= 1000 && u < 3) {
    n /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.3g}", n) : fmt::format("{:.3g}{}", n, units[u]);
}

RunStats::RunStats(bool progress, FILE* out)
    : progress_(progress), out_(out), start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double RunStats::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void RunStats::Add(const Element& element) {
  ++elements_;
  bytes_ += ElementByteSize(element);
  if (!progress_ || (elements_ & 63) != 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(200)) return;
  last_draw_ = now;
  const double s = seconds();
  fmt::print(out_, "\r\033[K{} elements, {} ({} elements/s)", elements_, HumanBytes(static_cast<double>(bytes_)),
             HumanCount(static_cast<double>(elements_) / s));
  std::fflush(out_);
  drawn_ = true;
}

std::string RunStats::Finish() {
  if (drawn_) {
    fmt::print(out_, "\r\033[K");
    std::fflush(out_);
    drawn_ = false;
  }
  const double s = seconds();
  const double rate = s > 0 ? static_cast<double>(elements_) / s : 0;
  const double brate = s > 0 ? static_cast<double>(bytes_) / s : 0;
  return fmt::format("{} elements, {} in {:.2f} s ({} elements/s, {}/s)", elements_,
                     HumanBytes(static_cast<double>(bytes_)), s, HumanCount(rate), HumanBytes(brate));
}

}  // namespace tfdata
