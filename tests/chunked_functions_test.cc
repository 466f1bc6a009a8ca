// filter and flat_map hand a function that batches (a Python function: a round trip to a helper
// each call) chunks of inputs (lib/pipeline/map.cc ChunkedIt); the output order and the place of
// an error stay what they are one element at a time.
#include <atomic>
#include <catch2/catch.hpp>

#include "lib/functions/function.h"
#include "lib/pipeline/ops.h"

using namespace tfdata;

namespace {

// A batching function standing in for a Python one: as a predicate x -> x % 2 == 0; for flat_map
// x -> [x, x] (x odd: none); input 41 fails. Counts the calls it gets.
class Batching : public Function {
 public:
  std::string_view name() const override { return "batching"; }
  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec&) const override { return ElementSpec::Unknown(); }
  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    const int64_t x = input[0].data<int64_t>()[0];
    if (x == 41) return absl::InvalidArgumentError("41 is bad");
    return Element{Tensor::Scalar<bool>(x % 2 == 0)};
  }
  bool batches() const override { return true; }
  std::vector<absl::StatusOr<Element>> ApplyBatch(std::vector<Element> inputs,
                                                  const FunctionContext& first) const override {
    calls.fetch_add(1);
    largest = std::max<size_t>(largest.load(), inputs.size());
    return Function::ApplyBatch(std::move(inputs), first);
  }
  std::vector<absl::StatusOr<std::vector<Element>>> ApplyMany(std::vector<Element> inputs,
                                                              const FunctionContext& first) const override {
    calls.fetch_add(1);
    largest = std::max<size_t>(largest.load(), inputs.size());
    std::vector<absl::StatusOr<std::vector<Element>>> out;
    for (const Element& in : inputs) {
      const int64_t x = in[0].data<int64_t>()[0];
      if (x == 41) {
        out.emplace_back(absl::InvalidArgumentError("41 is bad"));
      } else if (x % 2 == 0) {
        out.emplace_back(std::vector<Element>{in, in});
      } else {
        out.emplace_back(std::vector<Element>{});
      }
    }
    return out;
  }
  mutable std::atomic<int> calls{0};
  mutable std::atomic<size_t> largest{0};
};

// Reads `ds` to its end or first error; the values (int64 scalars) and the error.
std::pair<std::vector<int64_t>, absl::Status> ReadAll(const DatasetPtr& ds) {
  auto it = ds->MakeIterator(IteratorContext{});
  REQUIRE(it.ok());
  std::vector<int64_t> got;
  for (int i = 0; i < 10000; ++i) {
    Element e;
    auto more = (*it)->Next(&e);
    if (!more.ok()) return {got, more.status()};
    if (!*more) break;
    got.push_back(e[0].data<int64_t>()[0]);
  }
  return {got, absl::OkStatus()};
}

}  // namespace

TEST_CASE("filter hands a batching predicate chunks, in order, an error in its place", "[map][python_functions]") {
  auto fn = std::make_shared<Batching>();
  auto range = MakeRangeDataset(0, 300, 1);
  REQUIRE(range.ok());
  auto filtered = MakeFilterDataset(*range, {fn});
  REQUIRE(filtered.ok());
  auto [got, error] = ReadAll(*filtered);
  CHECK(error == absl::InvalidArgumentError("41 is bad"));
  std::vector<int64_t> want;
  for (int64_t x = 0; x < 41; x += 2) want.push_back(x);
  CHECK(got == want);

  fn->calls = 0;
  auto evens = MakeFilterDataset(*MakeRangeDataset(42, 300, 1), {fn});
  REQUIRE(evens.ok());
  auto [all, ok] = ReadAll(*evens);
  REQUIRE(ok.ok());
  CHECK(all.size() == 129);
  CHECK(all.front() == 42);
  CHECK(all.back() == 298);
  // Chunks of 1, 2, 4, ... 64: far fewer calls than inputs, and none larger than 64.
  CHECK(fn->calls.load() <= 10);
  CHECK(fn->largest.load() == 64);
}

TEST_CASE("flat_map hands a batching function chunks, in order, an error in its place", "[map][python_functions]") {
  auto fn = std::make_shared<Batching>();
  auto flat = MakeFlatMapDataset(*MakeRangeDataset(0, 100, 1), {fn});
  REQUIRE(flat.ok());
  auto [got, error] = ReadAll(*flat);
  CHECK(error == absl::InvalidArgumentError("41 is bad"));
  std::vector<int64_t> want;
  for (int64_t x = 0; x < 41; x += 2) want.insert(want.end(), {x, x});
  CHECK(got == want);
  CHECK(fn->calls.load() < 10);
}
