#include <catch2/catch.hpp>

#include "lib/functions/function.h"
#include "tests/test_util.h"

using namespace tfdata;
using tfdata::testing::TempDir;
using tfdata::testing::WriteFile;

namespace {

std::unique_ptr<Function> MustMake(const pipeline::Tokenize& spec) {
  auto fn = MakeTokenize(spec);
  INFO(fn.status().ToString());
  REQUIRE(fn.ok());
  return *std::move(fn);
}

Element ApplyOk(const Function& fn, Element in) {
  auto out = fn.Apply(std::move(in), FunctionContext{});
  INFO(out.status().ToString());
  REQUIRE(out.ok());
  return *std::move(out);
}

std::vector<std::string> Tokens(const Function& fn, const std::string& text) {
  Element out = ApplyOk(fn, {Tensor::String(text)});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].dtype() == DType::kString);
  REQUIRE(out[0].rank() == 1);
  return out[0].strings();
}

std::vector<int64_t> Ids(const Function& fn, const std::string& text) {
  Element out = ApplyOk(fn, {Tensor::String(text)});
  REQUIRE(out[0].dtype() == DType::kInt64);
  REQUIRE(out[0].rank() == 1);
  auto v = out[0].values<int64_t>();
  return {v.begin(), v.end()};
}

using Strings = std::vector<std::string>;

}  // namespace

TEST_CASE("tokenize splits on whitespace and skips empty tokens", "[tokenize]") {
  auto fn = MustMake(pipeline::Tokenize{});
  CHECK(Tokens(*fn, "  Hello\tworld \n\r foo  ") == Strings{"Hello", "world", "foo"});
  CHECK(Tokens(*fn, "").empty());
  CHECK(Tokens(*fn, " \t\n").empty());
  CHECK(Tokens(*fn, "one") == Strings{"one"});
}

TEST_CASE("tokenize uses custom delimiters and ASCII lowercasing", "[tokenize]") {
  pipeline::Tokenize spec;
  spec.set_delimiters(",;");
  spec.set_lowercase(true);
  auto fn = MustMake(spec);
  // Spaces are ordinary characters once delimiters are given; non-ASCII bytes are kept as is.
  CHECK(Tokens(*fn, "A,,b;C d;;\xc3\x89T\xc3\xa9") == Strings{"a", "b", "c d", "\xc3\x89t\xc3\xa9"});
}

TEST_CASE("tokenize pads and truncates strings to max_length", "[tokenize]") {
  pipeline::Tokenize spec;
  spec.set_max_length(3);
  auto fn = MustMake(spec);
  CHECK(Tokens(*fn, "a b") == Strings{"a", "b", ""});
  CHECK(Tokens(*fn, "a b c d e") == Strings{"a", "b", "c"});
  CHECK(Tokens(*fn, "") == Strings{"", "", ""});
}

TEST_CASE("tokenize keeps the other components", "[tokenize]") {
  pipeline::Tokenize spec;
  spec.set_component(1);
  auto fn = MustMake(spec);
  Element out = ApplyOk(*fn, {Tensor::Scalar<int64_t>(7), Tensor::String("x y"), Tensor::String("z w")});
  REQUIRE(out.size() == 3);
  CHECK(out[0] == Tensor::Scalar<int64_t>(7));
  CHECK(out[1] == Tensor::Strings({2}, {"x", "y"}));
  CHECK(out[2] == Tensor::String("z w"));
}

TEST_CASE("tokenize maps tokens to vocabulary ids", "[tokenize]") {
  TempDir dir;
  const std::string vocab = dir.Join("vocab.txt");
  // Line numbers are ids; a duplicate keeps its first id; "\r\n" endings are accepted.
  WriteFile(vocab, "the\nquick\r\nbrown\n\nfox\nthe\n");
  pipeline::Tokenize spec;
  spec.set_vocab_file(vocab);
  spec.set_unk_id(-1);
  spec.set_lowercase(true);
  auto fn = MustMake(spec);
  CHECK(Ids(*fn, "The quick red fox") == std::vector<int64_t>{0, 1, -1, 4});
  CHECK(Ids(*fn, "").empty());

  spec.set_max_length(3);
  spec.set_pad_id(99);
  auto fixed = MustMake(spec);
  CHECK(Ids(*fixed, "brown") == std::vector<int64_t>{2, 99, 99});
  CHECK(Ids(*fixed, "fox fox fox the the") == std::vector<int64_t>{4, 4, 4});
}

