// decode_jpeg (libjpeg-turbo) and the EncodeJpeg test helper.
//
// libjpeg reports fatal errors by calling error_exit, which must not return; we longjmp back to
// the setjmp in the small C-style functions below (Read*/Compress). longjmp skips destructors,
// so those functions only touch plain C data owned by their caller; every C++ object (tensors,
// strings, vectors) lives in the callers, whose frames longjmp never crosses.
#include <algorithm>
#include <csetjmp>
#include <cstdio>  // jpeglib.h uses FILE and size_t without including anything
#include <cstring>
#include <vector>

#include <jerror.h>
#include <jpeglib.h>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/functions/function.h"
#include "lib/functions/image.h"

namespace tfdata {
namespace {

// Progressive files can carry thousands of tiny scans that each cost a full pass over the
// coefficients: a known CPU-exhaustion vector. Real encoders emit about ten.
constexpr int kMaxScans = 1000;
// Rows handed to jpeg_read_scanlines per call (it may return fewer).
constexpr int kRowBatch = 16;

// jpeg_error_mgr must be first: libjpeg passes us a jpeg_error_mgr* that we cast back.
struct ErrorState {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void ErrorExit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorState*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

void EmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;  // trace output
  // On truncated input libjpeg only warns and pads the image with gray; a half-gray training
  // image is worse than an error, so that one warning is fatal. Other corruption warnings are
  // tolerated (real-world files often have extraneous bytes), as libjpeg itself does.
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) ErrorExit(cinfo);
  cinfo->err->num_warnings++;
}

void OutputMessage(j_common_ptr) {}  // never print to stderr

void InstallErrorHandlers(ErrorState* err) {
  jpeg_std_error(&err->mgr);
  err->mgr.error_exit = ErrorExit;
  err->mgr.emit_message = EmitMessage;
  err->mgr.output_message = OutputMessage;
  err->message[0] = '\0';
}

void LimitScans(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->progressive_mode && d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorState*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message), "more than %d progressive scans", kMaxScans);
    longjmp(err->jump, 1);
  }
}

// Plain C state of one decode; the owner (a C++ object) destroys it.
struct Decoder {
  jpeg_decompress_struct cinfo;
  ErrorState err;
  jpeg_progress_mgr progress;

  Decoder() {
    std::memset(&cinfo, 0, sizeof(cinfo));  // jpeg_destroy is a no-op on a zeroed struct
    InstallErrorHandlers(&err);
    cinfo.err = &err.mgr;
    progress = {};
    progress.progress_monitor = LimitScans;
  }
  ~Decoder() { jpeg_destroy_decompress(&cinfo); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
};

// The three phases below return false after a libjpeg error (message in d->err.message).
bool ReadHeader(Decoder* d, const uint8_t* data, size_t size) {
  if (setjmp(d->err.jump)) return false;
  jpeg_create_decompress(&d->cinfo);
  d->cinfo.progress = &d->progress;
  jpeg_mem_src(&d->cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&d->cinfo, TRUE);
  return true;
}

bool StartOutput(Decoder* d, J_COLOR_SPACE out_space, bool accurate_dct) {
  if (setjmp(d->err.jump)) return false;
  d->cinfo.out_color_space = out_space;
  // TensorFlow's default (dct_method "" or INTEGER_FAST) is JDCT_IFAST; INTEGER_ACCURATE is ISLOW.
  d->cinfo.dct_method = accurate_dct ? JDCT_ISLOW : JDCT_IFAST;
  // A reduced-scale decode (decode_jpeg with a target size) is no TF-parity path: it also skips
  // the smooth chroma upsampling, which a resize to the target mostly averages away anyway.
  if (d->cinfo.scale_num < d->cinfo.scale_denom) d->cinfo.do_fancy_upsampling = FALSE;
  jpeg_start_decompress(&d->cinfo);
  return true;
}

// Writes output_height rows of `row_bytes` each to `out`.
bool ReadRows(Decoder* d, uint8_t* out, size_t row_bytes) {
  if (setjmp(d->err.jump)) return false;
  JSAMPROW rows[kRowBatch];
  while (d->cinfo.output_scanline < d->cinfo.output_height) {
    const JDIMENSION first = d->cinfo.output_scanline;
    const JDIMENSION n = std::min<JDIMENSION>(kRowBatch, d->cinfo.output_height - first);
    for (JDIMENSION i = 0; i < n; ++i) rows[i] = out + (first + i) * row_bytes;
    if (jpeg_read_scanlines(&d->cinfo, rows, n) == 0) {
      // Only a suspending data source returns 0 rows; the memory source never does.
      std::snprintf(d->err.message, sizeof(d->err.message), "decoder made no progress");
      return false;
    }
  }
  // No jpeg_finish_decompress: it only reads up to EOI, and a file whose pixels are complete
  // but lacks the EOI marker is worth accepting.
  return true;
}

absl::Status JpegError(const Decoder& d) {
  return absl::InvalidArgumentError(fmt::format("decode_jpeg: invalid JPEG data: {}", d.err.message));
}

// Adobe-style CMYK (libjpeg outputs inverted values when the Adobe marker is present) to RGB.
void CmykToRgb(const uint8_t* cmyk, size_t pixels, bool inverted, uint8_t* rgb) {
  for (size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
    const int k = inverted ? cmyk[3] : 255 - cmyk[3];
    for (int j = 0; j < 3; ++j) {
      const int v = inverted ? cmyk[j] : 255 - cmyk[j];
      rgb[j] = static_cast<uint8_t>(v * k / 255);  // truncated, as TensorFlow converts
    }
  }
}

// ITU-R BT.601 luma, the weights libjpeg uses for its own RGB -> grayscale conversion.
void RgbToGray(const uint8_t* rgb, size_t pixels, uint8_t* gray) {
  for (size_t i = 0; i < pixels; ++i, rgb += 3) {
    gray[i] = static_cast<uint8_t>((19595 * rgb[0] + 38470 * rgb[1] + 7471 * rgb[2] + 32768) >> 16);
  }
}

class DecodeJpegFn final : public Function {
 public:
  DecodeJpegFn(int component, int channels, bool accurate_dct, int64_t resize_height, int64_t resize_width,
               MemoryScope memory)
      : component_(component),
        channels_(channels),
        accurate_dct_(accurate_dct),
        resize_height_(resize_height),
        resize_width_(resize_width),
        memory_(std::move(memory)) {}
  std::string_view name() const override { return "decode_jpeg"; }

