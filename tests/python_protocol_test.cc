// The worker <-> Python helper protocol (lib/python_functions/protocol.h): requests, responses and
// calls round-trip; truncated or corrupt messages are errors, not crashes; a region grows.
#include <catch2/catch.hpp>
#include <cstring>

#include "lib/python_functions/protocol.h"

using namespace tfdata;
using namespace tfdata::python_functions;

namespace {

Element Image(uint8_t v, int64_t height = 4) {
  auto buffer = Buffer::Allocate(height * 5 * 3);
  std::memset(buffer->mutable_data(), v, buffer->size());
  Element e;
  e.push_back(*Tensor::FromBuffer(DType::kUInt8, {height, 5, 3}, buffer, 0, buffer->size()));
  e.push_back(Tensor::Scalar<int64_t>(v));
  e.push_back(Tensor::String("name"));
  return e;
}

}  // namespace

TEST_CASE("python protocol: a request and a response round-trip, growing their regions", "[python_functions]") {
  auto request = SharedRegion::Create("test-request", 64);
  REQUIRE(request.ok());
  std::vector<Element> inputs;
  for (int i = 0; i < 3000; ++i) inputs.push_back(Image(static_cast<uint8_t>(i)));  // > 64 bytes: grows
  auto bytes = WriteRequest(inputs, &*request);
  REQUIRE(bytes.ok());
  CHECK(request->size() >= *bytes);
  Call call;
  call.count = static_cast<uint32_t>(inputs.size());
  call.request_bytes = *bytes;
  auto back = ReadRequest(&*request, call);
  REQUIRE(back.ok());
  CHECK(*back == inputs);

  auto response = SharedRegion::Create("test-response", 64);
  REQUIRE(response.ok());
  ResponseWriter w(&*response);
  REQUIRE(w.AddElements({Image(1), Image(2)}).ok());  // flat_map: two
  REQUIRE(w.AddError(absl::InvalidArgumentError("python function 'f' raised ValueError: x")).ok());
  REQUIRE(w.AddElements({}).ok());  // flat_map: none
  ReplyHeader reply;
  reply.count = 3;
  reply.response_bytes = w.bytes();
  auto results = ReadResponse(&*response, reply, 3);
  REQUIRE(results.ok());
  REQUIRE(results->size() == 3);
  CHECK(*(*results)[0] == std::vector<Element>{Image(1), Image(2)});
  CHECK((*results)[1].status() == absl::InvalidArgumentError("python function 'f' raised ValueError: x"));
  CHECK((*results)[2]->empty());
}

TEST_CASE("python protocol: calls round-trip, and corrupt messages and regions are errors", "[python_functions]") {
  const std::string message =
      EncodeCall(PythonCallKind::kFilter, "augment",
                 PythonCallNames{std::vector<std::string>{"image", "label"}, {"img", "y", "z"}}, 7, 1234, 2);
  auto call = DecodeCall(message);
  REQUIRE(call.ok());
  CHECK(call->kind == PythonCallKind::kFilter);
  CHECK(call->response == 2);
  const std::string past = EncodeCall(PythonCallKind::kMap, "augment", {}, 1, 8, kResponseRegions);
  auto bad_region = DecodeCall(past);
  REQUIRE_FALSE(bad_region.ok());
  CHECK(bad_region.status().message().find("response region 3") != std::string::npos);
  CHECK(call->name == "augment");
  CHECK(call->names.inputs == std::vector<std::string>{"image", "label"});
  CHECK(call->names.outputs == std::vector<std::string>{"img", "y", "z"});
  auto unnamed = DecodeCall(EncodeCall(PythonCallKind::kMap, "f", {}, 1, 8));
  REQUIRE(unnamed.ok());
  CHECK_FALSE(unnamed->names.inputs.has_value());
  CHECK(unnamed->names.outputs.empty());
  CHECK(call->count == 7);
  CHECK(call->request_bytes == 1234);
  CHECK_FALSE(DecodeCall(message.substr(0, 10)).ok());
  CHECK_FALSE(DecodeCall(message + "x").ok());

  auto response = SharedRegion::Create("test-response", 4096);
  REQUIRE(response.ok());
  ResponseWriter w(&*response);
  REQUIRE(w.AddElements({Image(3)}).ok());
  ReplyHeader reply;
  reply.count = 1;
  reply.response_bytes = w.bytes();
  CHECK_FALSE(ReadResponse(&*response, reply, 2).ok());  // a count that differs
  reply.response_bytes = w.bytes() - 9;                  // truncated
  auto truncated = ReadResponse(&*response, reply, 1);
  REQUIRE_FALSE(truncated.ok());
  CHECK(absl::IsDataLoss(truncated.status()));
  reply.response_bytes = response->size() + 1;  // past the region: it did not grow that far
  CHECK_FALSE(ReadResponse(&*response, reply, 1).ok());
}

TEST_CASE("python protocol: results alias the response region and keep it mapped", "[python_functions]") {
  auto response = SharedRegion::Create("test-response", 4096);
  REQUIRE(response.ok());
  ResponseWriter w(&*response);
  REQUIRE(w.AddElements({Image(5, 100)}).ok());
  // An entry that fails half-way is dropped whole, and an error takes its place.
  const size_t mark = w.bytes();
  REQUIRE(w.AddElements({Image(6)}).ok());
  w.Truncate(mark);
  REQUIRE(w.AddError(absl::InvalidArgumentError("rank 33")).ok());
  ReplyHeader reply;
  reply.count = 2;
  reply.response_bytes = w.bytes();
  auto owner = std::make_shared<int>(0);
  std::weak_ptr<int> released = owner;
  std::optional<Tensor> image;
  {
    auto results = ReadResponse(&*response, reply, 2, std::shared_ptr<const void>(std::move(owner)));
    REQUIRE(results.ok());
    REQUIRE((*results)[0].ok());
    CHECK(*(*results)[0] == std::vector<Element>{Image(5, 100)});
    CHECK((*results)[1].status() == absl::InvalidArgumentError("rank 33"));
    image = (*(*results)[0])[0][0];
  }
  // The image's bytes are the region's own (no copy), and its owner lives as long as it does.
  const uint8_t* data = image->raw();
  CHECK(data >= response->data());
  CHECK(data < response->data() + reply.response_bytes);
  CHECK_FALSE(released.expired());
  image.reset();
  CHECK(released.expired());
}
