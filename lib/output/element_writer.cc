#include "lib/output/element_writer.h"

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "fmt/format.h"
#include "lib/core/element_codec.h"
#include "lib/core/status_macros.h"
#include "lib/io/tfrecord.h"

namespace tfdata {
namespace {

bool IsUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

void JsonString(const std::string& s, std::string* out) {
  if (!IsUtf8(s)) {
    *out += "{\"base64\": \"" + absl::Base64Escape(s) + "\"}";
    return;
  }
  out->push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      default:
        if (c < 0x20) {
          *out += fmt::format("\\u{:04x}", c);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

void JsonValue(const Tensor& t, int64_t i, std::string* out) {
  if (t.is_string()) return JsonString(t.strings()[static_cast<size_t>(i)], out);
  switch (t.dtype()) {
    case DType::kBool: *out += t.data<bool>()[i] ? "true" : "false"; return;
    case DType::kFloat32:
    case DType::kFloat64: {
      const double v = t.GetAsDouble(i);
      // JSON has no NaN/Infinity literals.
      if (std::isnan(v)) *out += "\"NaN\"";
      else if (std::isinf(v)) *out += v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
      else *out += t.dtype() == DType::kFloat32 ? fmt::format("{}", t.data<float>()[i]) : fmt::format("{}", v);
      return;
    }
    case DType::kUInt64: *out += fmt::format("{}", t.data<uint64_t>()[i]); return;
    default: *out += fmt::format("{}", t.GetAsInt64(i)); return;
  }
}

void JsonDim(const Tensor& t, size_t dim, int64_t* next, std::string* out) {
  out->push_back('[');
  for (int64_t i = 0; i < t.shape()[dim]; ++i) {
    if (i > 0) *out += ", ";
    if (dim + 1 == t.shape().size()) {
      JsonValue(t, (*next)++, out);
    } else {
      JsonDim(t, dim + 1, next, out);
    }
  }
  out->push_back(']');
}

void JsonTensor(const Tensor& t, std::string* out) {
  if (t.rank() == 0) return JsonValue(t, 0, out);
  int64_t next = 0;
  JsonDim(t, 0, &next, out);
}

class StdioWriter : public ElementWriter {
 public:
  StdioWriter(OutputFormat format, FILE* f, bool owned, std::string path)
      : format_(format), f_(f), owned_(owned), path_(std::move(path)) {}
  ~StdioWriter() override {
    if (owned_ && f_) std::fclose(f_);
  }
  absl::Status Write(const Element& e) override {
    line_ = format_ == OutputFormat::kText ? ElementToText(e) : ElementToJson(e);
    line_.push_back('\n');
    if (std::fwrite(line_.data(), 1, line_.size(), f_) != line_.size()) {
      return absl::DataLossError(fmt::format("cannot write to {}: {}", path_, std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  absl::Status Flush() override {
    if (f_ && std::fflush(f_) != 0) {
      return absl::DataLossError(fmt::format("cannot write to {}: {}", path_, std::strerror(errno)));
    }
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (!f_) return absl::OkStatus();
    const bool ok = std::fflush(f_) == 0 && (!owned_ || std::fclose(f_) == 0);
    f_ = nullptr;
    if (!ok) return absl::DataLossError(fmt::format("cannot write to {}: {}", path_, std::strerror(errno)));
    return absl::OkStatus();
  }

 private:
  OutputFormat format_;
  FILE* f_;
  bool owned_;
  std::string path_;
  std::string line_;
};

class RecordWriter : public ElementWriter {
 public:
  explicit RecordWriter(std::unique_ptr<TFRecordWriter> w) : w_(std::move(w)) {}
  absl::Status Write(const Element& e) override {
    if (e.size() == 1 && e[0].is_string() && e[0].rank() == 0) return w_->Write(e[0].strings()[0]);
    buf_.clear();
    TFD_RETURN_IF_ERROR(EncodeElement(e, &buf_));
    return w_->Write(buf_);
  }
  absl::Status Flush() override { return w_->Flush(); }
  absl::Status Close() override { return w_->Close(); }

 private:
  std::unique_ptr<TFRecordWriter> w_;
  std::string buf_;
};

class NullWriter : public ElementWriter {
 public:
  absl::Status Write(const Element&) override { return absl::OkStatus(); }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Close() override { return absl::OkStatus(); }
};

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "jsonl") return OutputFormat::kJsonl;
  if (name == "tfrecord") return OutputFormat::kTFRecord;
  if (name == "null") return OutputFormat::kNull;
  return absl::InvalidArgumentError(fmt::format("unknown format '{}' (expected text, jsonl, tfrecord or null)", name));
}

absl::StatusOr<std::unique_ptr<ElementWriter>> MakeElementWriter(OutputFormat format, const std::string& path) {
  const bool to_stdout = path.empty() || path == "-";
  switch (format) {
    case OutputFormat::kNull: return std::make_unique<NullWriter>();
    case OutputFormat::kTFRecord: {
      if (to_stdout) return absl::InvalidArgumentError("--format tfrecord needs --output PATH");
      TFD_ASSIGN_OR_RETURN(auto w, TFRecordWriter::Open(path, Compression::kNone));
      return std::make_unique<RecordWriter>(std::move(w));
    }
    case OutputFormat::kText:
    case OutputFormat::kJsonl: {
      if (to_stdout) return std::make_unique<StdioWriter>(format, stdout, false, "stdout");
      FILE* f = std::fopen(path.c_str(), "wb");
      if (!f) return absl::NotFoundError(fmt::format("cannot open {} for writing: {}", path, std::strerror(errno)));
      return std::make_unique<StdioWriter>(format, f, true, path);
    }
  }
  return absl::InternalError("unknown output format");
}

std::string ElementToText(const Element& element) { return ElementDebugString(element, 1 << 20); }

std::string ElementToJson(const Element& element) {
  std::string out;
  if (element.size() == 1) {
    JsonTensor(element[0], &out);
    return out;
  }
  out.push_back('[');
  for (size_t i = 0; i < element.size(); ++i) {
    if (i > 0) out += ", ";
    JsonTensor(element[i], &out);
  }
  out.push_back(']');
  return out;
}

}  // namespace tfdata