  absl::StatusOr<ElementSpec> OutputSpec(const ElementSpec& input) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(name(), component_, input));
    if (input.unknown) return input;
    const TensorSpec& c = input.components[static_cast<size_t>(component_)];
    if (c.dtype != DType::kString || (!c.unknown_rank && !c.shape.empty())) {
      return absl::InvalidArgumentError(fmt::format(
          "decode_jpeg: component {} must be a string scalar (JPEG bytes), got {}", component_, c.DebugString()));
    }
    ElementSpec out = input;
    const int64_t ch = channels_ == 0 ? -1 : channels_;
    out.components[static_cast<size_t>(component_)] =
        resize_height_ > 0 ? TensorSpec{DType::kFloat32, Shape{resize_height_, resize_width_, ch}, false}
                           : TensorSpec{DType::kUInt8, Shape{-1, -1, ch}, false};
    return out;
  }

  absl::StatusOr<Element> Apply(Element input, const FunctionContext&) const override {
    TFD_RETURN_IF_ERROR(CheckComponent(name(), component_, input.size()));
    Tensor& t = input[static_cast<size_t>(component_)];
    if (!t.is_string() || t.rank() != 0) {
      return absl::InvalidArgumentError(fmt::format(
          "decode_jpeg: component {} must be a string scalar (JPEG bytes), got {}", component_, t.TypeString()));
    }
    TFD_ASSIGN_OR_RETURN(t, DecodeJpegImage(t.strings()[0], channels_, kMaxImagePixels, &memory_, accurate_dct_,
                                            resize_height_, resize_width_));
    if (resize_height_ > 0) {
      TFD_ASSIGN_OR_RETURN(t, ResizeImage(t, resize_height_, resize_width_, false, &memory_));
    }
    return input;
  }

 private:
  int component_;
  int channels_;
  bool accurate_dct_;
  int64_t resize_height_, resize_width_;  // 0: no resize
  MemoryScope memory_;
};

}  // namespace

