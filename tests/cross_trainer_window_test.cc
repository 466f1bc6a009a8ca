// The cross-trainer cache's sliding window (lib/service/worker/cross_trainer_window.h).
#include <catch2/catch.hpp>

#include "lib/service/worker/cross_trainer_window.h"

namespace tfdata::service {
namespace {

Element E(int64_t v) { return {Tensor::Scalar<int64_t>(v)}; }
int64_t V(const Element& e) { return e[0].data<int64_t>()[0]; }

std::vector<int64_t> Values(const CrossTrainerWindow::Read& r) {
  std::vector<int64_t> out;
  for (const Element& e : r.elements) out.push_back(V(e));
  return out;
}

TEST_CASE("cross-trainer window: trainers read the same sequence from their own cursors", "[cross_trainer]") {
  CrossTrainerWindow w(100);
  for (int i = 0; i < 5; ++i) REQUIRE(w.Push(E(i), 10).ok());
  auto a = w.Take("a", 3, 1000);
  CHECK(Values(a) == std::vector<int64_t>{0, 1, 2});
  CHECK(a.first_index == 0);
  auto b = w.Take("b", 10, 1000);
  CHECK(Values(b) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(w.AtEnd("b"));
  CHECK_FALSE(w.AtEnd("a"));
  auto a2 = w.Take("a", 10, 1000);
  CHECK(Values(a2) == std::vector<int64_t>{3, 4});
  CHECK(a2.first_index == 3);
  CHECK(w.skipped("a") == 0);
  // max_bytes bounds a read after its first element.
  REQUIRE(w.Push(E(5), 10).ok());
  REQUIRE(w.Push(E(6), 10).ok());
  CHECK(Values(w.Take("a", 10, 15)) == std::vector<int64_t>{5});
}

TEST_CASE("cross-trainer window: a trainer that falls out of the window skips ahead and it is counted",
          "[cross_trainer]") {
  CrossTrainerWindow w(30);  // three elements of 10 bytes
  REQUIRE(w.Push(E(0), 10).ok());
  CHECK(Values(w.Take("slow", 1, 100)) == std::vector<int64_t>{0});
  for (int i = 1; i < 10; ++i) {
    REQUIRE(w.Push(E(i), 10).ok());
    w.Take("fast", 10, 100);
    CHECK(w.bytes() <= 30);
  }
  CHECK(w.begin() == 7);
  CHECK(w.peak_bytes() == 30);
  auto r = w.Take("slow", 10, 100);
  CHECK(r.skipped == 6);  // 1..6 left before it asked
  CHECK(r.first_index == 7);
  CHECK(Values(r) == std::vector<int64_t>{7, 8, 9});
  CHECK(w.skipped("slow") == 6);
  CHECK(w.skipped("fast") == 0);
  // A new trainer starts at the oldest element held, without a skip.
  auto late = w.Take("new", 1, 100);
  CHECK(late.skipped == 0);
  CHECK(Values(late) == std::vector<int64_t>{7});
}

TEST_CASE("cross-trainer window: an element larger than the window is an error", "[cross_trainer]") {
  CrossTrainerWindow w(16);
  REQUIRE(w.Push(E(0), 8).ok());
  auto st = w.Push(E(1), 17);
  REQUIRE(absl::IsInvalidArgument(st));
  CHECK(std::string(st.message()).find("--cross-trainer-cache-size") != std::string::npos);
  CHECK(w.end() == 1);  // nothing changed
  CHECK(w.bytes() == 8);
}

}  // namespace
}  // namespace tfdata::service
