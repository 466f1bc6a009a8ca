#include "lib/service/worker/worker.h"

#include "absl/strings/str_cat.h"
#include "lib/pipeline/sharding.h"
#include "lib/pipeline/splits.h"
#include "lib/service/worker/cross_trainer_window.h"
#include "lib/service/common/names.h"
#include "lib/service/worker/round_buffer.h"
#include "lib/service/worker/task_split_provider.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/common/wire_compression.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

// One task: a producer thread filling a bounded buffer from the task's pipeline.
class Worker::Task {
 public:
  Task(const TaskDef& def, const WorkerConfig& config, DispatcherClient* dispatcher) : def_(def), config_(config) {
    if (def.num_consumers() > 0) rounds_ = std::make_unique<RoundBuffer>(def.num_consumers());
    if (def.cross_trainer_cache()) window_ = std::make_unique<CrossTrainerWindow>(config.cross_trainer_cache_bytes);
    if (def.mode() == DISTRIBUTED_EPOCH) {
      splits_ = std::make_shared<TaskSplitProvider>(def.task_id(), dispatcher, config.dispatcher_retry);
    }
    thread_ = std::thread([this] { Produce(); });
  }
  ~Task() {
    Cancel();
    thread_.join();
  }
  // Stops producing; calls waiting in Get return NotFound at once.
  void Cancel() {
    if (splits_) splits_->Cancel();
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
  }

  bool distributed() const { return splits_ != nullptr; }
  // Nothing left to do: the pipeline ended and everything it produced was served.
  bool Idle() {
    absl::MutexLock lock(&mu_);
    return done_ && buffer_.empty();
  }
  // distributed_epoch: how many of the task's splits readers have received in full. An element is
  // tagged with the number of splits started when it was produced; once an element tagged t has
  // been served, splits before the t-th are delivered (exact for pipelines that do not hold
  // elements back across splits, e.g. shuffle). At the end of the stream, all of them.
  int64_t SplitsDelivered() {
    absl::MutexLock lock(&mu_);
    if (end_served_) return splits_ ? splits_->started() : 0;
    return std::max<int64_t>(0, max_served_tag_ - 1);
  }

  const TaskDef& def() const { return def_; }
  bool Finished() {
    absl::MutexLock lock(&mu_);
    return done_;
  }

  absl::StatusOr<GetElementsResult> Get(const GetElementsRequest& req, bool remote_peer) {
    absl::StatusOr<GetElementsResult> result = def_.num_consumers() > 0 ? GetRound(req)
                                               : def_.cross_trainer_cache() ? GetCached(req)
                                                                            : GetShared(req);
    if (result.ok() && !result->elements.empty()) result->compress = ShouldCompressFor(*result, remote_peer);
    return result;
  }

  TaskStats Stats() {
    TaskStats s;
    {
      absl::MutexLock lock(&mu_);
      if (window_) {
        s.window_bytes = window_->bytes();
        s.window_peak_bytes = window_->peak_bytes();
        s.window_max_bytes = window_->max_bytes();
      }
      s.round_elements_dropped = round_elements_dropped_;
      s.late_elements = late_elements_;
    }
    absl::MutexLock lock(&compression_mu_);
    s.auto_compress = auto_compress_;
    return s;
  }

