#include "lib/service/worker.h"

#include "absl/strings/str_cat.h"
#include "lib/pipeline/sharding.h"
#include "lib/pipeline/splits.h"
#include "lib/service/dispatcher_state.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

absl::Mutex g_local_mu;
std::map<std::string, std::weak_ptr<Worker>>& LocalWorkers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_local_mu) {
  static auto* workers = new std::map<std::string, std::weak_ptr<Worker>>();
  return *workers;
}

// distributed_epoch: a task's splits, fetched from the dispatcher in batches: 2 at first, doubling
// (up to 16) while a batch lasts less than 50 ms and halving when one lasts over 500 ms, so cheap
// pipelines do not wait on a dispatcher call per split, and a worker that dies holds few splits
// of slow ones. Thread-safe: the producer thread asks for splits, the heartbeat reads the counters.
class TaskSplitProvider final : public SplitProvider {
 public:
  TaskSplitProvider(int64_t task_id, DispatcherClient* dispatcher, absl::Duration retry)
      : task_id_(task_id), dispatcher_(dispatcher), retry_(retry) {}

  int64_t StartEpoch() override { return epochs_.fetch_add(1); }

  absl::StatusOr<std::optional<Split>> Next(int64_t epoch) override {
    if (epoch != queue_epoch_) {
      queue_.clear();
      queue_epoch_ = epoch;
    }
    if (queue_.empty()) {
      GetSplitsRequest req;
      req.set_task_id(task_id_);
      req.set_epoch(epoch);
      const absl::Time now = absl::Now();
      if (last_fetch_ != absl::InfinitePast()) {
        if (now - last_fetch_ < absl::Milliseconds(50)) batch_ = std::min(batch_ * 2, 16);
        if (now - last_fetch_ > absl::Milliseconds(500)) batch_ = std::max(batch_ / 2, 2);
      }
      last_fetch_ = now;
      req.set_max_splits(batch_);
      req.set_splits_received(received_);
      GetSplitsResponse resp;
      // The dispatcher may be briefly unreachable: retry for a while before failing the task.
      absl::Status st;
      const absl::Time give_up = absl::Now() + retry_;
      for (absl::Duration backoff = absl::Milliseconds(50); !cancelled_.HasBeenNotified();
           backoff = std::min(backoff * 2, absl::Seconds(1))) {
        st = dispatcher_->GetSplits(req, &resp);
        if (st.ok() || !absl::IsUnavailable(st) || absl::Now() >= give_up) break;
        cancelled_.WaitForNotificationWithTimeout(backoff);
      }
      if (cancelled_.HasBeenNotified()) return std::nullopt;
      if (!st.ok()) return st;
      received_ += resp.splits_size();
      for (Split& s : *resp.mutable_splits()) queue_.push_back(std::move(s));
      if (queue_.empty()) return std::nullopt;  // end of the epoch's splits
    }
    Split s = std::move(queue_.front());
    queue_.pop_front();
    started_.fetch_add(1);
    return s;
  }

  void Cancel() {
    if (!cancelled_.HasBeenNotified()) cancelled_.Notify();
  }
  // Splits whose elements the source has begun to produce.
  int64_t started() const { return started_.load(); }

 private:
  const int64_t task_id_;
  DispatcherClient* const dispatcher_;
  std::atomic<int64_t> epochs_{0};
  std::atomic<int64_t> started_{0};
  absl::Notification cancelled_;
  // Used by the producer thread only.
  int64_t queue_epoch_ = -1;
  std::deque<Split> queue_;
  const absl::Duration retry_;
  int batch_ = 2;
  int64_t received_ = 0;
  absl::Time last_fetch_ = absl::InfinitePast();
};

}  // namespace

// One task: a producer thread filling a bounded buffer from the task's pipeline.
class Worker::Task {
 public:
  Task(const TaskDef& def, const WorkerConfig& config, DispatcherClient* dispatcher) : def_(def), config_(config) {
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

  absl::StatusOr<GetElementsResult> Get(const GetElementsRequest& req) {
    const absl::Duration timeout = absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000);
    const int64_t max_elements = req.max_elements() > 0 ? req.max_elements() : 1024;
    const int64_t max_bytes = req.max_bytes() > 0 ? req.max_bytes() : (8 << 20);
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !buffer_.empty() || done_ || cancelled_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    GetElementsResult result;
    result.first_index = next_index_;
    if (cancelled_) return absl::NotFoundError(absl::StrCat(TaskName(def_.task_id()), " was stopped on this worker"));
    int64_t bytes = 0;
    while (!buffer_.empty() && static_cast<int64_t>(result.elements.size()) < max_elements &&
           (result.elements.empty() || bytes + buffer_.front().bytes <= max_bytes)) {
      bytes += buffer_.front().bytes;
      buffered_bytes_ -= buffer_.front().bytes;
      max_served_tag_ = std::max(max_served_tag_, buffer_.front().tag);
      result.elements.push_back(std::move(buffer_.front().element));
      buffer_.pop_front();
    }
    next_index_ += static_cast<int64_t>(result.elements.size());
    if (buffer_.empty() && done_) {
      if (!error_.ok() && result.elements.empty()) return error_;
      result.end_of_sequence = error_.ok();
      end_served_ = end_served_ || result.end_of_sequence;
    }
    return result;
  }

 private:
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
  std::thread thread_;
};

Worker::Worker(WorkerConfig config, std::unique_ptr<DispatcherClient> dispatcher)
    : config_(std::move(config)), dispatcher_(std::move(dispatcher)) {}

Worker::~Worker() { Stop(); }

void Worker::Start() {
  {
    absl::MutexLock lock(&g_local_mu);
    LocalWorkers()[config_.worker_address] = weak_from_this();
  }
  heartbeat_thread_ = std::thread([this] { HeartbeatLoop(); });
}

void Worker::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  {
    absl::MutexLock lock(&g_local_mu);
    auto it = LocalWorkers().find(config_.worker_address);
    if (it != LocalWorkers().end() && (it->second.expired() || it->second.lock().get() == this)) {
      LocalWorkers().erase(it);
    }
  }
  std::map<int64_t, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    tasks.swap(tasks_);
  }
  for (auto& [id, task] : tasks) task->Cancel();
  tasks.clear();  // joins the producer threads outside mu_
}

std::shared_ptr<Worker> Worker::FindLocal(const std::string& address) {
  absl::MutexLock lock(&g_local_mu);
  auto it = LocalWorkers().find(address);
  return it == LocalWorkers().end() ? nullptr : it->second.lock();
}

absl::Duration Worker::IdleFor(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, task] : tasks_) {
    if (!task->Idle()) return absl::ZeroDuration();
  }
  return now - last_busy_;
}

size_t Worker::NumTasks() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

absl::StatusOr<GetElementsResult> Worker::GetElements(const GetElementsRequest& req) {
  std::shared_ptr<Task> task;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::UnavailableError(absl::StrCat("worker ", config_.worker_address, " is shutting down"));
    auto it = tasks_.find(req.task_id());
    if (it == tasks_.end()) {
      return absl::NotFoundError(absl::StrCat("worker ", config_.worker_address, " has no ", TaskName(req.task_id())));
    }
    task = it->second;
  }
  return task->Get(req);
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
