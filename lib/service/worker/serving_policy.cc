#include "lib/service/worker/serving_policy.h"

#include <algorithm>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"
#include "lib/service/common/names.h"
#include "lib/service/worker/cross_trainer_window.h"
#include "lib/service/worker/round_buffer.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {
namespace {

// A request's bounds, with the defaults for the fields it left unset.
struct Limits {
  absl::Time deadline;
  int64_t max_elements, max_bytes;
};

Limits LimitsOf(const GetElementsRequest& req) {
  return Limits{absl::Now() + absl::Milliseconds(req.timeout_ms() > 0 ? req.timeout_ms() : 1000),
                req.max_elements() > 0 ? req.max_elements() : 1024, req.max_bytes() > 0 ? req.max_bytes() : (8 << 20)};
}

absl::Status StoppedError(int64_t task_id) {
  return absl::NotFoundError(absl::StrCat(TaskName(task_id), " was stopped on this worker"));
}

// Appends `entry` (an element or a split-end marker) to `runs`, extending the last run when the
// entry continues it.
void AddToRuns(const TaskBuffer::Buffered& entry, std::vector<SplitRun>& runs) {
  const SplitPosition& at = entry.position;
  SplitRun* last = runs.empty() ? nullptr : &runs.back();
  const bool continues = last != nullptr && !last->split_end() && last->epoch() == at.epoch &&
                         last->split() == at.split && last->first_seq() + last->count() == at.seq;
  if (!continues) {
    last = &runs.emplace_back();
    last->set_epoch(at.epoch);
    last->set_split(at.split);
    last->set_first_seq(at.seq);
  }
  if (entry.split_end) {
    last->set_split_end(true);
  } else {
    last->set_count(last->count() + 1);
  }
}

// A plain task: each buffered element goes to whichever request comes first. In an exactly-once
// task, the response also says where each element comes from (split runs, with split ends).
class FirstComePolicy final : public ServingPolicy {
 public:
  FirstComePolicy(int64_t task_id, bool exactly_once, TaskBuffer& buffer)
      : task_id_(task_id), exactly_once_(exactly_once), buffer_(buffer) {}

  absl::StatusOr<GetElementsResult> Serve(const GetElementsRequest& req) override {
    const Limits limits = LimitsOf(req);
    absl::MutexLock lock(&buffer_.mu());
    buffer_.Await(1, limits.deadline);
    GetElementsResult result;
    result.first_index = buffer_.next_index();
    if (buffer_.cancelled()) return StoppedError(task_id_);
    int64_t bytes = 0;
    while (!buffer_.empty() && static_cast<int64_t>(result.elements.size()) < limits.max_elements &&
           (result.elements.empty() || bytes + buffer_.front_bytes() <= limits.max_bytes)) {
      bytes += buffer_.front_bytes();
      if (!exactly_once_) {
        result.elements.push_back(buffer_.Pop());
        continue;
      }
      TaskBuffer::Buffered entry = buffer_.PopEntry();
      AddToRuns(entry, result.split_runs);
      if (entry.split_end) {
        SplitReceipt& end = served_ends_.emplace_back();
        end.set_epoch(entry.position.epoch);
        end.set_split(entry.position.split);
        end.set_count(entry.position.seq);
        if (served_ends_.size() > kServedEnds) served_ends_.pop_front();
      }
      if (!entry.split_end) result.elements.push_back(std::move(entry.element));
    }
    if (buffer_.empty() && buffer_.done()) {
      if (!buffer_.error().ok() && result.elements.empty()) return buffer_.error();
      result.end_of_sequence = buffer_.error().ok();
      if (result.end_of_sequence) buffer_.MarkEndServed();
    }
    return result;
  }

  void AddStats(TaskStats&) override {}

  std::vector<SplitReceipt> ServedEnds() override {
    absl::MutexLock lock(&buffer_.mu());
    return {served_ends_.begin(), served_ends_.end()};
  }

 private:
  static constexpr size_t kServedEnds = 64;
  const int64_t task_id_;
  const bool exactly_once_;
  TaskBuffer& buffer_;
  std::deque<SplitReceipt> served_ends_ ABSL_GUARDED_BY(buffer_.mu());
};

// Cross-trainer cache: every trainer reads the whole stream from its cursor over the window.
class CrossTrainerPolicy final : public ServingPolicy {
 public:
  CrossTrainerPolicy(int64_t task_id, int64_t window_bytes, TaskBuffer& buffer)
      : task_id_(task_id), buffer_(buffer), window_(window_bytes) {}

  absl::StatusOr<GetElementsResult> Serve(const GetElementsRequest& req) override {
    if (req.trainer_id().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(TaskName(task_id_), " belongs to a cross-trainer cache job: requests need a trainer id"));
    }
    const Limits limits = LimitsOf(req);
    const std::string& trainer = req.trainer_id();
    absl::MutexLock lock(&buffer_.mu());
    GetElementsResult result;
    while (true) {
      if (buffer_.cancelled()) return StoppedError(task_id_);
      TFD_RETURN_IF_ERROR(window_error_);
      if (!window_.AtEnd(trainer)) break;
      if (!buffer_.empty()) {
        // Grow the window by up to half of it per request: enough for big responses, never so
        // much that it evicts what this trainer is about to read.
        int64_t moved = 0, moved_bytes = 0;
        do {
          const int64_t bytes = buffer_.front_bytes();
          if (auto st = window_.Push(buffer_.Pop(), bytes); !st.ok()) {
            window_error_ = absl::InvalidArgumentError(absl::StrCat(TaskName(task_id_), ": ", st.message()));
            spdlog::error("worker: {}", std::string(window_error_.message()));
            return window_error_;
          }
          ++moved;
          moved_bytes += bytes;
        } while (!buffer_.empty() && moved < limits.max_elements &&
                 moved_bytes + buffer_.front_bytes() <= window_.max_bytes() / 2);
        continue;
      }
      if (buffer_.done()) {
        TFD_RETURN_IF_ERROR(buffer_.error());
        result.first_index = window_.end();
        result.end_of_sequence = true;
        return result;
      }
      if (!buffer_.Await(1, limits.deadline)) {
        result.first_index = window_.end();
        return result;  // nothing yet: the reader asks again
      }
    }
    CrossTrainerWindow::Read read = window_.Take(trainer, limits.max_elements, limits.max_bytes);
    if (read.skipped > 0) {
      spdlog::info("worker: {}: trainer \"{}\" fell out of the cross-trainer cache window and skipped {} element(s)",
                   TaskName(task_id_), trainer, read.skipped);
    }
    result.elements = std::move(read.elements);
    result.first_index = read.first_index;
    result.elements_skipped = read.skipped;
    return result;
  }