absl::StatusOr<Tensor> DecodeJpegImage(std::string_view data, int channels, int64_t max_pixels,
                                       const MemoryScope* memory, bool accurate_dct, int64_t min_height,
                                       int64_t min_width) {
  if (channels != 0 && channels != 1 && channels != 3) {
    return absl::InvalidArgumentError(fmt::format("decode_jpeg: channels must be 0, 1 or 3, got {}", channels));
  }
  Decoder d;
  if (!ReadHeader(&d, reinterpret_cast<const uint8_t*>(data.data()), data.size())) return JpegError(d);
  if (int64_t{d.cinfo.image_height} * d.cinfo.image_width > max_pixels) {
    return absl::InvalidArgumentError(fmt::format("decode_jpeg: image is {}x{} pixels, more than the limit of {}",
                                                  d.cinfo.image_height, d.cinfo.image_width, max_pixels));
  }
  // The smallest scale M/8 whose output still covers the target (libjpeg rounds the output size
  // up, as `scaled` does; StartOutput's result is checked against it below).
  auto scaled = [](int64_t size, int m) { return (size * m + 7) / 8; };
  int m = 8;
  if (min_height > 0 && min_width > 0) {
    m = 1;
    while (m < 8 && (scaled(d.cinfo.image_height, m) < min_height || scaled(d.cinfo.image_width, m) < min_width)) ++m;
  }
  d.cinfo.scale_num = static_cast<unsigned>(m);
  d.cinfo.scale_denom = 8;
  const int64_t height = scaled(d.cinfo.image_height, m);
  const int64_t width = scaled(d.cinfo.image_width, m);
  const bool cmyk = d.cinfo.jpeg_color_space == JCS_CMYK || d.cinfo.jpeg_color_space == JCS_YCCK;
  const bool gray_source = d.cinfo.jpeg_color_space == JCS_GRAYSCALE;
  const int out_channels = channels != 0 ? channels : (gray_source ? 1 : 3);
  // libjpeg cannot convert CMYK to RGB or gray itself, so those files are decoded as CMYK and
  // converted below.
  const J_COLOR_SPACE space = cmyk ? JCS_CMYK : (out_channels == 1 ? JCS_GRAYSCALE : JCS_RGB);
  if (!StartOutput(&d, space, accurate_dct)) return JpegError(d);
  const int decoded_channels = d.cinfo.output_components;
  if (d.cinfo.output_height != height || d.cinfo.output_width != width ||
      decoded_channels != (cmyk ? 4 : out_channels)) {
    return absl::InternalError(fmt::format("decode_jpeg: unexpected libjpeg output {}x{}x{}", d.cinfo.output_height,
                                           d.cinfo.output_width, decoded_channels));
  }

  const size_t pixels = static_cast<size_t>(height * width);
  if (memory != nullptr) {
    TFD_RETURN_IF_ERROR(memory->get().CheckAllocation(
        static_cast<int64_t>(pixels) * (cmyk ? 4 + out_channels : out_channels), memory->where,
        fmt::format("decoding a {}x{}x{} image", height, width, out_channels)));
  }
  // Uninitialized on purpose: every byte is written by the decoder, and zeroing a large image
  // first would double the memory traffic.
  auto buffer = Buffer::Allocate(pixels * static_cast<size_t>(out_channels));
  if (!cmyk) {
    if (!ReadRows(&d, buffer->mutable_data(), static_cast<size_t>(width) * static_cast<size_t>(out_channels))) {
      return JpegError(d);
    }
  } else {
    std::vector<uint8_t> scratch(pixels * 4);
    if (!ReadRows(&d, scratch.data(), static_cast<size_t>(width) * 4)) return JpegError(d);
    const bool inverted = d.cinfo.saw_Adobe_marker;
    if (out_channels == 3) {
      CmykToRgb(scratch.data(), pixels, inverted, buffer->mutable_data());
    } else {
      std::vector<uint8_t> rgb(pixels * 3);
      CmykToRgb(scratch.data(), pixels, inverted, rgb.data());
      RgbToGray(rgb.data(), pixels, buffer->mutable_data());
    }
  }
  return Tensor::FromBuffer(DType::kUInt8, {height, width, out_channels}, std::move(buffer), 0,
                            pixels * static_cast<size_t>(out_channels));
}

absl::StatusOr<std::unique_ptr<Function>> MakeDecodeJpeg(const pipeline::DecodeJpeg& spec, MemoryScope memory) {
  TFD_RETURN_IF_ERROR(CheckComponentArg("decode_jpeg", spec.component()));
  if (spec.channels() != 0 && spec.channels() != 1 && spec.channels() != 3) {
    return absl::InvalidArgumentError(
        fmt::format("decode_jpeg: channels must be 0 (as stored), 1 (grayscale) or 3 (RGB), got {}", spec.channels()));
  }
  if (!pipeline::DecodeJpeg::DctMethod_IsValid(spec.dct_method())) {
    return absl::InvalidArgumentError(
        fmt::format("decode_jpeg: dct_method must be INTEGER_FAST or INTEGER_ACCURATE, got {}", spec.dct_method()));
  }
  if ((spec.resize_height() != 0) != (spec.resize_width() != 0)) {
    return absl::InvalidArgumentError("decode_jpeg: resize_height and resize_width go together");
  }
  if (spec.resize_height() != 0)
    TFD_RETURN_IF_ERROR(CheckSizeArgs("decode_jpeg: resize", spec.resize_height(), spec.resize_width()));
  return std::make_unique<DecodeJpegFn>(spec.component(), spec.channels(),
                                        spec.dct_method() == pipeline::DecodeJpeg::INTEGER_ACCURATE,
                                        spec.resize_height(), spec.resize_width(), std::move(memory));
}

