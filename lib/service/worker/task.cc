#include "lib/service/worker/task.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/core/memory_budget.h"
#include "lib/core/status_macros.h"
#include "lib/pipeline/sharding.h"
#include "lib/pipeline/split_isolation.h"
#include "lib/pipeline/splits.h"
#include "lib/service/common/names.h"
#include "lib/service/common/seq_ranges.h"
#include "lib/service/common/wire_compression.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

Task::Task(const TaskDef& def, const WorkerConfig& config, DispatcherClient* dispatcher,
           std::shared_ptr<DatasetCounters> counters)
    : def_(def),
      config_(config),
      counters_(std::move(counters)),
      splits_(def.mode() == DISTRIBUTED_EPOCH
                  ? std::make_shared<TaskSplitProvider>(def.task_id(), dispatcher, config.dispatcher_retry,
                                                        def.first_epoch())
                  : nullptr),
      buffer_(config.buffer_elements, config.buffer_bytes),
      policy_(MakeServingPolicy(def_, config, buffer_)),
      thread_([this] { Produce(); }) {}

Task::~Task() { Stop(); }

void Task::Stop() {
  Cancel();
  std::call_once(joined_, [this] { thread_.join(); });
}

void Task::Cancel() {
  cancellation_->Cancel();
  if (splits_) splits_->Cancel();
  buffer_.Cancel();
}

bool Task::Finished() {
  absl::MutexLock lock(&buffer_.mu());
  return buffer_.done();
}

bool Task::Idle() {
  absl::MutexLock lock(&buffer_.mu());
  return buffer_.done() && buffer_.empty();
}

int64_t Task::SplitsDelivered() {
  absl::MutexLock lock(&buffer_.mu());
  if (buffer_.end_served()) return splits_ ? splits_->started() : 0;
  return std::max<int64_t>(0, buffer_.max_popped_tag() - 1);
}

absl::StatusOr<GetElementsResult> Task::Get(const GetElementsRequest& req, bool remote_peer) {
  absl::StatusOr<GetElementsResult> result = policy_->Serve(req);
  if (result.ok() && !result->elements.empty()) result->compress = ShouldCompressFor(*result, remote_peer);
  return result;
}

std::pair<int64_t, int64_t> Task::Buffered() {
  absl::MutexLock lock(&buffer_.mu());
  return {static_cast<int64_t>(buffer_.size()), buffer_.bytes()};
}

TaskStats Task::Stats() {
  TaskStats s;
  policy_->AddStats(s);
  absl::MutexLock lock(&compression_mu_);
  s.auto_compress = auto_compress_;
  return s;
}

bool Task::ShouldCompressFor(const GetElementsResult& result, bool remote_peer) {
  switch (def_.compression()) {
    case COMPRESSION_SNAPPY: return true;
    case COMPRESSION_AUTO: break;
    default: return false;
  }
  if (!remote_peer) return false;  // loopback moves bytes faster than snappy compresses them
  absl::MutexLock lock(&compression_mu_);
  if (!auto_compress_) {
    const CompressionSample s = MeasureSnappy(result.elements);
    auto_compress_ = ShouldCompress(s, config_.link_bytes_per_s);
    spdlog::info(
        "worker: {} (dataset {}, compression auto): snappy ratio {:.2f} on {} bytes, compresses {:.0f} MB/s, "
        "decompresses {:.0f} MB/s; link {:.0f} MB/s -> {} (estimated {:.0f} MB/s compressed)",
        TaskName(def_.task_id()), def_.dataset_id(), s.ratio, s.bytes, s.compress_bytes_per_s / 1e6,
        s.decompress_bytes_per_s / 1e6, config_.link_bytes_per_s / 1e6,
        *auto_compress_ ? "compressing" : "not compressing", CompressedThroughput(s, config_.link_bytes_per_s) / 1e6);
  }
  return *auto_compress_;
}

void Task::Produce() {
  absl::Status st;
  // The budgets check what pipelines ask for before they allocate; this is the last resort for an
  // allocation that still fails (the process's own limits), so that it fails this task only.
  try {
    st = Run();
  } catch (const std::bad_alloc&) {
    st = absl::ResourceExhaustedError("out of memory while running the pipeline (std::bad_alloc)");
  }
  if (!st.ok()) {
    st = absl::Status(st.code(),
                      absl::StrCat(TaskName(def_.task_id()), " of dataset ", def_.dataset_id(), ": ", st.message()));
    // A stopped task's pipeline ends with CancelledError: that is the stop, not a failure.
    if (cancellation_->cancelled()) {
      spdlog::debug("worker: {}", std::string(st.message()));
    } else {
      spdlog::error("worker: {}", std::string(st.message()));
    }
  }
  buffer_.Finish(std::move(st));
}

