// The framing shared by the RPC fuzzers (dispatcher_rpc_fuzz.cc, worker_rpc_fuzz.cc): the input is
// a sequence of records
//   kind (1 byte) | length (2 bytes, little-endian; cut to what is left) | payload (length bytes)
// where the kind picks a call and the payload is its argument, usually a serialized request
// protobuf. RecordWriter writes the same framing, for the seed corpora.
//
// Not thread-safe; header-only, for the fuzzers only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>

#include "google/protobuf/message_lite.h"
#include "google/protobuf/stubs/logging.h"
#include "spdlog/spdlog.h"

namespace tfdata::fuzz {

struct Record {
  uint8_t kind = 0;
  std::span<const uint8_t> payload;
};

class RecordReader {
 public:
  RecordReader(const uint8_t* data, size_t size) : rest_(data, size) {}
  // The next byte (0 at the end).
  uint8_t Byte() {
    if (rest_.empty()) return 0;
    const uint8_t b = rest_[0];
    rest_ = rest_.subspan(1);
    return b;
  }
  // The next record, or false at the end.
  bool Next(Record* r) {
    if (rest_.empty()) return false;
    r->kind = Byte();
    size_t n = Byte();
    n |= static_cast<size_t>(Byte()) << 8;
    n = std::min(n, rest_.size());
    r->payload = rest_.first(n);
    rest_ = rest_.subspan(n);
    return true;
  }

 private:
  std::span<const uint8_t> rest_;
};

// Parses a payload as `m` (false, and `m` cleared, when it does not parse).
inline bool ParsePayload(std::span<const uint8_t> payload, google::protobuf::MessageLite* m) {
  if (m->ParseFromArray(payload.data(), static_cast<int>(payload.size()))) return true;
  m->Clear();
  return false;
}

// Builds seed inputs in the same framing.
class RecordWriter {
 public:
  RecordWriter& Byte(uint8_t b) {
    out_.push_back(static_cast<char>(b));
    return *this;
  }
  RecordWriter& Add(uint8_t kind, const std::string& payload) {
    const size_t n = std::min<size_t>(payload.size(), 0xffff);
    out_.push_back(static_cast<char>(kind));
    out_.push_back(static_cast<char>(n & 0xff));
    out_.push_back(static_cast<char>(n >> 8));
    out_.append(payload, 0, n);
    return *this;
  }
  RecordWriter& Add(uint8_t kind, const google::protobuf::MessageLite& m) { return Add(kind, m.SerializeAsString()); }
  // Writes the input to `dir`/`name`.
  void Write(const std::string& dir, const std::string& name) const {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/" + name, std::ios::binary) << out_;
  }

 private:
  std::string out_;
};

// The RPC fuzzers' LLVMFuzzerInitialize: TFDATA_FUZZ_VERBOSE=1 keeps the service's log (to see
// what an input does); TFDATA_FUZZ_WRITE_SEEDS=DIR writes the seed corpus with `write_seeds` and exits.
inline int InitRpcFuzzer(void (*write_seeds)(const std::string& dir)) {
  spdlog::set_level(std::getenv("TFDATA_FUZZ_VERBOSE") ? spdlog::level::info : spdlog::level::off);
  google::protobuf::SetLogHandler(nullptr);  // parse errors of arbitrary payloads are expected
  if (const char* dir = std::getenv("TFDATA_FUZZ_WRITE_SEEDS")) {
    write_seeds(dir);
    std::exit(0);
  }
  return 0;
}

}  // namespace tfdata::fuzz
