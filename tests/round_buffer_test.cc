// Coordinated reads' rounds on a worker (lib/service/worker/round_buffer.h).
#include <catch2/catch.hpp>

#include "lib/service/worker/round_buffer.h"

namespace tfdata::service {
namespace {

Element E(int64_t v) { return {Tensor::Scalar<int64_t>(v)}; }

TEST_CASE("round buffer: consumer i takes element i of the round, once", "[coordinated]") {
  RoundBuffer b(3);
  const absl::Time t0 = absl::Now();
  CHECK_FALSE(b.Known(4));
  CHECK(b.NumPresent() == 3);
  b.Open(4, {E(10), E(11), E(12)}, t0);
  CHECK(b.Known(4));
  CHECK(b.bytes() > 0);
  auto c2 = b.Take(4, 2);
  REQUIRE(c2);
  CHECK((*c2)[0].data<int64_t>()[0] == 12);
  CHECK_FALSE(b.Take(4, 2));  // taken already: a late request
  CHECK((*b.Take(4, 0))[0].data<int64_t>()[0] == 10);
  CHECK((*b.Take(4, 1))[0].data<int64_t>()[0] == 11);
  CHECK(b.open_rounds() == 0);  // closed once every slot was taken
  CHECK(b.Known(4));
  CHECK(b.bytes() == 0);
}

TEST_CASE("round buffer: expiry drops untaken elements and marks their consumers absent", "[coordinated]") {
  RoundBuffer b(2);
  const absl::Time t0 = absl::Now();
  b.Open(0, {E(0), E(1)}, t0);
  REQUIRE(b.Take(0, 0));
  CHECK(b.Expire(t0 + absl::Seconds(1), absl::Seconds(5)) == 0);
  CHECK(b.Expire(t0 + absl::Seconds(6), absl::Seconds(5)) == 1);
  CHECK(b.open_rounds() == 0);
  CHECK(b.bytes() == 0);
  // Consumer 1 is gone: new rounds hold an element for consumer 0 only, until 1 asks again.
  CHECK(b.NumPresent() == 1);
  b.Open(1, {E(2)}, t0);
  CHECK((*b.Take(1, 0))[0].data<int64_t>()[0] == 2);
  CHECK(b.open_rounds() == 0);
  b.Touch(1);
  CHECK(b.NumPresent() == 2);
}

}  // namespace
}  // namespace tfdata::service
