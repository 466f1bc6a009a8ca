#include "lib/pipeline/loader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/util/json_util.h"
#include "lib/core/status_macros.h"

namespace tfdata {
namespace {

// Collects the first parse error with its position (protobuf reports 0-based lines/columns).
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (!has_) {
      has_ = true;
      line_ = line;
      column_ = column;
      message_ = message;
    }
  }
  bool has() const { return has_; }
  std::string Format(const std::string& name) const {
    return fmt::format("{}:{}:{}: {}", name, line_ + 1, column_ + 1, message_);
  }

 private:
  bool has_ = false;
  int line_ = 0, column_ = 0;
  std::string message_;
};

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

absl::StatusOr<LoadedPipeline> ParsePipelineText(std::string_view text, std::string name) {
  LoadedPipeline out;
  out.name = std::move(name);
  out.locations = std::make_unique<google::protobuf::TextFormat::ParseInfoTree>();
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(out.locations.get());
  const std::string copy(text);
  if (!parser.ParseFromString(copy, &out.pipeline)) {
    if (errors.has()) return absl::InvalidArgumentError(errors.Format(out.name));
    return absl::InvalidArgumentError(fmt::format("{}: not a valid pipeline in text format", out.name));
  }
  return out;
}

absl::StatusOr<LoadedPipeline> LoadPipelineFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(fmt::format("cannot open pipeline file {}: {}", path, std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return absl::DataLossError(fmt::format("cannot read pipeline file {}", path));
  const std::string data = ss.str();
  if (EndsWith(path, ".pb") || EndsWith(path, ".binpb")) {
    LoadedPipeline out;
    out.name = path;
    if (!out.pipeline.ParseFromString(data)) {
      return absl::InvalidArgumentError(fmt::format("{}: not a valid binary Pipeline message", path));
    }
    return out;
  }
  if (EndsWith(path, ".json")) {
    LoadedPipeline out;
    out.name = path;
    auto st = google::protobuf::util::JsonStringToMessage(data, &out.pipeline);
    if (!st.ok())
      return absl::InvalidArgumentError(fmt::format("{}: invalid JSON pipeline: {}", path, st.message().as_string()));
    return out;
  }
  return ParsePipelineText(data, path);
}

absl::StatusOr<DatasetPtr> LoadDataset(const std::string& path, const BuildOptions& options) {
  TFD_ASSIGN_OR_RETURN(LoadedPipeline loaded, LoadPipelineFile(path));
  return BuildDataset(loaded.pipeline, options, loaded.source());
}

}  // namespace tfdata
