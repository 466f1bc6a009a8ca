#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "lib/functions/function.h"

using namespace tfdata;

namespace {

pipeline::Plugin Spec(const std::string& library, const std::string& function, const std::string& config = "") {
  pipeline::Plugin p;
  p.set_library(library);
  p.set_function(function);
  p.set_config(config);
  return p;
}

std::unique_ptr<Function> MustLoad(const pipeline::Plugin& spec) {
  auto fn = MakePlugin(spec, FunctionOptions{});
  INFO(fn.status().ToString());
  REQUIRE(fn.ok());
  return *std::move(fn);
}

std::string LoadError(const pipeline::Plugin& spec, const FunctionOptions& options = {}) {
  auto fn = MakePlugin(spec, options);
  REQUIRE_FALSE(fn.ok());
  return fn.status().ToString();
}

}  // namespace

TEST_CASE("plugin scale multiplies int64 and float32 and passes other components", "[plugin]") {
  auto fn = MustLoad(Spec(TFDATA_EXAMPLE_PLUGIN, "scale", "3"));
  CHECK(fn->name() == "plugin");
  CHECK(fn->OutputSpec(ElementSpec{{TensorSpec{DType::kInt64, {}}}})->unknown);

  auto out = fn->Apply({Tensor::FromVector<int64_t>({2, 2}, {1, 2, 3, -4}), Tensor::String("keep")}, FunctionContext{});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  REQUIRE(out->size() == 2);
  CHECK((*out)[0] == Tensor::FromVector<int64_t>({2, 2}, {3, 6, 9, -12}));
  CHECK((*out)[1] == Tensor::String("keep"));

  auto f = fn->Apply({Tensor::Vector<float>({0.5f, 1.0f})}, FunctionContext{});
  REQUIRE(f.ok());
  CHECK((*f)[0] == Tensor::Vector<float>({1.5f, 3.0f}));

  auto empty = fn->Apply({Tensor::Zeros(DType::kInt64, {0})}, FunctionContext{});
  REQUIRE(empty.ok());
  CHECK((*empty)[0].shape() == Shape{0});
}

TEST_CASE("plugin strlen measures string scalars, embedded NULs included", "[plugin]") {
  auto fn = MustLoad(Spec(TFDATA_EXAMPLE_PLUGIN, "strlen"));
  auto out = fn->Apply({Tensor::String(std::string("hello\0world", 11))}, FunctionContext{});
  REQUIRE(out.ok());
  REQUIRE(out->size() == 1);
  CHECK((*out)[0] == Tensor::Scalar<int64_t>(11));
  out = fn->Apply({Tensor::String("")}, FunctionContext{});
  REQUIRE(out.ok());
  CHECK((*out)[0] == Tensor::Scalar<int64_t>(0));
}

TEST_CASE("plugin errors carry the library, function and plugin message", "[plugin]") {
  auto fn = MustLoad(Spec(TFDATA_EXAMPLE_PLUGIN, "scale", "2"));
  auto bad = fn->Apply({Tensor::String("x")}, FunctionContext{});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(bad.status().message()),
             Catch::StartsWith(std::string("plugin ") + TFDATA_EXAMPLE_PLUGIN + ":scale: scale: component 0"));

  const std::string create = LoadError(Spec(TFDATA_EXAMPLE_PLUGIN, "scale", "three"));
  CHECK_THAT(create, Catch::Contains(":scale: scale: config must be a number"));
}

TEST_CASE("plugin apply runs concurrently", "[plugin]") {
  auto fn = MustLoad(Spec(TFDATA_EXAMPLE_PLUGIN, "scale", "2"));
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 0; i < 500; ++i) {
        auto out = fn->Apply({Tensor::Scalar<int64_t>(i + t)}, FunctionContext{});
        if (!out.ok() || (*out)[0].GetAsInt64(0) != 2 * (i + t)) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
}

TEST_CASE("plugin load errors", "[plugin]") {
  SECTION("missing library") {
    const std::string err = LoadError(Spec("/nonexistent/libnope.so", "scale"));
    CHECK_THAT(err, Catch::Contains("cannot load library '/nonexistent/libnope.so'"));
  }
  SECTION("missing function") {
    const std::string err = LoadError(Spec(TFDATA_EXAMPLE_PLUGIN, "nope"));
    CHECK_THAT(err, Catch::Contains("plugin function 'nope' not found in"));
    CHECK_THAT(err, Catch::Contains(TFDATA_EXAMPLE_PLUGIN));
  }
  SECTION("function names must be C identifiers") {
    CHECK_THAT(LoadError(Spec(TFDATA_EXAMPLE_PLUGIN, "sc ale")), Catch::Contains("C identifier"));
    CHECK_THAT(LoadError(Spec(TFDATA_EXAMPLE_PLUGIN, "")), Catch::Contains("C identifier"));
  }
  SECTION("a library that is not a plugin") {
    CHECK_THAT(LoadError(Spec("libm.so.6", "scale")),
               Catch::Contains("libm.so.6 is not a tfdata plugin (no tfdata_plugin_abi_version)"));
  }
  SECTION("wrong ABI version") {
    const std::string err = LoadError(Spec(TFDATA_BAD_ABI_PLUGIN, "scale"));
    CHECK_THAT(err, Catch::Contains("ABI version 42"));
    CHECK_THAT(err, Catch::Contains("supports version 1"));
    CHECK_THAT(err, Catch::Contains(TFDATA_BAD_ABI_PLUGIN));
  }
  SECTION("plugins disabled") {
    FunctionOptions options;
    options.allow_plugins = false;
    auto fn = MakePlugin(Spec(TFDATA_EXAMPLE_PLUGIN, "scale", "3"), options);
    REQUIRE_FALSE(fn.ok());
    CHECK(fn.status().code() == absl::StatusCode::kPermissionDenied);
    CHECK_THAT(std::string(fn.status().message()), Catch::StartsWith("plugin functions are disabled; "));
  }
}

TEST_CASE("plugin is reachable through CreateFunction", "[plugin]") {
  pipeline::Function f;
  *f.mutable_plugin() = Spec(TFDATA_EXAMPLE_PLUGIN, "strlen");
  auto fn = CreateFunction(f, FunctionOptions{});
  REQUIRE(fn.ok());
  auto out = (*fn)->Apply({Tensor::String("abc")}, FunctionContext{});
  REQUIRE(out.ok());
  CHECK((*out)[0] == Tensor::Scalar<int64_t>(3));
}
