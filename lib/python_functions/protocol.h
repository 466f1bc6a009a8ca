// The messages between a worker and its Python helper processes (helper_pool.h). Control
// messages travel over a SOCK_SEQPACKET socket pair; elements travel through two shared regions
// (shared_region.h), the request region written by the worker and a response region written by
// the helper, so that a 1 MB image crosses once each way without passing through the socket.
// Each helper has kResponseRegions response regions and the call names the one to write: the
// worker's tensors alias a region's results until they are released (no copy out), and meanwhile
// the next calls write the others. The last region is never aliased (its results are copied
// out), so that a call always has one to write when elements are held long (a shuffle buffer).
//
//   hello  helper -> worker, once: "ok\n" then the loaded function names, one per line; or
//          "error\n" then why the helper could not start (an import failed, with its traceback).
//   call   worker -> helper: CallHeader (with the response region's index), the function name,
//          the input's component names, then the output names (each name followed by '\0';
//          none when there are none). The request region holds
//          `count` entries: [u64 frame size][element frame][zeros to 8 bytes].
//   reply  helper -> worker: ReplyHeader. The response region holds, from kResultsOffset, one
//          entry per input: [u32 status code][u32 0][u64 n], then (code 0) n times
//          [u64 frame size][frame][zeros to 8] or (otherwise) n bytes of message, zeros to 8.
//          Its first 8 bytes count the inputs done so far in this call (the worker's watchdog
//          tells a slow batch from a hung call by it).
//
// Element frames are lib/core/element_codec.h's. Decoding checks every size against the region,
// so a helper that writes garbage yields an error, not a crash. Stateless, thread-compatible.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/tensor.h"
#include "lib/functions/python_host.h"
#include "lib/python_functions/shared_region.h"

namespace tfdata::python_functions {

// Bumped whenever the messages or regions change: a worker and a helper from different tfdata
// versions (the binary and the pip package) refuse each other at start, with a clear error.
inline constexpr int kProtocolVersion = 2;
inline constexpr uint32_t kCallMagic = 0x54465043;   // "CPFT"
inline constexpr uint32_t kReplyMagic = 0x54465052;  // "RPFT"
inline constexpr size_t kResultsOffset = 64;
inline constexpr int kResponseRegions = 3;
// Control messages are small; names are bounded so that a header always fits.
inline constexpr size_t kMaxControlBytes = 64 << 10;

struct CallHeader {
  uint32_t magic = kCallMagic;
  uint8_t kind = 0;      // PythonCallKind
  uint8_t response = 0;  // the response region to write, < kResponseRegions
  uint8_t reserved[2] = {0, 0};
  uint32_t count = 0;               // inputs
  uint32_t name_bytes = 0;          // the function name's length
  uint32_t names_bytes = 0;         // the input component names' bytes
  uint32_t output_names_bytes = 0;  // the output names' bytes
  uint64_t request_bytes = 0;
};

struct ReplyHeader {
  uint32_t magic = kReplyMagic;
  uint32_t count = 0;
  uint64_t response_bytes = 0;
};

// The counter of inputs done in the current call, at the start of the response region.
inline std::atomic<uint64_t>* Progress(const SharedRegion& response) {
  return reinterpret_cast<std::atomic<uint64_t>*>(response.data());
}

// A call message (header and names), and its parts back.
std::string EncodeCall(PythonCallKind kind, const std::string& name, const PythonCallNames& names, uint32_t count,
                       uint64_t request_bytes, int response = 0);
struct Call {
  PythonCallKind kind = PythonCallKind::kMap;
  int response = 0;
  std::string name;
  PythonCallNames names;
  uint32_t count = 0;
  uint64_t request_bytes = 0;
};
absl::StatusOr<Call> DecodeCall(const std::string& message);

// Worker: writes the inputs into `region` (growing it); returns the bytes written.
absl::StatusOr<size_t> WriteRequest(const std::vector<Element>& inputs, SharedRegion* region);
// Helper: the inputs, aliasing the region's current mapping (valid while it is not overwritten).
absl::StatusOr<std::vector<Element>> ReadRequest(SharedRegion* region, const Call& call);

// Helper: appends one entry per input to the response region.
class ResponseWriter {
 public:
  explicit ResponseWriter(SharedRegion* region) : region_(region) {}
  absl::Status AddElements(const std::vector<Element>& elements);
  absl::Status AddError(const absl::Status& error);
  size_t bytes() const { return offset_; }
  // Drops what was appended after `bytes()` was `mark` (an entry that failed half-way).
  void Truncate(size_t mark) { offset_ = mark; }

 private:
  absl::Status Append(const void* data, size_t size);
  absl::Status Pad();
  SharedRegion* region_;
  size_t offset_ = kResultsOffset;
};

// Worker: the results of a reply. With `owner`, their tensors alias the region's current mapping
// and hold `owner` (which must keep that mapping alive and the region unwritten until released);
// without, they are copied out (the next call rewrites the region).
absl::StatusOr<std::vector<PythonCallResult>> ReadResponse(SharedRegion* region, const ReplyHeader& reply,
                                                           uint32_t count, std::shared_ptr<const void> owner = nullptr);

}  // namespace tfdata::python_functions