  void AddStats(TaskStats& s) override {
    absl::MutexLock lock(&buffer_.mu());
    s.window_bytes = window_.bytes();
    s.window_peak_bytes = window_.peak_bytes();
    s.window_max_bytes = window_.max_bytes();
  }

 private:
  const int64_t task_id_;
  TaskBuffer& buffer_;
  CrossTrainerWindow window_ ABSL_GUARDED_BY(buffer_.mu());
  absl::Status window_error_ ABSL_GUARDED_BY(buffer_.mu());
};

// Coordinated reads: consumer i's element of the round (see round_buffer.h).
class RoundsPolicy final : public ServingPolicy {
 public:
  RoundsPolicy(const TaskDef& def, const WorkerConfig& config, TaskBuffer& buffer)
      : task_id_(def.task_id()),
        num_consumers_(def.num_consumers()),
        config_(config),
        buffer_(buffer),
        rounds_(def.num_consumers()) {}

  absl::StatusOr<GetElementsResult> Serve(const GetElementsRequest& req) override {
    const int consumer = req.consumer_index();
    if (consumer < 0 || consumer >= num_consumers_ || req.round_index() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(TaskName(task_id_), ": consumer ", consumer, " of round ",
                                                     req.round_index(), " is outside this job's ", num_consumers_,
                                                     " consumers"));
    }
    const Limits limits = LimitsOf(req);
    const int64_t round = req.round_index();
    absl::MutexLock lock(&buffer_.mu());
    rounds_.Touch(consumer);
    GetElementsResult result;
    result.first_index = round;
    while (true) {
      if (buffer_.cancelled()) return StoppedError(task_id_);
      const absl::Time now = absl::Now();
      if (const int64_t dropped = rounds_.Expire(now, config_.round_expiry); dropped > 0) {
        // Logged the first time; later drops only count (TaskStats).
        if (elements_dropped_ == 0) {
          spdlog::warn(
              "worker: {}: dropped {} element(s) of rounds open for more than {} (their consumers stopped "
              "asking; later drops are not logged)",
              TaskName(task_id_), dropped, absl::FormatDuration(config_.round_expiry));
        }
        elements_dropped_ += dropped;
      }
      size_t needed = 1;
      if (rounds_.Known(round)) {
        if (auto e = rounds_.Take(round, consumer)) {
          result.elements.push_back(*std::move(e));
          return result;
        }
        if (!buffer_.empty()) {  // late: the stream's next element, still from this worker
          ++late_elements_;
          result.elements.push_back(buffer_.Pop());
          return result;
        }
      } else {
        needed = static_cast<size_t>(rounds_.NumPresent());
        // Untaken elements of open rounds are bounded like the buffer; past it, wait for expiry.
        if (buffer_.size() >= needed && rounds_.bytes() < config_.buffer_bytes) {
          std::vector<Element> elements;
          for (size_t i = 0; i < needed; ++i) elements.push_back(buffer_.Pop());
          rounds_.Open(round, std::move(elements), now);
          continue;
        }
      }
      if (buffer_.done() && buffer_.size() < needed) {
        TFD_RETURN_IF_ERROR(buffer_.error());
        return absl::FailedPreconditionError(
            absl::StrCat(TaskName(task_id_), ": the pipeline ended, but coordinated reads need an infinite pipeline"));
      }
      if (now >= limits.deadline) return result;  // nothing yet: the reader asks again
      // Wake up now and then: expiry frees room without any other change.
      buffer_.Await(needed, std::min(limits.deadline, now + absl::Milliseconds(50)));
    }
  }

  void AddStats(TaskStats& s) override {
    absl::MutexLock lock(&buffer_.mu());
    s.round_elements_dropped = elements_dropped_;
    s.late_elements = late_elements_;
  }

 private:
  const int64_t task_id_;
  const int num_consumers_;
  const WorkerConfig& config_;
  TaskBuffer& buffer_;
  RoundBuffer rounds_ ABSL_GUARDED_BY(buffer_.mu());
  int64_t elements_dropped_ ABSL_GUARDED_BY(buffer_.mu()) = 0;
  int64_t late_elements_ ABSL_GUARDED_BY(buffer_.mu()) = 0;
};

}  // namespace

std::unique_ptr<ServingPolicy> MakeServingPolicy(const TaskDef& def, const WorkerConfig& config, TaskBuffer& buffer) {
  if (def.num_consumers() > 0) return std::make_unique<RoundsPolicy>(def, config, buffer);
  if (def.cross_trainer_cache()) {
    return std::make_unique<CrossTrainerPolicy>(def.task_id(), config.cross_trainer_cache_bytes, buffer);
  }
  return std::make_unique<FirstComePolicy>(def.task_id(), def.exactly_once(), buffer);
}

}  // namespace tfdata::service