namespace {

// Moves what `next` produces into `buffer` until the stream ends, an error, or cancellation.
// `next(Buffered*)` fills one entry and returns false at the end. Entries are handed over in small
// batches: one lock (and one wake-up of a waiting reader) per batch rather than per element. A
// batch is closed early after kBatchLatency, so a slow pipeline's elements are not held back.
template <typename Next>
absl::Status Pump(TaskBuffer& buffer, DatasetCounters& counters, Next next) {
  constexpr size_t kBatchElements = 64;
  constexpr int64_t kBatchBytes = 1 << 20;
  // steady_clock, not absl::Now(): the clock is read per element, and absl's costs twice as much
  // (50 against 24 ns here), a fifth of what a scalar costs to produce.
  using Clock = std::chrono::steady_clock;
  constexpr auto kBatchLatency = std::chrono::milliseconds(1);
  std::vector<TaskBuffer::Buffered> batch;
  // Counts a batch as produced: its elements (not split-end markers), bytes, and the time taken.
  auto count = [&](Clock::time_point start) {
    int64_t elements = 0, bytes = 0;
    for (const TaskBuffer::Buffered& b : batch) {
      elements += b.split_end ? 0 : 1;
      bytes += b.bytes;
    }
    counters.elements_produced.fetch_add(elements, std::memory_order_relaxed);
    counters.bytes_produced.fetch_add(bytes, std::memory_order_relaxed);
    counters.produce_nanos.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count(),
                                     std::memory_order_relaxed);
  };
  while (true) {
    const std::optional<int64_t> room = buffer.AwaitRoom();
    if (!room) return absl::OkStatus();  // cancelled
    const Clock::time_point start = Clock::now();
    int64_t batch_bytes = 0;
    while (static_cast<int64_t>(batch.size()) < std::min<int64_t>(*room, kBatchElements) && batch_bytes < kBatchBytes &&
           (batch.empty() || Clock::now() - start < kBatchLatency)) {
      TaskBuffer::Buffered b{};
      absl::StatusOr<bool> more = next(&b);
      if (!more.ok() || !*more) {
        count(start);
        buffer.Push(batch);
        return more.status();
      }
      batch_bytes += b.bytes;
      const bool split_end = b.split_end;
      batch.push_back(std::move(b));
      // A split's end goes out at once: the next split may be slow to come (an exactly-once epoch
      // waits for the readers to confirm its splits, which they do on seeing their ends).
      if (split_end) break;
    }
    count(start);
    buffer.Push(batch);
  }
}

}  // namespace

absl::Status Task::Run() {
  const PipelineSource source{absl::StrCat("dataset ", def_.dataset_id()), nullptr};
  pipeline::Pipeline pipeline = def_.pipeline();
  if (IsStaticSharding(def_.mode())) {
    TFD_ASSIGN_OR_RETURN(pipeline, ApplyStaticSharding(pipeline, def_.mode(), def_.num_workers(), def_.worker_index()));
  }
  BuildOptions options = config_.build_options;
  options.memory =
      std::make_shared<MemoryBudget>(config_.max_task_memory, "the task's memory limit (worker --max-task-memory)");
  const IteratorContext ctx{.cancellation = cancellation_};
  if (def_.exactly_once()) {
    if (!splits_) return absl::InvalidArgumentError("exactly-once reads need processing mode distributed_epoch");
    // Each split on its own, every element with its position, and a marker at each split's end.
    TFD_ASSIGN_OR_RETURN(auto it,
                         SplitIsolatedIterator::Create(pipeline, options, splits_, ctx, source, def_.first_epoch()));
    return Pump(buffer_, *counters_, [&](TaskBuffer::Buffered* b) -> absl::StatusOr<bool> {
      TFD_ASSIGN_OR_RETURN(const SplitStep step, it->Step(&b->element, &b->position));
      if (step == SplitStep::kEnd) return false;
      b->split_end = step == SplitStep::kSplitEnd;
      b->bytes = b->split_end ? 0 : static_cast<int64_t>(ElementByteSize(b->element));
      b->tag = splits_->started();
      return true;
    });
  }
  TFD_ASSIGN_OR_RETURN(auto dataset, splits_ ? BuildSplitFedDataset(pipeline, options, splits_, source)
                                             : BuildDataset(pipeline, options, source));
  TFD_ASSIGN_OR_RETURN(auto it, dataset->MakeIterator(ctx));
  // A resumed static-sharding read: the positions of the shard's stream handed out before are
  // produced (the stream is deterministic) and left out.
  SeqRanges skips;
  for (int i = 0; i < std::min(def_.skip_begins_size(), def_.skip_ends_size()); ++i) {
    skips.Add(def_.skip_begins(i), def_.skip_ends(i));
  }
  int64_t position = 0;
  return Pump(buffer_, *counters_, [&](TaskBuffer::Buffered* b) -> absl::StatusOr<bool> {
    bool more = true;
    do {
      TFD_ASSIGN_OR_RETURN(more, it->Next(&b->element));
    } while (more && skips.Contains(position++));
    if (!more) return false;
    b->bytes = static_cast<int64_t>(ElementByteSize(b->element));
    b->tag = splits_ ? splits_->started() : 0;
    return true;
  });
}

}  // namespace tfdata::service
