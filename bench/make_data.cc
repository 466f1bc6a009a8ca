// Writes a synthetic image-classification data set for the benchmarks: TFRecord files of
// tf.train.Example records, each with a JPEG ("image"), an int64 "label" and a float32[4]
// "weights". The images are smooth gradients with noise, so JPEG sizes are realistic.
//
//   tfdata_make_data --out DIR [--files 4] [--records 256] [--width 320] [--height 240] [--quality 90]
//                    [--noise 12]
// --noise N adds uniform noise in [-N, N] to each value: 12 gives noisy, entropy-heavy JPEGs (about
// 500 KB at 1080p), 2 about the size of a camera photo at that quality.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "fmt/format.h"
#include "lib/functions/image.h"
#include "lib/io/tfrecord.h"
#include "proto/example.pb.h"

using namespace tfdata;

int main(int argc, char** argv) {
  std::string out;
  int files = 4, records = 256, width = 320, height = 240, quality = 90, noise_level = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--out") out = value;
    else if (flag == "--files") files = std::atoi(value.c_str());
    else if (flag == "--records") records = std::atoi(value.c_str());
    else if (flag == "--width") width = std::atoi(value.c_str());
    else if (flag == "--height") height = std::atoi(value.c_str());
    else if (flag == "--quality") quality = std::atoi(value.c_str());
    else if (flag == "--noise") noise_level = std::atoi(value.c_str());
    else {
      fmt::print(stderr, "unknown flag {}\n", flag);
      return 2;
    }
  }
  if (out.empty() || files <= 0 || records <= 0 || width <= 0 || height <= 0 || noise_level < 0) {
    fmt::print(stderr,
               "usage: tfdata_make_data --out DIR [--files N] [--records N] [--width W] [--height H] [--quality Q] "
               "[--noise N]\n");
    return 2;
  }
  std::filesystem::create_directories(out);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> noise(-noise_level, noise_level);
  uint64_t bytes = 0;
  for (int f = 0; f < files; ++f) {
    const std::string path = fmt::format("{}/images-{:05d}-of-{:05d}.tfrecord", out, f, files);
    auto writer = TFRecordWriter::Open(path, Compression::kNone);
    if (!writer.ok()) {
      fmt::print(stderr, "{}\n", writer.status().ToString());
      return 1;
    }
    for (int r = 0; r < records; ++r) {
      Tensor img = Tensor::Zeros(DType::kUInt8, {height, width, 3});
      uint8_t* px = img.mutable_data<uint8_t>();
      const int label = (f * records + r) % 10;
      for (int y = 0; y < height; ++y) {
        for (int x = 0; x < width; ++x) {
          for (int c = 0; c < 3; ++c) {
            const int v =
                (x * 255 / width) * (c == 0) + (y * 255 / height) * (c == 1) + label * 25 * (c == 2) + noise(rng);
            px[(y * width + x) * 3 + c] = static_cast<uint8_t>(std::clamp(v, 0, 255));
          }
        }
      }
      auto jpeg = EncodeJpeg(img, quality);
      if (!jpeg.ok()) {
        fmt::print(stderr, "{}\n", jpeg.status().ToString());
        return 1;
      }
      tensorflow::Example ex;
      auto& feats = *ex.mutable_features()->mutable_feature();
      feats["image"].mutable_bytes_list()->add_value(*jpeg);
      feats["label"].mutable_int64_list()->add_value(label);
      for (int k = 0; k < 4; ++k) feats["weights"].mutable_float_list()->add_value(0.25f * static_cast<float>(k));
      std::string record;
      ex.SerializeToString(&record);
      bytes += record.size();
      if (auto st = (*writer)->Write(record); !st.ok()) {
        fmt::print(stderr, "{}\n", st.ToString());
        return 1;
      }
    }
    if (auto st = (*writer)->Close(); !st.ok()) {
      fmt::print(stderr, "{}\n", st.ToString());
      return 1;
    }
  }
  fmt::print("wrote {} files x {} records ({} bytes of records) to {}\n", files, records, bytes, out);
  return 0;
}