 private:
  struct Limits {
    absl::Time deadline;
    int64_t max_elements, max_bytes;
  };
  static Limits LimitsOf(const GetElementsRequest& req) {
    return Limits{absl::Now() + absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000),
                  req.max_elements() > 0 ? req.max_elements() : 1024, req.max_bytes() > 0 ? req.max_bytes() : (8 << 20)};
  }
  absl::Status StoppedError() const {
    return absl::NotFoundError(absl::StrCat(TaskName(def_.task_id()), " was stopped on this worker"));
  }
  Element PopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    buffered_bytes_ -= buffer_.front().bytes;
    max_served_tag_ = std::max(max_served_tag_, buffer_.front().tag);
    Element e = std::move(buffer_.front().element);
    buffer_.pop_front();
    ++next_index_;
    return e;
  }

  // A plain task: each buffered element goes to whichever request comes first.
  absl::StatusOr<GetElementsResult> GetShared(const GetElementsRequest& req) {
    const Limits limits = LimitsOf(req);
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_ || cancelled_; };
    mu_.AwaitWithDeadline(absl::Condition(&ready), limits.deadline);
    GetElementsResult result;
    result.first_index = next_index_;
    if (cancelled_) return StoppedError();
    int64_t bytes = 0;
    while (!buffer_.empty() && static_cast<int64_t>(result.elements.size()) < limits.max_elements &&
           (result.elements.empty() || bytes + buffer_.front().bytes <= limits.max_bytes)) {
      bytes += buffer_.front().bytes;
      result.elements.push_back(PopLocked());
    }
    if (buffer_.empty() && done_) {
      if (!error_.ok() && result.elements.empty()) return error_;
      result.end_of_sequence = error_.ok();
      end_served_ = end_served_ || result.end_of_sequence;
    }
    return result;
  }

  // Cross-trainer cache: every trainer reads the whole stream from its cursor over the window.
  absl::StatusOr<GetElementsResult> GetCached(const GetElementsRequest& req) {
    if (req.trainer_id().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(TaskName(def_.task_id()), " belongs to a cross-trainer cache job: requests need a trainer id"));
    }
    const Limits limits = LimitsOf(req);
    const std::string& trainer = req.trainer_id();
    absl::MutexLock lock(&mu_);
    GetElementsResult result;
    while (true) {
      if (cancelled_) return StoppedError();
      if (!window_error_.ok()) return window_error_;
      if (!window_->AtEnd(trainer)) break;
      if (!buffer_.empty()) {
        // Grow the window by up to half of it per request: enough for big responses, never so
        // much that it evicts what this trainer is about to read.
        int64_t moved = 0, moved_bytes = 0;
        do {
          const int64_t bytes = buffer_.front().bytes;
          if (auto st = window_->Push(PopLocked(), bytes); !st.ok()) {
            window_error_ = absl::InvalidArgumentError(absl::StrCat(TaskName(def_.task_id()), ": ", st.message()));
            spdlog::error("worker: {}", std::string(window_error_.message()));
            return window_error_;
          }
          ++moved;
          moved_bytes += bytes;
        } while (!buffer_.empty() && moved < limits.max_elements &&
                 moved_bytes + buffer_.front().bytes <= window_->max_bytes() / 2);
        continue;
      }
      if (done_) {
        if (!error_.ok()) return error_;
        result.first_index = window_->end();
        result.end_of_sequence = true;
        return result;
      }
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_ || cancelled_; };
      if (!mu_.AwaitWithDeadline(absl::Condition(&ready), limits.deadline)) {
        result.first_index = window_->end();
        return result;  // nothing yet: the reader asks again
      }
    }
    CrossTrainerWindow::Read read = window_->Take(trainer, limits.max_elements, limits.max_bytes);
    if (read.skipped > 0) {
      spdlog::info("worker: {}: trainer \"{}\" fell out of the cross-trainer cache window and skipped {} element(s)",
                   TaskName(def_.task_id()), trainer, read.skipped);
    }
    result.elements = std::move(read.elements);
    result.first_index = read.first_index;
    result.elements_skipped = read.skipped;
    return result;
  }

  // Coordinated reads: consumer i's element of the round (see round_buffer.h).
  absl::StatusOr<GetElementsResult> GetRound(const GetElementsRequest& req) {
    const int consumer = req.consumer_index();
    if (consumer < 0 || consumer >= def_.num_consumers() || req.round_index() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(TaskName(def_.task_id()), ": consumer ", consumer, " of round ",
                                                     req.round_index(), " is outside this job's ",
                                                     def_.num_consumers(), " consumers"));
    }
    const Limits limits = LimitsOf(req);
    const int64_t round = req.round_index();
    absl::MutexLock lock(&mu_);
    rounds_->Touch(consumer);
    GetElementsResult result;
    result.first_index = round;
    while (true) {
      if (cancelled_) return StoppedError();
      const absl::Time now = absl::Now();
      if (const int64_t dropped = rounds_->Expire(now, config_.round_expiry); dropped > 0) {
        // Logged the first time; later drops only count (TaskStats).
        if (round_elements_dropped_ == 0) {
          spdlog::warn("worker: {}: dropped {} element(s) of rounds open for more than {} (their consumers stopped "
                     "asking; later drops are not logged)",
                       TaskName(def_.task_id()), dropped, absl::FormatDuration(config_.round_expiry));
        }
        round_elements_dropped_ += dropped;
      }
      size_t needed = 1;
      if (rounds_->Known(round)) {
        if (auto e = rounds_->Take(round, consumer)) {
          result.elements.push_back(*std::move(e));
          return result;
        }
        if (!buffer_.empty()) {  // late: the stream's next element, still from this worker
          ++late_elements_;
          result.elements.push_back(PopLocked());
          return result;
        }
      } else {
        needed = static_cast<size_t>(rounds_->NumPresent());
        // Untaken elements of open rounds are bounded like the buffer; past it, wait for expiry.
        if (buffer_.size() >= needed && rounds_->bytes() < config_.buffer_bytes) {
          std::vector<Element> elements;
          for (size_t i = 0; i < needed; ++i) elements.push_back(PopLocked());
          rounds_->Open(round, std::move(elements), now);
          continue;
        }
      }
      if (done_ && buffer_.size() < needed) {
        if (!error_.ok()) return error_;
        return absl::FailedPreconditionError(absl::StrCat(
            TaskName(def_.task_id()), ": the pipeline ended, but coordinated reads need an infinite pipeline"));
      }
      if (now >= limits.deadline) return result;  // nothing yet: the reader asks again
      auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return buffer_.size() >= needed || done_ || cancelled_; };
      // Wake up now and then: expiry frees room without any other change.
      mu_.AwaitWithDeadline(absl::Condition(&ready), std::min(limits.deadline, now + absl::Milliseconds(50)));
    }
  }

  // Whether this response should travel compressed (the dataset's choice; AUTO measures once).
  bool ShouldCompressFor(const GetElementsResult& result, bool remote_peer) {
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
      spdlog::info("worker: {} (dataset {}, compression auto): snappy ratio {:.2f} on {} bytes, compresses {:.0f} MB/s, "
                   "decompresses {:.0f} MB/s; link {:.0f} MB/s -> {} (estimated {:.0f} MB/s compressed)",
                   TaskName(def_.task_id()), def_.dataset_id(), s.ratio, s.bytes, s.compress_bytes_per_s / 1e6,
                   s.decompress_bytes_per_s / 1e6, config_.link_bytes_per_s / 1e6,
                   *auto_compress_ ? "compressing" : "not compressing",
                   CompressedThroughput(s, config_.link_bytes_per_s) / 1e6);
    }
    return *auto_compress_;
  }

  struct Buffered {
    Element element;
    int64_t bytes;
    int64_t tag;  // splits started when it was produced (distributed_epoch)
  };

  void Produce() {
    absl::Status st = Run();
    absl::MutexLock lock(&mu_);
    if (!st.ok()) {
      error_ = absl::Status(st.code(), absl::StrCat(TaskName(def_.task_id()), " of dataset ", def_.dataset_id(), ": ",
                                                    st.message()));
      spdlog::error("worker: {}", std::string(error_.message()));
    }
    done_ = true;
  }

  absl::Status Run() {
    const PipelineSource source{absl::StrCat("dataset ", def_.dataset_id()), nullptr};
    pipeline::Pipeline pipeline = def_.pipeline();
    if (IsStaticSharding(def_.mode())) {
      auto sharded = ApplyStaticSharding(pipeline, def_.mode(), def_.num_workers(), def_.worker_index());
      if (!sharded.ok()) return sharded.status();
      pipeline = *std::move(sharded);
    }
    auto dataset = splits_ ? BuildSplitFedDataset(pipeline, config_.build_options, splits_, source)
                           : BuildDataset(pipeline, config_.build_options, source);
    if (!dataset.ok()) return dataset.status();
    auto it = (*dataset)->MakeIterator(IteratorContext{});
    if (!it.ok()) return it.status();
    auto has_room = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return cancelled_ || (static_cast<int64_t>(buffer_.size()) < config_.buffer_elements &&
                            buffered_bytes_ < config_.buffer_bytes);
    };
    // Elements are handed over in small batches: one lock (and one wake-up of a waiting reader) per
    // batch rather than per element. A batch is closed early after kBatchLatency, so a slow
    // pipeline's elements are not held back.
    constexpr size_t kBatchElements = 64;
    constexpr int64_t kBatchBytes = 1 << 20;
    constexpr absl::Duration kBatchLatency = absl::Milliseconds(1);
    std::vector<Buffered> batch;
    while (true) {
      int64_t room = 0;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&has_room));
        if (cancelled_) return absl::OkStatus();
        room = config_.buffer_elements - static_cast<int64_t>(buffer_.size());
      }
      const absl::Time start = absl::Now();
      int64_t batch_bytes = 0;
      bool end = false;
      while (static_cast<int64_t>(batch.size()) < std::min<int64_t>(room, kBatchElements) && batch_bytes < kBatchBytes &&
             (batch.empty() || absl::Now() - start < kBatchLatency)) {
        Element e;
        auto more = (*it)->Next(&e);
        if (!more.ok() || !*more) {
          end = true;
          if (!more.ok()) {
            Push(batch);
            return more.status();
          }
          break;
        }
        const int64_t bytes = static_cast<int64_t>(ElementByteSize(e));
        batch_bytes += bytes;
        batch.push_back(Buffered{std::move(e), bytes, splits_ ? splits_->started() : 0});
      }
      Push(batch);
      if (end) return absl::OkStatus();
    }
  }

  void Push(std::vector<Buffered>& batch) {
    if (batch.empty()) return;
    absl::MutexLock lock(&mu_);
    for (Buffered& b : batch) {
      buffered_bytes_ += b.bytes;
      buffer_.push_back(std::move(b));
    }
    batch.clear();
  }

  const TaskDef def_;
  const WorkerConfig& config_;
  absl::Mutex mu_;
  std::deque<Buffered> buffer_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_index_ ABSL_GUARDED_BY(mu_) = 0;  // stream position of buffer_.front()
  int64_t max_served_tag_ ABSL_GUARDED_BY(mu_) = 0;
  bool end_served_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<TaskSplitProvider> splits_;  // distributed_epoch only
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<CrossTrainerWindow> window_ ABSL_GUARDED_BY(mu_);  // cross-trainer cache only
  absl::Status window_error_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<RoundBuffer> rounds_ ABSL_GUARDED_BY(mu_);  // coordinated reads only
  int64_t round_elements_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t late_elements_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex compression_mu_;
  std::optional<bool> auto_compress_ ABSL_GUARDED_BY(compression_mu_);
  std::thread thread_;
};

