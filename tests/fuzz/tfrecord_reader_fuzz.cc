// libFuzzer target: arbitrary bytes as a TFRecord file, read uncompressed, as gzip, and (after
// compressing them) through the gzip path, so record parsing is fuzzed behind decompression too.
// Any outcome but a crash, sanitizer report or giant allocation is fine.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/io/tfrecord.h"

namespace {

void ReadAll(const std::string& bytes, tfdata::Compression c) {
  auto reader = tfdata::TFRecordReader::FromString("fuzz.tfrecord", bytes, c);
  if (!reader.ok()) return;
  std::string record;
  for (;;) {
    auto more = (*reader)->Next(&record);
    if (!more.ok() || !*more) return;
  }
}

std::string Gzip(const std::string& in) {
  z_stream z{};
  if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END ? out : std::string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ReadAll(bytes, tfdata::Compression::kNone);
  ReadAll(bytes, tfdata::Compression::kGzip);
  ReadAll(Gzip(bytes), tfdata::Compression::kGzip);
  return 0;
}
