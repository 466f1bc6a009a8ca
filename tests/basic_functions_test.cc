// cast, arith, compare, select, spin, sleep.
#include <catch2/catch.hpp>
#include <chrono>

#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

static Element One(const std::string& text) {
  auto r = RunText(text);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  REQUIRE(r->size() == 1);
  return (*r)[0];
}

TEST_CASE("cast converts numeric dtypes like C++ conversions", "[functions]") {
  auto e = One(R"(op { from_tensor_slices { tensor { dtype: FLOAT32 shape: [1, 3] float_values: [1.7, -2.5, 300] } } }
                  op { map { fn { cast { dtype: INT32 } } } })");
  CHECK(e[0] == Tensor::Vector<int32_t>({1, -2, 300}));
  auto b = One("op { range { start: 2 stop: 3 } } op { map { fn { cast { dtype: BOOL } } } }");
  CHECK(b[0].dtype() == DType::kBool);
  CHECK(b[0].data<bool>()[0]);
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { cast { } } } }"),
             Catch::Contains("dtype is not set"));
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { cast { dtype: STRING } } } }"),
             Catch::Contains("STRING"));
  CHECK_THAT(BuildError(R"(op { from_tensor_slices { tensor { dtype: STRING string_values: ["a"] } } }
                           op { map { fn { cast { dtype: INT64 } } } })"),
             Catch::Contains("must be numeric"));
}

TEST_CASE("arith keeps the dtype and uses floor modulo", "[functions]") {
  auto e = One(R"(op { from_tensor_slices { tensor { dtype: INT64 shape: [1, 4] int_values: [-7, -1, 5, 9] } } }
                  op { map { fn { arith { op: MOD value: 3 } } } })");
  CHECK(e[0] == Tensor::Vector<int64_t>({2, 2, 2, 0}));
  auto f = One(R"(op { from_tensor_slices { tensor { dtype: FLOAT32 shape: [1, 2] float_values: [1, 4] } } }
                  op { map { fn { arith { op: DIV value: 2 } } fn { arith { op: MAX value: 1 } } } })");
  CHECK(f[0] == Tensor::Vector<float>({1.0f, 2.0f}));
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { arith { value: 1 } } } }"),
             Catch::Contains("op is not set"));
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { arith { component: 1 op: ADD value: 1 } } } }"),
             Catch::Contains("component 1 does not exist"));
}

TEST_CASE("compare turns an element into a bool scalar", "[functions]") {
  auto e = One("op { range { start: 5 stop: 6 } } op { map { fn { compare { op: LE value: 5 } } } }");
  REQUIRE(e.size() == 1);
  CHECK(e[0].dtype() == DType::kBool);
  CHECK(e[0].data<bool>()[0]);
  CHECK_THAT(BuildError("op { range { stop: 4 } } op { batch { batch_size: 2 } } op { filter { fn { compare { op: LT "
                        "value: 1 } } } }"),
             Catch::Contains("must be a scalar"));
  // Integers compare exactly beyond double precision.
  auto big =
      One("op { range { start: 9007199254740993 stop: 9007199254740994 } } op { map { fn { compare { op: EQ value: "
          "9007199254740992 } } } }");
  CHECK_FALSE(big[0].data<bool>()[0]);
}

TEST_CASE("select keeps and reorders components", "[functions]") {
  auto e = One(R"(op { zip { input { op { range { stop: 1 } } } input { op { range { start: 5 stop: 6 } } } } }
                  op { map { fn { select { component: [1, 0, 1] } } } })");
  REQUIRE(e.size() == 3);
  CHECK(e[0].GetAsInt64(0) == 5);
  CHECK(e[1].GetAsInt64(0) == 0);
  CHECK_THAT(BuildError("op { range { stop: 1 } } op { map { fn { select { component: [2] } } } }"),
             Catch::Contains("component 2 does not exist"));
}

TEST_CASE("spin and sleep take at least their time and keep the element", "[functions]") {
  // Lower bounds only: these can never be flaky on a slow machine.
  for (const char* fn : {"spin", "sleep"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = RunText(std::string("op { range { stop: 5 } } op { map { fn { ") + fn + " { micros: 2000 } } } }");
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    REQUIRE(r.ok());
    CHECK(Int64Scalars(*r) == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(elapsed >= std::chrono::milliseconds(10));
  }
  CHECK_THAT(BuildError("op { range { stop: 1 } } op { map { fn { sleep { micros: -1 } } } }"),
             Catch::Contains("micros"));
  // At most 10 s per element: a stopping worker waits for the element in progress.
  CHECK_THAT(BuildError("op { range { stop: 1 } } op { map { fn { spin { micros: 10000001 } } } }"),
             Catch::Contains("spin: micros must be between 0 and 10000000 (10 s), got 10000001"));
}

TEST_CASE("integer DIV floors so that DIV and MOD agree", "[functions]") {
  auto e = One(R"(op { from_tensor_slices { tensor { dtype: INT64 shape: [1, 4] int_values: [-7, -1, 5, 9] } } }
                  op { map { fn { arith { op: DIV value: 3 } } } })");
  CHECK(e[0] == Tensor::Vector<int64_t>({-3, -1, 1, 3}));
}

TEST_CASE("arith rejects values the dtype cannot hold", "[functions]") {
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { arith { op: MUL value: 1.5 } } } }"),
             Catch::Contains("not a valid int64"));
  CHECK_THAT(
      BuildError(
          "op { range { stop: 3 } } op { map { fn { cast { dtype: UINT8 } } fn { arith { op: ADD value: -1 } } } }"),
      Catch::Contains("not a valid uint8"));
  CHECK(
      BuildError(
          "op { range { stop: 3 } } op { map { fn { cast { dtype: FLOAT32 } } fn { arith { op: MUL value: 1.5 } } } }")
          .empty());
}

TEST_CASE("cast from float saturates and maps NaN to 0", "[functions]") {
  auto e = One(R"(op { from_tensor_slices { tensor { dtype: FLOAT64 shape: [1, 3] float_values: [1e10, -1e10, nan] } } }
                  op { map { fn { cast { dtype: INT32 } } } })");
  CHECK(e[0] == Tensor::Vector<int32_t>({2147483647, -2147483648, 0}));
}

TEST_CASE("inline tensors reject integers out of their dtype's range", "[functions]") {
  CHECK_THAT(BuildError("op { from_tensor_slices { tensor { dtype: INT8 int_values: [300] } } }"),
             Catch::Contains("does not fit in int8"));
  CHECK_THAT(BuildError("op { from_tensor_slices { tensor { dtype: UINT16 int_values: [-1] } } }"),
             Catch::Contains("does not fit in uint16"));
}

TEST_CASE("integer arith wraps instead of overflowing", "[functions]") {
  auto e = One(
      R"(op { from_tensor_slices { tensor { dtype: INT64 shape: [1, 2] int_values: [9223372036854775807, -9223372036854775808] } } }
                  op { map { fn { arith { op: ADD value: 1 } } } })");
  CHECK(e[0] == Tensor::Vector<int64_t>({INT64_MIN, INT64_MIN + 1}));
  auto d = One(R"(op { from_tensor_slices { tensor { dtype: INT64 shape: [1, 1] int_values: [-9223372036854775808] } } }
                  op { map { fn { arith { op: DIV value: -1 } } } })");
  CHECK(d[0] == Tensor::Vector<int64_t>({INT64_MIN}));
  CHECK_THAT(BuildError("op { range { stop: 3 } } op { map { fn { arith { op: ADD value: 9223372036854775807 } } } }"),
             Catch::Contains("not a valid int64"));
}
