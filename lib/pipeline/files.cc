// File sources: list_files, tfrecord and text_line.
#include <glob.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/status/status.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/io/text_line.h"
#include "lib/io/tfrecord.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

const ElementSpec kStringScalar{{TensorSpec{DType::kString, {}}}};

class ListFilesDataset : public Dataset {
 public:
  ListFilesDataset(std::vector<std::string> files, bool shuffle, uint64_t seed)
      : Dataset("list_files", kStringScalar), files_(std::move(files)), shuffle_(shuffle), seed_(seed) {}
  int64_t Cardinality() const override { return static_cast<int64_t>(files_.size()); }
  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext&) const override {
    std::vector<std::string> order = files_;
    if (shuffle_) {
      // A new order per pass (epoch), reproducible for a given seed.
      std::mt19937_64 rng(seed_ + 0x9e3779b97f4a7c15ULL * NextIterationNumber());
      // Fisher-Yates with multiply-shift: std::shuffle's order differs between standard libraries.
      for (size_t i = order.size(); i > 1; --i) {
        const size_t j = static_cast<size_t>((static_cast<unsigned __int128>(rng()) * i) >> 64);
        std::swap(order[i - 1], order[j]);
      }
    }
    return std::make_unique<It>(std::move(order));
  }

 private:
  class It : public Iterator {
   public:
    explicit It(std::vector<std::string> files) : files_(std::move(files)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (index_ >= files_.size()) return false;
      out->assign(1, Tensor::String(files_[index_++]));
      return true;
    }

   private:
    std::vector<std::string> files_;
    size_t index_ = 0;
  };
  std::vector<std::string> files_;
  bool shuffle_;
  uint64_t seed_;
};

// Reads one file's records or lines behind a common interface.
class RecordSource {
 public:
  static absl::StatusOr<std::unique_ptr<RecordSource>> Open(FileFormat format, const std::string& path, Compression c) {
    auto src = std::make_unique<RecordSource>();
    if (format == FileFormat::kTFRecord) {
      TFD_ASSIGN_OR_RETURN(src->records_, TFRecordReader::Open(path, c));
    } else {
      TFD_ASSIGN_OR_RETURN(src->lines_, TextLineReader::Open(path, c));
    }
    return src;
  }
  absl::StatusOr<bool> Next(std::string* out) { return records_ ? records_->Next(out) : lines_->Next(out); }

 private:
  std::unique_ptr<TFRecordReader> records_;
  std::unique_ptr<TextLineReader> lines_;
};

