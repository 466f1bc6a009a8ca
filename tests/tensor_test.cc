#include <catch2/catch.hpp>

#include "lib/core/element_spec.h"
#include "lib/core/tensor.h"

using namespace tfdata;

TEST_CASE("scalar tensors render as plain values", "[tensor]") {
  CHECK(Tensor::Scalar<int64_t>(7).DebugString() == "7");
  CHECK(Tensor::Scalar<float>(1.5f).DebugString() == "1.5");
  CHECK(Tensor::Scalar<bool>(true).DebugString() == "True");
  CHECK(Tensor::String("a'b\n").DebugString() == "b'a\\'b\\n'");
}

TEST_CASE("matrices render numpy-like and elide long arrays", "[tensor]") {
  Tensor m = Tensor::FromVector<int32_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(m.DebugString() == "[[1 2 3] [4 5 6]]");
  CHECK(m.TypeString() == "int32[2, 3]");
  CHECK(m.DebugString(4) == "[[1 2 3] [4 ...]]");
  CHECK(Tensor::Vector<int64_t>({}).DebugString() == "[]");
}

TEST_CASE("slices share the buffer and reshape keeps values", "[tensor]") {
  Tensor m = Tensor::FromVector<int64_t>({3, 2}, {1, 2, 3, 4, 5, 6});
  auto row = m.Slice(1);
  REQUIRE(row.ok());
  CHECK(row->shape() == Shape{2});
  CHECK(row->data<int64_t>()[0] == 3);
  CHECK(row->buffer().get() == m.buffer().get());
  CHECK_FALSE(m.Slice(3).ok());
  CHECK_FALSE(Tensor::Scalar<int64_t>(1).Slice(0).ok());
  auto r = m.Reshape({6});
  REQUIRE(r.ok());
  CHECK(r->GetAsInt64(5) == 6);
  CHECK_FALSE(m.Reshape({4}).ok());
}

TEST_CASE("stack builds a batch and rejects mixed shapes", "[tensor]") {
  auto s = Stack({Tensor::Vector<int64_t>({1, 2}), Tensor::Vector<int64_t>({3, 4})});
  REQUIRE(s.ok());
  CHECK(s->shape() == Shape{2, 2});
  CHECK(*s == Tensor::FromVector<int64_t>({2, 2}, {1, 2, 3, 4}));
  auto bad = Stack({Tensor::Vector<int64_t>({1}), Tensor::Vector<int64_t>({3, 4})});
  CHECK_FALSE(bad.ok());
  auto strs = Stack({Tensor::String("a"), Tensor::String("b")});
  REQUIRE(strs.ok());
  CHECK(strs->strings() == std::vector<std::string>{"a", "b"});
}

TEST_CASE("FromBuffer checks sizes", "[tensor]") {
  auto buf = Buffer::Allocate(16);
  CHECK(Tensor::FromBuffer(DType::kInt64, {2}, buf, 0, 16).ok());
  CHECK_FALSE(Tensor::FromBuffer(DType::kInt64, {3}, buf, 0, 16).ok());
  CHECK_FALSE(Tensor::FromBuffer(DType::kInt64, {2}, buf, 8, 16).ok());
}

TEST_CASE("dtype names round trip", "[tensor]") {
  for (uint8_t raw = 1; raw <= 12; ++raw) {
    auto d = static_cast<DType>(raw);
    auto back = DTypeFromName(DTypeName(d));
    REQUIRE(back.ok());
    CHECK(*back == d);
  }
  CHECK_FALSE(DTypeFromName("int65").ok());
}

TEST_CASE("specs merge unknown dimensions", "[tensor]") {
  ElementSpec a{{TensorSpec{DType::kInt64, {2, 3}}}};
  ElementSpec b{{TensorSpec{DType::kInt64, {2, 4}}}};
  auto m = MergeSpecs(a, b);
  REQUIRE(m.ok());
  CHECK(m->DebugString() == "(int64[2, ?])");
  ElementSpec c{{TensorSpec{DType::kFloat32, {2, 3}}}};
  CHECK_FALSE(MergeSpecs(a, c).ok());
}