Worker::Worker(WorkerConfig config, std::unique_ptr<DispatcherClient> dispatcher)
    : config_(std::move(config)), dispatcher_(std::move(dispatcher)) {}

Worker::~Worker() { Stop(); }

void Worker::Start() {
  AddLocalWorker(config_.worker_address, weak_from_this());
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void Worker::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  RemoveLocalWorker(config_.worker_address, this);
  std::map<int64_t, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    tasks.swap(tasks_);
  }
  for (auto& [id, task] : tasks) task->Cancel();
  tasks.clear();  // joins the producer threads outside mu_
}

absl::Duration Worker::IdleFor(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, task] : tasks_) {
    if (!task->Idle()) return absl::ZeroDuration();
  }
  return now - last_busy_;
}

std::vector<int64_t> Worker::TaskIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<int64_t> ids;
  for (const auto& [id, task] : tasks_) ids.push_back(id);
  return ids;
}

size_t Worker::NumTasks() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

absl::StatusOr<std::shared_ptr<Worker::Task>> Worker::FindTask(int64_t task_id) const {
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError(absl::StrCat("worker ", config_.worker_address, " is shutting down"));
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", config_.worker_address, " has no ", TaskName(task_id)));
  }
  return it->second;
}

absl::StatusOr<GetElementsResult> Worker::GetElements(const GetElementsRequest& req, bool remote_peer) {
  auto task = FindTask(req.task_id());
  if (!task.ok()) return task.status();
  return (*task)->Get(req, remote_peer);
}

