#include "lib/bench/impact.h"

#include <chrono>
#include <cmath>

#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/output/run_stats.h"

namespace tfdata {

absl::StatusOr<Throughput> MeasureThroughput(const Dataset& dataset, double warmup_s, double duration_s,
                                             const std::atomic<bool>* stop) {
  // The dataset as an endless stream: a new pass whenever one ends.
  std::unique_ptr<Iterator> it;
  int64_t empty_passes = 0, pass_elements = 0;
  auto next = [&](Element* e) -> absl::StatusOr<bool> {
    while (true) {
      if (!it) {
        TFD_ASSIGN_OR_RETURN(it, dataset.MakeIterator(IteratorContext{}));
        pass_elements = 0;
      }
      TFD_ASSIGN_OR_RETURN(bool more, it->Next(e));
      if (more) {
        ++pass_elements;
        return true;
      }
      it.reset();
      // An empty pipeline would make this loop spin forever: give up after a few empty passes.
      if (pass_elements == 0 && ++empty_passes >= 3) return false;
    }
  };
  return MeasureReads(next, warmup_s, duration_s, stop);
}

absl::StatusOr<Throughput> MeasureReads(const std::function<absl::StatusOr<bool>(Element*)>& next, double warmup_s,
                                        double duration_s, const std::atomic<bool>* stop) {
  using Clock = std::chrono::steady_clock;
  const auto measure_from =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_s));
  const auto until =
      measure_from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s));
  Throughput t;
  bool measuring = warmup_s <= 0;
  auto measuring_since = Clock::now();
  Element e;
  for (int64_t n = 1; !(stop && stop->load(std::memory_order_relaxed)); ++n) {
    TFD_ASSIGN_OR_RETURN(bool more, next(&e));
    if (!more) break;
    // Check the clock every 64 elements (counted over all passes, however short): cheap pipelines
    // produce tens of millions per second.
    const bool check_clock = (n & 63) == 0;
    if (!measuring) {
      if (check_clock && Clock::now() >= measure_from) {
        measuring = true;
        measuring_since = Clock::now();
      }
      continue;
    }
    ++t.elements;
    t.bytes += ElementByteSize(e);
    if (check_clock && Clock::now() >= until) break;
  }
  t.seconds = std::chrono::duration<double>(Clock::now() - measuring_since).count();
  return t;
}

pipeline::Pipeline WithRepeat(const pipeline::Pipeline& p) {
  pipeline::Pipeline out = p;
  out.add_op()->mutable_repeat();
  return out;
}

pipeline::Pipeline WithReplayFirstElement(const pipeline::Pipeline& p) {
  pipeline::Pipeline out = p;
  out.add_op()->mutable_take()->set_count(1);
  out.add_op()->mutable_cache();
  out.add_op()->mutable_repeat();
  return out;
}

ImpactReport ComputeImpact(const Throughput& pipeline, const Throughput& replay, std::optional<double> model_rate,
                           int cores) {
  ImpactReport r;
  r.pipeline = pipeline;
  r.replay = replay;
  r.model_rate = model_rate;
  r.cores = cores;
  r.assumptions = {
      fmt::format("a worker runs the pipeline as fast as this process did ({} cores here)", cores),
      "throughput grows linearly with workers (no shared bottleneck such as storage or network)",
      "the trainer can read from the service at least as fast as take(1).cache().repeat() ran here",
  };
  const double p = pipeline.elements_per_s();
  if (!model_rate) return r;
  const double m = *model_rate;
  r.input_bound = p < m;
  r.training_rate_now = std::min(m, p);
  r.training_rate_service = std::min(m, replay.elements_per_s());
  r.speedup = r.training_rate_now > 0 ? r.training_rate_service / r.training_rate_now : 0;
  r.workers_needed = p > 0 ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(r.training_rate_service / p))) : -1;
  return r;
}

std::string FormatImpactTable(const ImpactReport& r) {
  std::string out;
  out += fmt::format("{:<44} {:>14} {:>12}\n", "measurement", "elements/s", "bytes/s");
  out += fmt::format("{:<44} {:>14} {:>12}\n", "pipeline (this process)", HumanCount(r.pipeline.elements_per_s()),
                     HumanBytes(r.pipeline.bytes_per_s()));
  out += fmt::format("{:<44} {:>14} {:>12}\n", "pipeline + take(1).cache().repeat()",
                     HumanCount(r.replay.elements_per_s()), HumanBytes(r.replay.bytes_per_s()));
  if (r.service) {
    out += fmt::format("{:<44} {:>14} {:>12}\n", fmt::format("through the service ({} worker(s))", r.service->workers),
                       HumanCount(r.service->throughput.elements_per_s()),
                       HumanBytes(r.service->throughput.bytes_per_s()));
    const double here = r.pipeline.elements_per_s();
    if (here > 0) {
      out += fmt::format("  the service delivered {:.2f}x this process's rate (dispatcher {})\n",
                         r.service->throughput.elements_per_s() / here, r.service->dispatcher);
    }
  }
  if (!r.model_rate) {
    out += fmt::format(
        "\nNo model rate given (--model-rate or --step-time). A model that consumes more than {} elements/s\n"
        "is input-bound on this host; with the service, N workers feed about N x {} elements/s.\n",
        HumanCount(r.pipeline.elements_per_s()), HumanCount(r.pipeline.elements_per_s()));
  } else {
    out += fmt::format("{:<44} {:>14}\n", "model consumption rate", HumanCount(*r.model_rate));
    out += "\n";
    out += fmt::format("input-bound:              {}\n", r.input_bound ? "yes" : "no");
    out += fmt::format("training rate now:        {} elements/s\n", HumanCount(r.training_rate_now));
    out += fmt::format("with the service:         {} elements/s\n", HumanCount(r.training_rate_service));
    out += fmt::format("possible speedup:         {:.2f}x\n", r.speedup);
    out += fmt::format("workers needed:           {}\n", r.workers_needed);
  }
  out += "\nassumptions:\n";
  for (const auto& a : r.assumptions) out += "  - " + a + "\n";
  return out;
}

std::string FormatImpactJson(const ImpactReport& r) {
  auto tp = [](const Throughput& t) {
    return fmt::format(
        R"({{"elements": {}, "bytes": {}, "seconds": {:.6f}, "elements_per_s": {:.3f}, "bytes_per_s": {:.3f}}})",
        t.elements, t.bytes, t.seconds, t.elements_per_s(), t.bytes_per_s());
  };
  std::string out =
      fmt::format(R"({{"pipeline": {}, "replay": {}, "cores": {})", tp(r.pipeline), tp(r.replay), r.cores);
  if (r.service) {
    out += fmt::format(R"(, "service": {{"throughput": {}, "workers": {}, "dispatcher": "{}"}})",
                       tp(r.service->throughput), r.service->workers, r.service->dispatcher);
  }
  if (r.model_rate) {
    out += fmt::format(
        R"(, "model_rate": {:.3f}, "input_bound": {}, "training_rate_now": {:.3f}, "training_rate_service": {:.3f}, "speedup": {:.4f}, "workers_needed": {})",
        *r.model_rate, r.input_bound ? "true" : "false", r.training_rate_now, r.training_rate_service, r.speedup,
        r.workers_needed);
  }
  out += R"(, "assumptions": [)";
  for (size_t i = 0; i < r.assumptions.size(); ++i) out += fmt::format(R"({}"{}")", i ? ", " : "", r.assumptions[i]);
  out += "]}";
  return out;
}

}  // namespace tfdata
