#include "lib/pipeline/fingerprint.h"

#include <xxhash.h>

#include "fmt/format.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace tfdata {

std::string PipelineFingerprint(const pipeline::Pipeline& pipeline) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    pipeline.SerializeToCodedStream(&coded);
  }
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

}  // namespace tfdata
