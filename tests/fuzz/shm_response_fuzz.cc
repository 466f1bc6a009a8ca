// libFuzzer target for the shared-memory response decoder (what a reader accepts from a worker on
// its host): a ShmResponse and the bytes the worker wrote, both arbitrary. They must decode or
// fail cleanly, never read outside the bytes; what decodes must re-write (WriteFrames) to frames
// that decode to the same elements.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "lib/service/shm/shm_frames.h"
#include "proto/shm.pb.h"

using namespace tfdata;
using namespace tfdata::service::shm;
using tfdata::service::ShmResponse;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // The first byte splits the input: that many bytes (mod what there is) of message, the rest frames.
  const size_t message_bytes = std::min<size_t>(data[0], size - 1);
  ShmResponse response;
  if (!response.ParseFromArray(data + 1, static_cast<int>(message_bytes))) return 0;
  const size_t frames_bytes = size - 1 - message_bytes;
  // An exactly-sized buffer, so that ASan sees any read past the worker's bytes.
  auto frames = Buffer::Allocate(frames_bytes);
  if (frames_bytes > 0) std::memcpy(frames->mutable_data(), data + 1 + message_bytes, frames_bytes);
  auto a = DecodeShmResponse(response, frames);
  if (!a.ok()) return 0;
  auto copy = Buffer::Allocate(FramesBytes(a->elements));
  ShmResponse again;
  if (!WriteFrames(a->elements, copy->mutable_data(), &again).ok()) std::abort();
  auto b = DecodeShmResponse(again, copy);
  if (!b.ok() || b->elements != a->elements) std::abort();
  return 0;
}
