// libFuzzer target for the Python helper protocol (lib/python_functions/protocol.h): what a worker
// accepts from a helper process (a reply and the response region it points into), and what a
// helper accepts from the worker (a call and its request region). Arbitrary bytes must decode or
// fail cleanly; a response that decodes must re-encode to one that decodes to the same results.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "lib/python_functions/protocol.h"

using namespace tfdata;
using namespace tfdata::python_functions;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const uint32_t count = data[0] % 8;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  // As a response region: the bytes after the progress counter.
  auto region = SharedRegion::Create("fuzz", kResultsOffset + bytes.size());
  if (!region.ok()) std::abort();
  std::memcpy(region->data() + kResultsOffset, bytes.data(), bytes.size());
  ReplyHeader reply;
  reply.count = count;
  reply.response_bytes = kResultsOffset + bytes.size();
  auto results = ReadResponse(&*region, reply, count);
  // Aliasing the region instead of copying decodes the same, or fails the same.
  auto aliased = ReadResponse(&*region, reply, count, region->mapping());
  if (aliased.ok() != results.ok()) std::abort();
  if (results.ok()) {
    for (size_t i = 0; i < results->size(); ++i) {
      const PythonCallResult &a = (*aliased)[i], &r = (*results)[i];
      if (a.ok() != r.ok() || (a.ok() ? *a != *r : a.status() != r.status())) std::abort();
    }
  }
  if (results.ok()) {
    auto again = SharedRegion::Create("fuzz-again", 4096);
    if (!again.ok()) std::abort();
    ResponseWriter w(&*again);
    for (const PythonCallResult& r : *results) {
      if (!(r.ok() ? w.AddElements(*r) : w.AddError(r.status())).ok()) std::abort();
    }
    ReplyHeader reply2;
    reply2.count = count;
    reply2.response_bytes = w.bytes();
    auto back = ReadResponse(&*again, reply2, count);
    if (!back.ok() || back->size() != results->size()) std::abort();
    for (size_t i = 0; i < back->size(); ++i) {
      if ((*back)[i].ok() != (*results)[i].ok()) std::abort();
      if ((*back)[i].ok() ? *(*back)[i] != *(*results)[i] : (*back)[i].status() != (*results)[i].status()) {
        std::abort();
      }
    }
  }
  // As a call message, and its request region.
  auto call = DecodeCall(bytes);
  if (call.ok()) {
    Call c = *call;
    c.request_bytes = bytes.size();
    auto request = SharedRegion::Create("fuzz-request", bytes.size() + 1);
    if (!request.ok()) std::abort();
    std::memcpy(request->data(), bytes.data(), bytes.size());
    (void)ReadRequest(&*request, c);
  }
  return 0;
}