class FileRecordsDataset : public Dataset {
 public:
  FileRecordsDataset(FileFormat format, DatasetPtr input, std::vector<std::string> files, Compression c,
                     std::shared_ptr<const PathPolicy> paths)
      : Dataset(format == FileFormat::kTFRecord ? "tfrecord" : "text_line", kStringScalar),
        format_(format),
        input_(std::move(input)),
        files_(std::move(files)),
        compression_(c),
        paths_(std::move(paths)) {}

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    std::unique_ptr<Iterator> names;
    if (input_) {
      TFD_ASSIGN_OR_RETURN(names, input_->MakeIterator(ctx));
    }
    return std::make_unique<It>(std::static_pointer_cast<const FileRecordsDataset>(shared_from_this()),
                                std::move(names), ctx.cancellation);
  }

 private:
  class It : public Iterator {
   public:
    It(std::shared_ptr<const FileRecordsDataset> ds, std::unique_ptr<Iterator> names, CancellationPtr cancel)
        : ds_(std::move(ds)), names_(std::move(names)), cancel_(std::move(cancel)) {}

    absl::StatusOr<bool> Next(Element* out) override {
      std::string record;
      while (true) {
        TFD_RETURN_IF_ERROR(CheckNotCancelled(cancel_.get()));
        if (!current_) {
          TFD_ASSIGN_OR_RETURN(bool more, NextFile());
          if (!more) return false;
        }
        TFD_ASSIGN_OR_RETURN(bool got, current_->Next(&record));
        if (got) {
          out->assign(1, Tensor::String(std::move(record)));
          return true;
        }
        current_.reset();
      }
    }

   private:
    absl::StatusOr<bool> NextFile() {
      std::string path;
      if (names_) {
        Element name;
        TFD_ASSIGN_OR_RETURN(bool more, names_->Next(&name));
        if (!more) return false;
        if (name.size() != 1 || !name[0].is_string() || name[0].rank() != 0) {
          return absl::InvalidArgumentError(
              fmt::format("{}: upstream elements must be file names (string scalars), got {}", ds_->name(),
                          ElementTypeString(name)));
        }
        path = name[0].strings()[0];
      } else {
        if (index_ >= ds_->files_.size()) return false;
        path = ds_->files_[index_++];
      }
      // Names from upstream elements (list_files, a split's file) are checked as they come.
      if (ds_->paths_) {
        if (absl::Status s = ds_->paths_->Check(path); !s.ok()) {
          return absl::PermissionDeniedError(fmt::format("{}: {}", ds_->name(), std::string(s.message())));
        }
      }
      TFD_ASSIGN_OR_RETURN(current_, RecordSource::Open(ds_->format_, path, ds_->compression_));
      return true;
    }

    std::shared_ptr<const FileRecordsDataset> ds_;
    std::unique_ptr<Iterator> names_;
    CancellationPtr cancel_;
    size_t index_ = 0;
    std::unique_ptr<RecordSource> current_;
  };

  FileFormat format_;
  DatasetPtr input_;
  std::vector<std::string> files_;
  Compression compression_;
  std::shared_ptr<const PathPolicy> paths_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeListFilesDataset(const std::vector<std::string>& patterns, bool shuffle, bool has_seed,
                                                uint64_t seed, std::shared_ptr<const PathPolicy> paths) {
  if (patterns.empty()) return absl::InvalidArgumentError("list_files needs at least one pattern");
  std::set<std::string> files;
  for (const auto& pattern : patterns) {
    glob_t g{};
    const int rc = glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      globfree(&g);
      return absl::NotFoundError(fmt::format("pattern '{}' matched no files", pattern));
    }
    if (rc != 0) {
      globfree(&g);
      return absl::InvalidArgumentError(fmt::format("cannot expand pattern '{}' (unreadable directory?)", pattern));
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) files.insert(g.gl_pathv[i]);
    globfree(&g);
  }
  // Listing reveals names: a pattern that reaches outside the allowed paths is refused, not trimmed.
  for (const std::string& f : files) {
    if (!paths) break;
    if (absl::Status s = paths->Check(f); !s.ok()) {
      return absl::PermissionDeniedError(fmt::format("a file it matched, {}", std::string(s.message())));
    }
  }
  if (!has_seed) seed = std::random_device{}();
  return std::make_shared<ListFilesDataset>(std::vector<std::string>(files.begin(), files.end()), shuffle, seed);
}

absl::StatusOr<DatasetPtr> MakeFileRecordsDataset(FileFormat format, DatasetPtr input, std::vector<std::string> files,
                                                  Compression compression, std::shared_ptr<const PathPolicy> paths) {
  if (paths) {
    for (const std::string& f : files) TFD_RETURN_IF_ERROR(paths->Check(f));
  }
  if (input) {
    if (!files.empty()) {
      return absl::InvalidArgumentError(
          "after another op the files come from the upstream elements; remove `file` (or make this op the first)");
    }
    const ElementSpec& in = input->spec();
    if (!in.unknown && !(in == kStringScalar)) {
      return absl::InvalidArgumentError(
          fmt::format("upstream elements must be file names (string scalars), got {}", in.DebugString()));
    }
  } else if (files.empty()) {
    return absl::InvalidArgumentError("needs at least one `file` (or file names from an upstream op)");
  }
  return std::make_shared<FileRecordsDataset>(format, std::move(input), std::move(files), compression,
                                              std::move(paths));
}

}  // namespace tfdata
