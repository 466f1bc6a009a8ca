// libFuzzer target: arbitrary bytes as a serialized tf.train.Example for parse_example with a
// small spec covering every dtype, fixed and variable shapes, and defaults.
#include <google/protobuf/text_format.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/functions/function.h"

namespace {

const tfdata::Function& Fn() {
  static const tfdata::Function* fn = [] {
    tfdata::pipeline::ParseExample spec;
    const bool parsed = google::protobuf::TextFormat::ParseFromString(R"(
      feature { name: "a" dtype: INT64 default_value { int_values: 0 } }
      feature { name: "b" dtype: FLOAT32 var_len: true }
      feature { name: "c" dtype: STRING shape: 2 default_value { string_values: ["x", "y"] } }
      feature { name: "d" dtype: INT64 shape: [2, 2] default_value { int_values: [1, 2, 3, 4] } }
      feature { name: "e" dtype: FLOAT32 shape: 0 default_value { } }
    )",
                                                                      &spec);
    auto made = tfdata::MakeParseExample(spec);
    if (!parsed || !made.ok()) std::abort();  // the harness itself is broken
    return made->release();
  }();
  return *fn;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tfdata::Element in = {tfdata::Tensor::String(std::string(reinterpret_cast<const char*>(data), size))};
  auto out = Fn().Apply(std::move(in), tfdata::FunctionContext{});
  if (out.ok() && out->size() != 5) std::abort();  // one tensor per feature
  return 0;
}