TEST_CASE("tokenize reports bad arguments and vocab files", "[tokenize]") {
  TempDir dir;
  pipeline::Tokenize spec;
  spec.set_max_length(-1);
  auto neg = MakeTokenize(spec);
  REQUIRE_FALSE(neg.ok());
  CHECK_THAT(std::string(neg.status().message()), Catch::Contains("max_length"));

  spec.set_max_length(0);
  spec.set_vocab_file(dir.Join("missing.txt"));
  auto missing = MakeTokenize(spec);
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("missing.txt"));

  WriteFile(dir.Join("empty.txt"), "\n\n");
  spec.set_vocab_file(dir.Join("empty.txt"));
  auto empty = MakeTokenize(spec);
  REQUIRE_FALSE(empty.ok());
  CHECK_THAT(std::string(empty.status().message()), Catch::Contains("empty.txt"));

  spec.set_vocab_file(dir.path());  // a directory is not readable as a file
  CHECK_FALSE(MakeTokenize(spec).ok());
}

TEST_CASE("tokenize rejects inputs that are not string scalars", "[tokenize]") {
  auto fn = MustMake(pipeline::Tokenize{});
  auto num = fn->Apply({Tensor::Scalar<int64_t>(1)}, FunctionContext{});
  REQUIRE_FALSE(num.ok());
  CHECK_THAT(std::string(num.status().message()), Catch::Contains("string scalar"));
  CHECK_FALSE(fn->Apply({Tensor::Strings({2}, {"a", "b"})}, FunctionContext{}).ok());
  CHECK_FALSE(fn->Apply({}, FunctionContext{}).ok());
}

TEST_CASE("tokenize output specs", "[tokenize]") {
  const ElementSpec scalar{{TensorSpec{DType::kString, {}}}};
  auto fn = MustMake(pipeline::Tokenize{});
  auto out = fn->OutputSpec(scalar);
  REQUIRE(out.ok());
  CHECK(out->components.at(0) == TensorSpec{DType::kString, {-1}});

  TempDir dir;
  WriteFile(dir.Join("v.txt"), "a\n");
  pipeline::Tokenize spec;
  spec.set_vocab_file(dir.Join("v.txt"));
  spec.set_max_length(5);
  auto ids = MustMake(spec);
  out = ids->OutputSpec(scalar);
  REQUIRE(out.ok());
  CHECK(out->components.at(0) == TensorSpec{DType::kInt64, {5}});

  CHECK(fn->OutputSpec(ElementSpec::Unknown()).ok());
  CHECK(fn->OutputSpec(ElementSpec{{TensorSpec{DType::kString, {}, true}}}).ok());
  auto wrong = fn->OutputSpec(ElementSpec{{TensorSpec{DType::kInt64, {}}}});
  REQUIRE_FALSE(wrong.ok());
  CHECK_THAT(std::string(wrong.status().message()), Catch::Contains("int64[]"));
  CHECK_FALSE(fn->OutputSpec(ElementSpec{{TensorSpec{DType::kString, {3}}}}).ok());
  CHECK_FALSE(fn->OutputSpec(ElementSpec{}).ok());
}

TEST_CASE("tokenize is reachable through CreateFunction", "[tokenize]") {
  pipeline::Function f;
  f.mutable_tokenize()->set_delimiters("-");
  auto fn = CreateFunction(f, FunctionOptions{});
  REQUIRE(fn.ok());
  CHECK((*fn)->name() == "tokenize");
  CHECK(Tokens(**fn, "a-b") == Strings{"a", "b"});
}
