#include "lib/service/worker/worker.h"

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/service/common/local_workers.h"
#include "lib/service/common/names.h"
#include "lib/service/worker/task.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

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

void Worker::Leave() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();  // no heartbeat after the last one
  std::map<int64_t, std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    tasks = tasks_;
  }
  for (auto& [id, task] : tasks) task->Stop();  // the splits started are final now
  WorkerHeartbeatRequest req;
  req.set_worker_address(config_.worker_address);
  req.set_leaving(true);
  for (const auto& [id, task] : tasks) {
    req.add_current_tasks(id);
    if (!task->distributed()) continue;
    TaskProgress* p = req.add_task_progress();
    p->set_task_id(id);
    p->set_splits_delivered(task->SplitsDelivered());
    p->set_splits_started(task->SplitsStarted());
  }
  tasks.clear();
  WorkerHeartbeatResponse resp;
  if (auto st = dispatcher_->WorkerHeartbeat(req, &resp); st.ok()) {
    spdlog::info("worker {}: left the dispatcher", config_.worker_address);
  } else {
    spdlog::warn(
        "worker {}: could not tell the dispatcher it is leaving ({}); it will find out after its "
        "--worker-timeout",
        config_.worker_address, st.ToString());
  }
  Stop();
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

absl::StatusOr<std::shared_ptr<Task>> Worker::FindTask(int64_t task_id) const {
  absl::MutexLock lock(&mu_);
  if (stopped_) return absl::UnavailableError(absl::StrCat("worker ", config_.worker_address, " is shutting down"));
  auto it = tasks_.find(task_id);
  if (it == tasks_.end()) {
    return absl::NotFoundError(absl::StrCat("worker ", config_.worker_address, " has no ", TaskName(task_id)));
  }
  return it->second;
}

absl::StatusOr<GetElementsResult> Worker::GetElements(const GetElementsRequest& req, bool remote_peer) {
  TFD_ASSIGN_OR_RETURN(auto task, FindTask(req.task_id()));
  const absl::Time start = absl::Now();
  absl::StatusOr<GetElementsResult> result = task->Get(req, remote_peer);
  get_elements_latency_.Record(absl::Now() - start);
  if (result.ok()) {
    int64_t bytes = 0;
    for (const Element& e : result->elements) bytes += static_cast<int64_t>(ElementByteSize(e));
    get_elements_total_.fetch_add(1, std::memory_order_relaxed);
    elements_served_total_.fetch_add(static_cast<int64_t>(result->elements.size()), std::memory_order_relaxed);
    bytes_served_total_.fetch_add(bytes, std::memory_order_relaxed);
    DatasetCounters& c = task->counters();
    c.elements_served.fetch_add(static_cast<int64_t>(result->elements.size()), std::memory_order_relaxed);
    c.bytes_served.fetch_add(bytes, std::memory_order_relaxed);
    c.elements_skipped.fetch_add(result->elements_skipped, std::memory_order_relaxed);
  }
  return result;
}

void Worker::CountCompression(bool sent_compressed, size_t plain_bytes, size_t compressed_bytes) {
  (sent_compressed ? responses_compressed_ : responses_left_plain_).fetch_add(1, std::memory_order_relaxed);
  compression_input_bytes_.fetch_add(static_cast<int64_t>(plain_bytes), std::memory_order_relaxed);
  compression_output_bytes_.fetch_add(static_cast<int64_t>(compressed_bytes), std::memory_order_relaxed);
}

WorkerCounts Worker::Counts() const {
  WorkerCounts c;
  std::vector<std::shared_ptr<Task>> tasks;
  {
    absl::MutexLock lock(&mu_);
    c.tasks = static_cast<int64_t>(tasks_.size());
    for (const auto& [id, task] : tasks_) tasks.push_back(task);
    for (const auto& [dataset, counters] : datasets_) {
      WorkerCounts::Dataset& d = c.datasets[dataset];
      d.elements_produced = counters->elements_produced.load(std::memory_order_relaxed);
      d.bytes_produced = counters->bytes_produced.load(std::memory_order_relaxed);
      d.produce_seconds = static_cast<double>(counters->produce_nanos.load(std::memory_order_relaxed)) / 1e9;
      d.elements_served = counters->elements_served.load(std::memory_order_relaxed);
      d.bytes_served = counters->bytes_served.load(std::memory_order_relaxed);
      d.elements_skipped = counters->elements_skipped.load(std::memory_order_relaxed);
    }
  }
  // Outside mu_: no need to hold the worker's lock while each task's (buffer, policy) is taken.
  for (const std::shared_ptr<Task>& task : tasks) {
    WorkerCounts::Dataset& d = c.datasets[task->def().dataset_id()];
    ++d.tasks;
    const auto [elements, bytes] = task->Buffered();
    d.buffered_elements += elements;
    d.buffered_bytes += bytes;
    const TaskStats stats = task->Stats();
    d.window_bytes += stats.window_bytes;
    if (stats.auto_compress) ++(*stats.auto_compress ? c.auto_compressing_tasks : c.auto_plain_tasks);
  }
  c.responses_compressed_total = responses_compressed_.load(std::memory_order_relaxed);
  c.responses_left_plain_total = responses_left_plain_.load(std::memory_order_relaxed);
  c.compression_input_bytes_total = compression_input_bytes_.load(std::memory_order_relaxed);
  c.compression_output_bytes_total = compression_output_bytes_.load(std::memory_order_relaxed);
  c.get_elements_total = get_elements_total_.load(std::memory_order_relaxed);
  c.elements_served_total = elements_served_total_.load(std::memory_order_relaxed);
  c.bytes_served_total = bytes_served_total_.load(std::memory_order_relaxed);
  c.get_elements_latency = get_elements_latency_.Get();
  return c;
}

absl::StatusOr<TaskStats> Worker::Stats(int64_t task_id) const {
  TFD_ASSIGN_OR_RETURN(auto task, FindTask(task_id));
  return task->Stats();
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
  req.set_elements_served(elements_served_total_.load(std::memory_order_relaxed));
  req.set_bytes_served(bytes_served_total_.load(std::memory_order_relaxed));
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, task] : tasks_) {
      req.add_current_tasks(id);
      if (task->Finished()) req.add_finished_tasks(id);
      if (task->distributed()) {
        TaskProgress* p = req.add_task_progress();
        p->set_task_id(id);
        p->set_splits_delivered(task->SplitsDelivered());
        if (task->def().exactly_once()) {
          for (SplitReceipt& end : task->ServedEnds()) *p->add_served_ends() = std::move(end);
        }
      }
    }
  }
  WorkerHeartbeatResponse resp;
  TFD_RETURN_IF_ERROR(dispatcher_->WorkerHeartbeat(req, &resp));
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
    std::shared_ptr<DatasetCounters>& counters = datasets_[def.dataset_id()];
    if (counters == nullptr) counters = std::make_shared<DatasetCounters>();
    tasks_[def.task_id()] = std::make_shared<Task>(def, config_, dispatcher_.get(), counters);
  }
  return absl::OkStatus();
}

}  // namespace tfdata::service
