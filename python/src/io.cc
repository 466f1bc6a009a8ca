// Writing data from Python in the formats the pipeline reads: TFRecord files, tf.train.Example
// records, JPEG images. For tests, examples and users without TensorFlow.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <string>

#include "lib/functions/image.h"
#include "lib/io/tfrecord.h"
#include "proto/example.pb.h"
#include "python/src/status.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace tfdata::python {
namespace {

std::string BytesOf(nb::handle v, const std::string& where) {
  if (PyBytes_Check(v.ptr())) return std::string(PyBytes_AsString(v.ptr()), PyBytes_Size(v.ptr()));
  if (PyUnicode_Check(v.ptr())) return nb::cast<std::string>(v);
  throw nb::type_error(
      (where + ": expected bytes or str, got " + nb::cast<std::string>(nb::str(v.type().attr("__name__")))).c_str());
}

void WriteTFRecord(const std::string& path, nb::handle records, const std::string& compression) {
  Compression c = Compression::kNone;
  if (compression == "gzip") c = Compression::kGzip;
  else if (compression == "zlib") c = Compression::kZlib;
  else if (compression != "none") throw nb::value_error("compression: expected 'none', 'gzip' or 'zlib'");
  auto writer = Unwrap(TFRecordWriter::Open(path, c));
  size_t i = 0;
  for (nb::handle record : records) {
    RaiseIfError(writer->Write(BytesOf(record, "records[" + std::to_string(i++) + "]")));
  }
  RaiseIfError(writer->Close());
}

// features: {name: list of int | list of float | list of bytes/str} (the Python side flattens
// numpy arrays and scalars into lists and says which kind each is).
nb::bytes SerializeExample(nb::dict features) {
  tensorflow::Example ex;
  auto& out = *ex.mutable_features()->mutable_feature();
  for (auto [key, value] : features) {
    const std::string name = nb::cast<std::string>(key);
    nb::tuple kv = nb::cast<nb::tuple>(value);
    const std::string kind = nb::cast<std::string>(kv[0]);
    tensorflow::Feature& f = out[name];
    for (nb::handle v : kv[1]) {
      if (kind == "int64") f.mutable_int64_list()->add_value(nb::cast<int64_t>(v));
      else if (kind == "float") f.mutable_float_list()->add_value(nb::cast<float>(v));
      else f.mutable_bytes_list()->add_value(BytesOf(v, "feature '" + name + "'"));
    }
    if (kind == "int64") f.mutable_int64_list();
    else if (kind == "float") f.mutable_float_list();
    else f.mutable_bytes_list();
  }
  std::string s;
  ex.SerializeToString(&s);
  return nb::bytes(s.data(), s.size());
}

nb::bytes EncodeJpegBytes(nb::bytes pixels, int64_t height, int64_t width, int64_t channels, int quality) {
  if (height <= 0 || width <= 0 || (channels != 1 && channels != 3)) {
    throw nb::value_error("encode_jpeg: expected a uint8 image [height, width, 1 or 3]");
  }
  if (quality < 1 || quality > 100) throw nb::value_error("encode_jpeg: quality must be 1..100");
  if (static_cast<int64_t>(pixels.size()) != height * width * channels) {
    throw nb::value_error("encode_jpeg: pixel bytes do not match the shape");
  }
  Tensor image = Tensor::Zeros(DType::kUInt8, {height, width, channels});
  std::memcpy(image.mutable_raw(), pixels.c_str(), pixels.size());
  std::string jpeg = Unwrap(EncodeJpeg(image, quality));
  return nb::bytes(jpeg.data(), jpeg.size());
}

}  // namespace

void BindIo(nb::module_& m) {
  m.def("write_tfrecord", &WriteTFRecord, "path"_a, "records"_a, "compression"_a = "none");
  m.def("serialize_example", &SerializeExample, "features"_a);
  m.def("encode_jpeg", &EncodeJpegBytes, "pixels"_a, "height"_a, "width"_a, "channels"_a, "quality"_a);
}

}  // namespace tfdata::python
