// cache: in memory, or in a file.
//
// Both forms only keep a *complete* pass: a pass that is abandoned half way (e.g. the consumer
// stopped early) leaves no cache behind, and the next pass recomputes from the input. This is
// what makes take(1).cache().repeat() replay exactly the first element.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "fmt/format.h"
#include "lib/core/element_codec.h"
#include "lib/core/status_macros.h"
#include "lib/io/tfrecord.h"
#include "lib/pipeline/ops.h"

namespace tfdata {
namespace {

using Cached = std::shared_ptr<const std::vector<Element>>;

class ReplayIt : public Iterator {
 public:
  explicit ReplayIt(Cached cached) : cached_(std::move(cached)) {}
  absl::StatusOr<bool> Next(Element* out) override {
    if (index_ >= cached_->size()) return false;
    *out = (*cached_)[index_++];
    return true;
  }

 private:
  Cached cached_;
  size_t index_ = 0;
};

class MemoryCacheDataset : public Dataset {
 public:
  MemoryCacheDataset(DatasetPtr input, MemoryScope memory)
      : Dataset("cache", input->spec()), input_(std::move(input)), memory_(std::move(memory)) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    {
      absl::MutexLock l(&mu_);
      if (cached_) return std::make_unique<ReplayIt>(cached_);
    }
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    return std::make_unique<FillIt>(std::static_pointer_cast<const MemoryCacheDataset>(shared_from_this()),
                                    std::move(input));
  }

 private:
  class FillIt : public Iterator {
   public:
    FillIt(std::shared_ptr<const MemoryCacheDataset> ds, std::unique_ptr<Iterator> input)
        : ds_(std::move(ds)),
          input_(std::move(input)),
          elements_(std::make_shared<std::vector<Element>>()),
          hold_(std::make_unique<MemoryHold>(ds_->memory_)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      if (!input_) return false;
      TFD_ASSIGN_OR_RETURN(bool more, input_->Next(out));
      if (more) {
        // The cache keeps every element it has seen: each is taken from the budget.
        TFD_RETURN_IF_ERROR(hold_->GrowLazy(ElementMemoryBytes(*out) + static_cast<int64_t>(sizeof(Element)), [&] {
          return fmt::format("the in-memory cache, holding {} elements ({}), cannot take the next: it",
                             elements_->size(), FormatBytes(hold_->held()));
        }));
        elements_->push_back(*out);
        return true;
      }
      input_.reset();
      absl::MutexLock l(&ds_->mu_);
      if (!ds_->cached_) {
        ds_->cached_ = std::move(elements_);
        ds_->cached_hold_ = std::move(hold_);  // the cache keeps its memory as long as the dataset lives
      }
      return false;
    }

   private:
    std::shared_ptr<const MemoryCacheDataset> ds_;
    std::unique_ptr<Iterator> input_;
    std::shared_ptr<std::vector<Element>> elements_;
    std::unique_ptr<MemoryHold> hold_;
  };

  DatasetPtr input_;
  MemoryScope memory_;
  mutable absl::Mutex mu_;
  mutable Cached cached_ ABSL_GUARDED_BY(mu_);
  mutable std::unique_ptr<MemoryHold> cached_hold_ ABSL_GUARDED_BY(mu_);
};

// The file is a TFRecord file of encoded elements, written under a temporary name and renamed
// into place only when the pass completes, so a reader never sees a partial cache.
class FileCacheDataset : public Dataset {
 public:
  FileCacheDataset(DatasetPtr input, std::string filename)
      : Dataset("cache", input->spec()), input_(std::move(input)), filename_(std::move(filename)) {}
  int64_t Cardinality() const override { return input_->Cardinality(); }

  absl::StatusOr<std::unique_ptr<Iterator>> MakeIterator(const IteratorContext& ctx) const override {
    std::error_code ec;
    if (std::filesystem::exists(filename_, ec)) {
      TFD_ASSIGN_OR_RETURN(auto reader, TFRecordReader::Open(filename_, Compression::kNone));
      return std::make_unique<ReadIt>(std::move(reader), filename_);
    }
    TFD_ASSIGN_OR_RETURN(auto input, input_->MakeIterator(ctx));
    static std::atomic<uint64_t> counter{0};
    const std::string tmp = fmt::format("{}.tmp.{}.{}", filename_, getpid(), counter.fetch_add(1));
    TFD_ASSIGN_OR_RETURN(auto writer, TFRecordWriter::Open(tmp, Compression::kNone));
    return std::make_unique<WriteIt>(std::move(input), std::move(writer), tmp, filename_);
  }

 private:
  class ReadIt : public Iterator {
   public:
    ReadIt(std::unique_ptr<TFRecordReader> reader, std::string name)
        : reader_(std::move(reader)), name_(std::move(name)) {}
    absl::StatusOr<bool> Next(Element* out) override {
      std::string record;
      TFD_ASSIGN_OR_RETURN(bool more, reader_->Next(&record));
      if (!more) return false;
      auto e = DecodeElement(std::string_view(record));
      if (!e.ok()) {
        return absl::DataLossError(fmt::format("cache file {}: {}", name_, std::string(e.status().message())));
      }
      *out = *std::move(e);
      return true;
    }

   private:
    std::unique_ptr<TFRecordReader> reader_;
    std::string name_;
  };

  class WriteIt : public Iterator {
   public:
    WriteIt(std::unique_ptr<Iterator> input, std::unique_ptr<TFRecordWriter> writer, std::string tmp,
            std::string final_name)
        : input_(std::move(input)), writer_(std::move(writer)), tmp_(std::move(tmp)), final_(std::move(final_name)) {}
    ~WriteIt() override {
      if (writer_) {
        (void)writer_->Close();
        std::remove(tmp_.c_str());
      }
    }
    absl::StatusOr<bool> Next(Element* out) override {
      if (!writer_) return false;
      TFD_ASSIGN_OR_RETURN(bool more, input_->Next(out));
      if (more) {
        record_.clear();
        TFD_RETURN_IF_ERROR(EncodeElement(*out, &record_));
        TFD_RETURN_IF_ERROR(writer_->Write(record_));
        return true;
      }
      TFD_RETURN_IF_ERROR(writer_->Close());
      writer_.reset();
      if (std::rename(tmp_.c_str(), final_.c_str()) != 0) {
        std::remove(tmp_.c_str());
        return absl::InternalError(fmt::format("cache: cannot rename {} to {}", tmp_, final_));
      }
      return false;
    }

   private:
    std::unique_ptr<Iterator> input_;
    std::unique_ptr<TFRecordWriter> writer_;
    std::string tmp_, final_;
    std::string record_;
  };

  DatasetPtr input_;
  std::string filename_;
};

}  // namespace

absl::StatusOr<DatasetPtr> MakeCacheDataset(DatasetPtr input, std::string filename, MemoryScope memory,
                                            std::shared_ptr<const PathPolicy> paths) {
  if (paths && !filename.empty()) TFD_RETURN_IF_ERROR(paths->Check(filename));
  if (memory.where.empty()) memory.where = "cache";
  if (filename.empty()) return std::make_shared<MemoryCacheDataset>(std::move(input), std::move(memory));
  return std::make_shared<FileCacheDataset>(std::move(input), std::move(filename));
}

}  // namespace tfdata