absl::StatusOr<TaskStats> Worker::Stats(int64_t task_id) const {
  auto task = FindTask(task_id);
  if (!task.ok()) return task.status();
  return (*task)->Stats();
}

void Worker::HeartbeatLoop() {
  absl::Duration backoff = absl::ZeroDuration();
  bool failing = false;
  do {
    absl::Status st = Heartbeat();
    if (!st.ok()) {
      // Log the first failure and the recovery, not every retry.
      if (!failing && absl::IsFailedPrecondition(st)) {
        spdlog::error("worker {}: refused by the dispatcher: {}", config_.worker_address, std::string(st.message()));
      } else if (!failing) {
        spdlog::warn("worker {}: heartbeat to the dispatcher failed: {}", config_.worker_address, st.ToString());
      }
      failing = true;
      backoff = std::min(std::max(backoff * 2, absl::Milliseconds(100)), config_.heartbeat_interval);
    } else {
      if (failing) spdlog::info("worker {}: dispatcher reachable again", config_.worker_address);
      failing = false;
      backoff = config_.heartbeat_interval;
    }
  } while (!stop_.WaitForNotificationWithTimeout(backoff));
}

absl::Status Worker::Heartbeat() {
  absl::MutexLock hb(&heartbeat_mu_);
  WorkerHeartbeatRequest req;
  req.set_worker_address(config_.worker_address);
  for (const std::string& t : config_.tags) req.add_worker_tags(t);
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, task] : tasks_) {
      req.add_current_tasks(id);
      if (task->Finished()) req.add_finished_tasks(id);
      if (task->distributed()) {
        TaskProgress* p = req.add_task_progress();
        p->set_task_id(id);
        p->set_splits_delivered(task->SplitsDelivered());
      }
    }
  }
  WorkerHeartbeatResponse resp;
  if (auto st = dispatcher_->WorkerHeartbeat(req, &resp); !st.ok()) return st;
  if (resp.incarnation_id() != dispatcher_incarnation_) {
    if (dispatcher_incarnation_ != 0) {
      spdlog::warn("worker {}: the dispatcher restarted ({}); {}", config_.worker_address,
                   resp.fault_tolerant() ? "fault-tolerant: its jobs continue" : "it kept no state",
                   resp.fault_tolerant() ? "re-syncing" : "registering again and dropping tasks it does not know");
    }
    dispatcher_incarnation_ = resp.incarnation_id();
  }
  // Declared before the lock so that dropped tasks join their threads after mu_ is released.
  std::vector<std::shared_ptr<Task>> dropped;
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::OkStatus();
  for (int64_t id : resp.tasks_to_delete()) {
    auto it = tasks_.find(id);
    if (it == tasks_.end()) continue;
    spdlog::info("worker {}: dropping {}", config_.worker_address, TaskName(id));
    dropped.push_back(std::move(it->second));
    tasks_.erase(it);
  }
  bool busy = resp.new_tasks_size() > 0;
  for (const auto& [id, task] : tasks_) busy = busy || !task->Idle();
  if (busy) last_busy_ = absl::Now();
  for (const TaskDef& def : resp.new_tasks()) {
    if (tasks_.contains(def.task_id())) continue;
    spdlog::info("worker {}: starting {} ({}, dataset {})", config_.worker_address, TaskName(def.task_id()),
                 JobName(def.job_id()), def.dataset_id());
    tasks_[def.task_id()] = std::make_shared<Task>(def, config_, dispatcher_.get());
  }
  return absl::OkStatus();
}

}  // namespace tfdata::service