// ---- EncodeJpeg --------------------------------------------------------------------------

namespace {

// A libjpeg destination that appends to a std::string owned by the caller of Compress (so a
// longjmp out of libjpeg leaves it intact and it is destroyed normally).
struct StringDest {
  jpeg_destination_mgr pub;  // must be first
  std::string* out;
};

void DestInit(j_compress_ptr cinfo) {
  auto* d = reinterpret_cast<StringDest*>(cinfo->dest);
  d->out->resize(16384);
  d->pub.next_output_byte = reinterpret_cast<JOCTET*>(d->out->data());
  d->pub.free_in_buffer = d->out->size();
}

boolean DestGrow(j_compress_ptr cinfo) {
  // Called when the buffer is full (libjpeg ignores free_in_buffer here and assumes all used).
  auto* d = reinterpret_cast<StringDest*>(cinfo->dest);
  const size_t used = d->out->size();
  d->out->resize(used * 2);
  d->pub.next_output_byte = reinterpret_cast<JOCTET*>(d->out->data()) + used;
  d->pub.free_in_buffer = d->out->size() - used;
  return TRUE;
}

void DestTerm(j_compress_ptr cinfo) {
  auto* d = reinterpret_cast<StringDest*>(cinfo->dest);
  d->out->resize(d->out->size() - d->pub.free_in_buffer);
}

struct Encoder {
  jpeg_compress_struct cinfo;
  ErrorState err;
  StringDest dest;

  explicit Encoder(std::string* out) {
    std::memset(&cinfo, 0, sizeof(cinfo));
    InstallErrorHandlers(&err);
    cinfo.err = &err.mgr;
    dest.pub = {};
    dest.pub.init_destination = DestInit;
    dest.pub.empty_output_buffer = DestGrow;
    dest.pub.term_destination = DestTerm;
    dest.out = out;
  }
  ~Encoder() { jpeg_destroy_compress(&cinfo); }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

bool Compress(Encoder* e, const uint8_t* pixels, int height, int width, int channels, int quality) {
  if (setjmp(e->err.jump)) return false;
  jpeg_create_compress(&e->cinfo);
  e->cinfo.dest = &e->dest.pub;
  e->cinfo.image_width = static_cast<JDIMENSION>(width);
  e->cinfo.image_height = static_cast<JDIMENSION>(height);
  e->cinfo.input_components = channels;
  e->cinfo.in_color_space = channels == 1 ? JCS_GRAYSCALE : (channels == 3 ? JCS_RGB : JCS_CMYK);
  jpeg_set_defaults(&e->cinfo);
  jpeg_set_quality(&e->cinfo, quality, TRUE);
  jpeg_start_compress(&e->cinfo, TRUE);
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(channels);
  while (e->cinfo.next_scanline < e->cinfo.image_height) {
    // libjpeg's API is not const-correct; it only reads the rows.
    JSAMPROW row = const_cast<uint8_t*>(pixels + e->cinfo.next_scanline * row_bytes);
    jpeg_write_scanlines(&e->cinfo, &row, 1);
  }
  jpeg_finish_compress(&e->cinfo);
  return true;
}

}  // namespace

absl::StatusOr<std::string> EncodeJpeg(const Tensor& image, int quality) {
  if (image.dtype() != DType::kUInt8 || image.rank() != 3 ||
      (image.shape()[2] != 1 && image.shape()[2] != 3 && image.shape()[2] != 4)) {
    return absl::InvalidArgumentError(
        fmt::format("encode_jpeg: image must be uint8 [height, width, 1, 3 or 4], got {}", image.TypeString()));
  }
  const int64_t h = image.shape()[0];
  const int64_t w = image.shape()[1];
  if (h <= 0 || w <= 0 || h > JPEG_MAX_DIMENSION || w > JPEG_MAX_DIMENSION) {
    return absl::InvalidArgumentError(
        fmt::format("encode_jpeg: image size {}x{} is not encodable (1..{} per side)", h, w, JPEG_MAX_DIMENSION));
  }
  if (quality < 1 || quality > 100) {
    return absl::InvalidArgumentError(fmt::format("encode_jpeg: quality must be in 1..100, got {}", quality));
  }
  std::string out;
  Encoder e(&out);
  if (!Compress(&e, image.raw(), static_cast<int>(h), static_cast<int>(w), static_cast<int>(image.shape()[2]),
                quality)) {
    return absl::InternalError(fmt::format("encode_jpeg: {}", e.err.message));
  }
  return out;
}

}  // namespace tfdata
