// DispatcherState: the distributed_epoch split records (assign, return, requeue, end, deliver)
// and the queries about splits. The other records are applied in dispatcher_state.cc.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "lib/service/dispatcher/dispatcher_state.h"
#include "lib/service/dispatcher/dispatcher_state_internal.h"

namespace tfdata::service {

using state_internal::Find;
using state_internal::Inconsistent;

absl::Status DispatcherState::AssignSplits(const AssignSplitsUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("splits for unknown " + TaskName(u.task_id()));
  Iteration* it = Find(iterations_, t->iteration_id);
  if (it == nullptr) return Inconsistent("splits for a task of an unknown iteration");
  if (u.epoch() < 0) return Inconsistent("split assignment of a negative epoch");
  if (u.indices_size() > 0) {  // from the epoch's pool of returned splits, front first
    if (u.skips_size() != 0 && u.skips_size() != u.indices_size()) {
      return Inconsistent("split assignment with skips for some of its splits only");
    }
    for (const SkipRanges& s : u.skips()) {
      if (s.begins_size() != s.ends_size()) return Inconsistent("split skips with unpaired range ends");
    }
    std::vector<int64_t>& pool = it->returned_splits[u.epoch()];
    if (u.count() != 0 || static_cast<size_t>(u.indices_size()) > pool.size() ||
        !std::equal(u.indices().begin(), u.indices().end(), pool.begin())) {
      if (pool.empty()) it->returned_splits.erase(u.epoch());
      return Inconsistent(absl::StrCat("returned splits of epoch ", u.epoch(), " handed out out of order"));
    }
    pool.erase(pool.begin(), pool.begin() + u.indices_size());
    if (pool.empty()) it->returned_splits.erase(u.epoch());
    t->splits_assigned += u.indices_size();
    t->last_epoch = u.epoch();
    t->last_first = 0;
    t->last_count = 0;
    t->last_indices.assign(u.indices().begin(), u.indices().end());
    t->last_skips = u.skips();
    for (int64_t i : u.indices()) {
      t->outstanding_epochs.push_back(u.epoch());
      t->outstanding_indices.push_back(i);
    }
    return absl::OkStatus();
  }
  if (u.count() <= 0) return Inconsistent("empty split assignment");
  const auto [next, run_end] = NextSplitRun(*it, u.epoch());
  if (u.first() != next) {
    return Inconsistent(absl::StrCat("splits of epoch ", u.epoch(), " out of order: ", u.first(), " after ", next));
  }
  if (u.count() > run_end - next) {
    return Inconsistent(absl::StrCat("splits of epoch ", u.epoch(), " [", u.first(), ", ", u.first() + u.count(),
                                     ") include splits handed out before the job was resumed"));
  }
  it->next_split[u.epoch()] = next + u.count();
  t->splits_assigned += u.count();
  t->last_epoch = u.epoch();
  t->last_first = u.first();
  t->last_count = u.count();
  t->last_indices.clear();
  t->last_skips.Clear();
  for (int64_t i = u.first(); i < u.first() + u.count(); ++i) {
    t->outstanding_epochs.push_back(u.epoch());
    t->outstanding_indices.push_back(i);
  }
  return absl::OkStatus();
}

const ReadProgress* DispatcherState::ResumeOf(const Iteration& iteration) const {
  if (iteration.repetition != 0) return nullptr;
  const Job* job = FindJob(iteration.job_id);
  return job == nullptr ? nullptr : job->resume_progress.get();
}

std::pair<int64_t, int64_t> DispatcherState::NextSplitRun(const Iteration& iteration, int64_t epoch) const {
  constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();
  auto n = iteration.next_split.find(epoch);
  int64_t next = n == iteration.next_split.end() ? 0 : n->second;
  const ReadProgress* resumed = ResumeOf(iteration);
  if (resumed == nullptr) return {next, kUnbounded};
  return resumed->NextRun(epoch, next);
}

std::vector<int64_t> DispatcherState::ReturnableSplits(const Task& task) const {
  std::vector<int64_t> last = task.last_indices;
  if (last.empty()) {
    for (int64_t i = task.last_first; i < task.last_first + task.last_count; ++i) last.push_back(i);
  }
  const int64_t undelivered = task.splits_assigned - task.splits_delivered;
  const int64_t n = std::min<int64_t>(std::max<int64_t>(undelivered, 0), static_cast<int64_t>(last.size()));
  return {last.end() - n, last.end()};
}

bool DispatcherState::EpochOpenElsewhere(int64_t iteration_id, int64_t epoch, int64_t except) const {
  const Iteration* it = FindIteration(iteration_id);
  if (it == nullptr) return false;
  for (int64_t id : it->tasks) {
    const Task* t = FindTask(id);
    if (id != except && t != nullptr && !t->finished && t->epochs_ended <= epoch) return true;
  }
  return false;
}

absl::Status DispatcherState::ReturnSplits(const ReturnSplitsUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("splits returned by unknown " + TaskName(u.task_id()));
  Iteration* it = Find(iterations_, t->iteration_id);
  if (it == nullptr) return Inconsistent("splits returned by a task of an unknown iteration");
  const std::vector<int64_t> returnable = ReturnableSplits(*t);
  const size_t n = u.indices_size();
  if (n == 0 || u.epoch() != t->last_epoch || n > returnable.size() ||
      !std::equal(u.indices().begin(), u.indices().end(), returnable.end() - n)) {
    return Inconsistent(absl::StrCat(TaskName(u.task_id()), " returns splits it did not receive last"));
  }
  t->splits_assigned -= n;
  // The returned splits are the tail of the outstanding ones (the last assignment's tail).
  const size_t keep = t->outstanding_indices.size() >= n ? t->outstanding_indices.size() - n : 0;
  t->outstanding_epochs.resize(keep);
  t->outstanding_indices.resize(keep);
  if (t->last_indices.empty()) {
    t->last_count -= n;
  } else {
    t->last_indices.resize(t->last_indices.size() - n);
    if (!t->last_skips.empty()) t->last_skips.DeleteSubrange(t->last_skips.size() - n, n);
  }
  std::vector<int64_t>& pool = it->returned_splits[u.epoch()];
  pool.insert(pool.end(), u.indices().begin(), u.indices().end());
  return absl::OkStatus();
}

absl::Status DispatcherState::RequeueSplits(const RequeueSplitsUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("splits requeued from unknown " + TaskName(u.task_id()));
  Iteration* it = Find(iterations_, t->iteration_id);
  if (it == nullptr) return Inconsistent("splits requeued from a task of an unknown iteration");
  const Job* job = Find(jobs_, it->job_id);
  if (job == nullptr || !job->exactly_once) return Inconsistent("splits requeued in a job that is not exactly-once");
  // Check all first: a bad record changes nothing.
  std::vector<size_t> at;
  for (int64_t index : u.indices()) {
    const std::optional<size_t> k = t->FindOutstanding(u.epoch(), index);
    if (!k || std::find(at.begin(), at.end(), *k) != at.end()) {
      return Inconsistent(absl::StrCat("requeue of split ", index, " of epoch ", u.epoch(), " that ",
                                       TaskName(u.task_id()), " does not hold"));
    }
    at.push_back(*k);
  }
  std::sort(at.rbegin(), at.rend());
  for (size_t k : at) {
    t->outstanding_epochs.erase(t->outstanding_epochs.begin() + static_cast<std::ptrdiff_t>(k));
    t->outstanding_indices.erase(t->outstanding_indices.begin() + static_cast<std::ptrdiff_t>(k));
  }
  // No longer held: counted with the delivered ones, so that splits_assigned still counts what
  // the worker received (GetSplits compares it with splits_received to repeat a lost answer).
  t->splits_delivered += u.indices_size();
  std::vector<int64_t>& pool = it->returned_splits[u.epoch()];
  pool.insert(pool.end(), u.indices().begin(), u.indices().end());
  return absl::OkStatus();
}

absl::Status DispatcherState::EndSplits(const EndSplitsUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("end of splits for unknown " + TaskName(u.task_id()));
  if (u.epoch() < t->epochs_ended) return Inconsistent("end of splits of an epoch already ended");
  t->epochs_ended = u.epoch() + 1;
  return absl::OkStatus();
}

absl::Status DispatcherState::DeliverSplits(const DeliverSplitsUpdate& u) {
  Task* t = Find(tasks_, u.task_id());
  if (t == nullptr) return Inconsistent("delivery report for unknown " + TaskName(u.task_id()));
  if (u.indices_size() > 0) {  // exactly-once: by index, as the readers confirmed them
    for (int64_t index : u.indices()) {
      const std::optional<size_t> k = t->FindOutstanding(u.epoch(), index);
      if (!k) {
        return Inconsistent(absl::StrCat("delivery of split ", index, " of epoch ", u.epoch(), " that ",
                                         TaskName(u.task_id()), " does not hold"));
      }
      t->outstanding_epochs.erase(t->outstanding_epochs.begin() + static_cast<std::ptrdiff_t>(*k));
      t->outstanding_indices.erase(t->outstanding_indices.begin() + static_cast<std::ptrdiff_t>(*k));
      ++t->splits_delivered;
    }
    return absl::OkStatus();
  }
  if (u.splits_delivered() > t->splits_assigned) return Inconsistent("more splits delivered than assigned");
  const int64_t newly = std::max<int64_t>(0, u.splits_delivered() - t->splits_delivered);
  const auto drop = static_cast<std::ptrdiff_t>(std::min<size_t>(newly, t->outstanding_indices.size()));
  t->outstanding_epochs.erase(t->outstanding_epochs.begin(), t->outstanding_epochs.begin() + drop);
  t->outstanding_indices.erase(t->outstanding_indices.begin(), t->outstanding_indices.begin() + drop);
  t->splits_delivered = std::max(t->splits_delivered, u.splits_delivered());
  return absl::OkStatus();
}

}  // namespace tfdata::service
