// Pipeline files (text, binary, JSON) and fingerprints.
#include <catch2/catch.hpp>

#include "google/protobuf/util/json_util.h"
#include "lib/pipeline/fingerprint.h"
#include "lib/pipeline/loader.h"
#include "tests/pipeline_util.h"
#include "tests/test_util.h"

using namespace tfdata;
using namespace tfdata::testing;

TEST_CASE("the same pipeline in text, binary and JSON loads the same", "[pipeline_file]") {
  TempDir dir;
  const std::string text = "op { range { stop: 10 } }\nop { batch { batch_size: 4 } }\n";
  WriteFile(dir.Join("p.pbtxt"), text);
  auto from_text = LoadPipelineFile(dir.Join("p.pbtxt"));
  REQUIRE(from_text.ok());
  std::string binary;
  REQUIRE(from_text->pipeline.SerializeToString(&binary));
  WriteFile(dir.Join("p.pb"), binary);
  std::string json;
  REQUIRE(google::protobuf::util::MessageToJsonString(from_text->pipeline, &json).ok());
  WriteFile(dir.Join("p.json"), json);
  auto from_binary = LoadPipelineFile(dir.Join("p.pb"));
  auto from_json = LoadPipelineFile(dir.Join("p.json"));
  REQUIRE(from_binary.ok());
  REQUIRE(from_json.ok());
  CHECK(PipelineFingerprint(from_binary->pipeline) == PipelineFingerprint(from_text->pipeline));
  CHECK(PipelineFingerprint(from_json->pipeline) == PipelineFingerprint(from_text->pipeline));
  auto ds = LoadDataset(dir.Join("p.json"), BuildOptions{});
  REQUIRE(ds.ok());
  CHECK(Collect(**ds)->size() == 3);
}

TEST_CASE("bad pipeline files give errors naming the file", "[pipeline_file]") {
  TempDir dir;
  auto missing = LoadPipelineFile(dir.Join("nope.pbtxt"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(missing.status().message()), Catch::Contains("nope.pbtxt"));
  WriteFile(dir.Join("bad.pb"), "\xff\xff\xff garbage");
  auto bad = LoadPipelineFile(dir.Join("bad.pb"));
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::Contains("bad.pb"));
  WriteFile(dir.Join("bad.json"), "{\"op\": [{\"rnage\": {}}]}");
  auto badj = LoadPipelineFile(dir.Join("bad.json"));
  REQUIRE_FALSE(badj.ok());
  CHECK_THAT(std::string(badj.status().message()), Catch::Contains("bad.json"));
  WriteFile(dir.Join("bad.pbtxt"), "op {\n  range { stop: 10 }\n  batch { batch_size: 2 }\n}\n");
  auto two_kinds = LoadPipelineFile(dir.Join("bad.pbtxt"));
  REQUIRE_FALSE(two_kinds.ok());  // two members of one oneof
  CHECK_THAT(std::string(two_kinds.status().message()), Catch::StartsWith(dir.Join("bad.pbtxt") + ":3:"));
}

TEST_CASE("fingerprints are stable and tell pipelines apart", "[pipeline_file]") {
  auto a = ParsePipelineText("op { range { stop: 10 } }");
  auto b = ParsePipelineText("op {\n  range {\n    start: 0\n    stop: 10\n  }\n}\n");
  auto c = ParsePipelineText("op { range { stop: 11 } }");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  REQUIRE(c.ok());
  const std::string fa = PipelineFingerprint(a->pipeline);
  CHECK(fa.size() == 32);
  CHECK(fa == PipelineFingerprint(b->pipeline));
  CHECK(fa != PipelineFingerprint(c->pipeline));
  // A fixed value guards against accidental changes of the hashed form across versions/machines.
  CHECK(fa == PipelineFingerprint(a->pipeline));
  // Expected value computed independently: XXH3-128 of the bytes 0a 04 0a 02 10 0a (python xxhash).
  CHECK(fa == "e9c1a533262deeca639b2b3e5ddca057");
}
