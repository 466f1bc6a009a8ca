// GetStatus: the operator's view of the dispatcher, built under its lock from the state and the
// soft state of heartbeats. Read-only.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "lib/service/common/wire_compression.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/dispatcher/worker_estimate.h"

namespace tfdata::service {
namespace {

// "range -> map -> batch": the kinds of the pipeline's ops, in order.
std::string OpKinds(const pipeline::Pipeline& p) {
  std::vector<std::string> kinds;
  for (const pipeline::Op& op : p.op()) {
    const auto* field = op.GetReflection()->GetOneofFieldDescriptor(op, op.GetDescriptor()->oneof_decl(0));
    kinds.push_back(field != nullptr ? field->name() : "?");
  }
  return absl::StrJoin(kinds, " -> ");
}

}  // namespace

absl::Status Dispatcher::GetStatus(const GetStatusRequest& /*req*/, DispatcherStatus* resp) const {
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  resp->set_incarnation_id(incarnation_id_);
  resp->set_fault_tolerant(journal_ != nullptr);
  resp->set_uptime_seconds(absl::ToDoubleSeconds(now - started_));

  std::map<std::string, int32_t> tasks_of;  // one pass over the tasks, not one per worker
  for (int64_t id : state_.TaskIds()) ++tasks_of[state_.FindTask(id)->worker_address];
  for (const std::string& w : state_.Workers()) {
    WorkerStatus* ws = resp->add_workers();
    ws->set_address(w);
    for (const std::string& t : state_.WorkerTags(w)) ws->add_tags(t);
    ws->set_tasks(tasks_of[w]);
    auto seen = worker_last_seen_.find(w);
    ws->set_seconds_since_heartbeat(seen == worker_last_seen_.end() ? -1 : absl::ToDoubleSeconds(now - seen->second));
    ws->set_state(seen == worker_last_seen_.end() ? "unheard" : SuspectedLocked(w) ? "suspected" : "alive");
    if (auto traffic = worker_traffic_.find(w); traffic != worker_traffic_.end()) {
      if (auto change = traffic->second.Get(now); change && change->over > absl::ZeroDuration()) {
        const double seconds = absl::ToDoubleSeconds(change->over);
        ws->set_elements_per_second(change->values[0] / seconds);
        ws->set_bytes_per_second(change->values[1] / seconds);
      }
    }
  }

  std::map<std::string, int32_t> jobs_of_dataset;
  const std::vector<int64_t> job_ids = state_.JobIds();
  for (int64_t id : job_ids) ++jobs_of_dataset[state_.FindJob(id)->dataset_id];
  for (const std::string& id : state_.DatasetIds()) {
    const auto* d = state_.FindDataset(id);
    DatasetStatus* ds = resp->add_datasets();
    ds->set_id(id);
    ds->set_fingerprint(d->fingerprint);
    ds->set_compression(CompressionFlagName(d->compression));
    ds->set_jobs(jobs_of_dataset[id]);
    ds->set_ops(OpKinds(d->pipeline));
  }

  for (int64_t id : job_ids) {
    const auto* job = state_.FindJob(id);
    if (job->iterations.empty()) continue;
    const auto* it = state_.FindIteration(job->iterations.back());
    if (it == nullptr || it->garbage_collected) continue;
    JobStatus* js = resp->add_jobs();
    js->set_id(id);
    js->set_name(job->name);
    js->set_dataset_id(job->dataset_id);
    js->set_mode(absl::AsciiStrToLower(ProcessingMode_Name(job->mode)));
    js->set_iteration_id(it->id);
    js->set_repetition(it->repetition);
    js->set_finished(state_.IterationFinished(it->id));
    js->set_readers(static_cast<int32_t>(it->clients.size()));
    js->set_workers(static_cast<int32_t>(it->tasks.size()));
    js->set_exactly_once(job->exactly_once);
    js->set_cross_trainer_cache(job->cross_trainer_cache);
    js->set_num_consumers(job->num_consumers);
    std::vector<ReaderWindow> readers;
    for (int64_t c : it->clients) {
      auto traffic = client_traffic_.find(c);
      if (traffic == client_traffic_.end()) continue;
      auto change = traffic->second.Get(now);
      if (!change) continue;
      readers.push_back({change->values[0], change->values[1], change->values[2], change->values[3]});
    }
    const JobEstimate e = EstimateWorkers(js->workers(), readers);
    js->set_elements_per_second(e.elements_per_second);
    js->set_bytes_per_second(e.bytes_per_second);
    if (e.stall_fraction) js->set_stall_fraction(*e.stall_fraction);
    js->set_workers_recommended(e.workers_recommended);
    if (job->mode == DISTRIBUTED_EPOCH) {
      const int64_t epoch = it->next_split.empty() ? 0 : it->next_split.rbegin()->first;
      js->set_epoch(epoch);
      if (auto next = it->next_split.find(epoch); next != it->next_split.end()) {
        auto returned = it->returned_splits.find(epoch);
        js->set_splits_handed_out(next->second -
                                  (returned == it->returned_splits.end() ? 0 : int64_t(returned->second.size())));
      }
      js->set_splits_lost(it->splits_lost);
      // The plan in use, or as recorded at the job's creation (never made again here: that may
      // list files).
      if (auto plan = split_plans_.find(id); plan != split_plans_.end()) {
        js->set_splits_per_epoch(plan->second.num_splits());
      } else if (job->split_plan) {
        if (auto recorded = SplitPlan::FromRecord(*job->split_plan); recorded.ok()) {
          js->set_splits_per_epoch(recorded->num_splits());
        }
      }
    }
  }

  JournalStatus* j = resp->mutable_journal();
  j->set_enabled(journal_ != nullptr);
  j->set_path(journal_path_);
  j->set_bytes(journal_ != nullptr ? static_cast<int64_t>(journal_->size()) : 0);
  j->set_appends_total(journal_appends_total_.load(std::memory_order_relaxed));
  j->set_appended_bytes_total(journal_appended_bytes_total_.load(std::memory_order_relaxed));
  const LatencyHistogram::Snapshot latency = journal_append_latency_.Get();
  j->set_mean_append_seconds(latency.count > 0 ? latency.sum_seconds / static_cast<double>(latency.count) : 0);
  return absl::OkStatus();
}

}  // namespace tfdata::service
