#include "lib/service/metrics/metrics.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/worker/worker.h"
#include "prometheus/text_serializer.h"

namespace tfdata::service {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

void Add(MetricFamily* f, double value, std::vector<ClientMetric::Label> labels = {}) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f->type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f->metric.push_back(std::move(m));
}

MetricFamily Histogram(std::string name, std::string help, const LatencyHistogram::Snapshot& h) {
  MetricFamily f = Family(std::move(name), std::move(help), MetricType::Histogram);
  ClientMetric m;
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum_seconds;
  for (size_t i = 0; i < h.cumulative.size(); ++i) {
    m.histogram.bucket.push_back({h.cumulative[i], LatencyHistogram::kBounds[i]});
  }
  m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
  f.metric.push_back(std::move(m));
  return f;
}

MetricFamily One(std::string name, std::string help, MetricType type, double value) {
  MetricFamily f = Family(std::move(name), std::move(help), type);
  Add(&f, value);
  return f;
}

std::string ModeName(ProcessingMode mode) {
  std::string name = ProcessingMode_Name(mode);
  return absl::AsciiStrToLower(name.empty() ? "unknown" : name);
}

class DispatcherGauges final : public prometheus::Collectable {
 public:
  explicit DispatcherGauges(const Dispatcher* d) : d_(d) {}
  std::vector<MetricFamily> Collect() const override {
    const DispatcherCounts c = d_->Counts();
    std::vector<MetricFamily> out;
    MetricFamily workers =
        Family("tfdata_dispatcher_workers", "Workers registered now, by state (suspected: reported unreachable)",
               MetricType::Gauge);
    Add(&workers, static_cast<double>(c.workers - c.workers_suspected), {{"state", "alive"}});
    Add(&workers, static_cast<double>(c.workers_suspected), {{"state", "suspected"}});
    out.push_back(std::move(workers));
    MetricFamily removed = Family("tfdata_dispatcher_workers_removed_total",
                                  "Workers removed since start, by why: lost (silent past --worker-timeout) or left "
                                  "(SIGTERM)",
                                  MetricType::Counter);
    Add(&removed, static_cast<double>(c.workers_lost_total), {{"reason", "lost"}});
    Add(&removed, static_cast<double>(c.workers_left_total), {{"reason", "left"}});
    out.push_back(std::move(removed));
    out.push_back(
        One("tfdata_dispatcher_datasets", "Datasets registered", MetricType::Gauge, static_cast<double>(c.datasets)));
    MetricFamily jobs = Family("tfdata_dispatcher_jobs", "Jobs known, by processing mode", MetricType::Gauge);
    for (ProcessingMode mode : {PARALLEL_EPOCHS, DISTRIBUTED_EPOCH}) {
      auto it = c.jobs.find(mode);
      Add(&jobs, it == c.jobs.end() ? 0.0 : static_cast<double>(it->second), {{"mode", ModeName(mode)}});
    }
    for (const auto& [mode, n] : c.jobs) {
      if (mode != PARALLEL_EPOCHS && mode != DISTRIBUTED_EPOCH) {
        Add(&jobs, static_cast<double>(n), {{"mode", ModeName(mode)}});
      }
    }
    out.push_back(std::move(jobs));
    out.push_back(One("tfdata_dispatcher_active_iterations", "Iterations (epochs of jobs) being read",
                      MetricType::Gauge, static_cast<double>(c.active_iterations)));
    out.push_back(One("tfdata_dispatcher_readers", "Readers (clients) of an iteration", MetricType::Gauge,
                      static_cast<double>(c.readers)));
    out.push_back(One("tfdata_dispatcher_splits_assigned_total", "distributed_epoch splits handed to tasks",
                      MetricType::Counter, static_cast<double>(c.splits_assigned_total)));
    out.push_back(One("tfdata_dispatcher_splits_lost_total",
                      "distributed_epoch splits a removed worker held and that were not given out again",
                      MetricType::Counter, static_cast<double>(c.splits_lost_total)));
    out.push_back(One("tfdata_dispatcher_journal_appends_total", "Journal records appended and synced",
                      MetricType::Counter, static_cast<double>(c.journal_appends_total)));
    out.push_back(One("tfdata_dispatcher_journal_appended_bytes_total", "Bytes appended to the journal",
                      MetricType::Counter, static_cast<double>(c.journal_appended_bytes_total)));
    out.push_back(One("tfdata_dispatcher_journal_bytes", "The journal file's size now (compaction shrinks it)",
                      MetricType::Gauge, static_cast<double>(c.journal_bytes)));
    out.push_back(Histogram("tfdata_dispatcher_journal_append_seconds", "Time to append and sync one journal record",
                            c.journal_append_latency));
    AddJobs(out);
    return out;
  }

 private:
  // Per live job, from the same status as the status page (labels: the job's name, or its id for
  // a job of its own; live jobs only, so the label set stays bounded).
  void AddJobs(std::vector<MetricFamily>& out) const {
    DispatcherStatus status;
    if (!d_->GetStatus(GetStatusRequest(), &status).ok()) return;
    MetricFamily recommended = Family("tfdata_job_workers_recommended",
                                      "Workers that would make the job's readers stop waiting (the live worker "
                                      "estimate; the current number when they do not wait)",
                                      MetricType::Gauge);
    MetricFamily workers =
        Family("tfdata_job_workers", "Workers serving the job's current iteration", MetricType::Gauge);
    MetricFamily stall =
        Family("tfdata_job_stall_fraction",
               "Share of the readers' time spent waiting in Next() for an element, last ~10 s", MetricType::Gauge);
    MetricFamily rate = Family("tfdata_job_elements_per_second",
                               "Elements the job's readers received per second, last ~10 s", MetricType::Gauge);
    for (const JobStatus& j : status.jobs()) {
      const std::vector<ClientMetric::Label> labels = {{"job", j.name().empty() ? std::to_string(j.id()) : j.name()},
                                                       {"mode", j.mode()}};
      Add(&recommended, j.workers_recommended(), labels);
      Add(&workers, j.workers(), labels);
      if (j.has_stall_fraction()) Add(&stall, j.stall_fraction(), labels);
      Add(&rate, j.elements_per_second(), labels);
    }
    for (MetricFamily* f : {&recommended, &workers, &stall, &rate}) out.push_back(std::move(*f));
  }

  const Dispatcher* d_;
};

class WorkerGauges final : public prometheus::Collectable {
 public:
  explicit WorkerGauges(const Worker* w) : w_(w) {}
  std::vector<MetricFamily> Collect() const override {
    const WorkerCounts c = w_->Counts();
    std::vector<MetricFamily> out;
    out.push_back(
        One("tfdata_worker_tasks", "Tasks this worker runs", MetricType::Gauge, static_cast<double>(c.tasks)));
    out.push_back(One("tfdata_worker_get_elements_total",
                      "GetElements calls answered with elements or the end (all data planes)", MetricType::Counter,
                      static_cast<double>(c.get_elements_total)));
    // By dataset (bounded by the datasets this worker ran tasks of).
    MetricFamily produced = Family("tfdata_worker_elements_produced_total",
                                   "Elements the pipelines produced into the tasks' buffers", MetricType::Counter);
    MetricFamily produced_bytes =
        Family("tfdata_worker_produced_bytes_total", "Tensor bytes of the elements produced", MetricType::Counter);
    MetricFamily produce_seconds = Family("tfdata_worker_produce_seconds_total",
                                          "Time the producers spent in the pipeline making them (not waiting for "
                                          "buffer room); over elements produced, the time per element",
                                          MetricType::Counter);
    MetricFamily served = Family("tfdata_worker_elements_served_total", "Elements served to readers (all data planes)",
                                 MetricType::Counter);
    MetricFamily served_bytes = Family("tfdata_worker_served_bytes_total",
                                       "Tensor bytes of the elements served (before compression)", MetricType::Counter);
    MetricFamily buffered =
        Family("tfdata_worker_buffered_elements", "Elements produced and not yet served, now", MetricType::Gauge);
    MetricFamily buffered_bytes =
        Family("tfdata_worker_buffered_bytes", "Tensor bytes of the buffered elements, now", MetricType::Gauge);
    MetricFamily window = Family("tfdata_worker_cross_trainer_window_bytes",
                                 "Bytes held in cross-trainer cache windows, now", MetricType::Gauge);
    MetricFamily skipped =
        Family("tfdata_worker_cross_trainer_skipped_elements_total",
               "Elements trainers skipped because they had left a cross-trainer window", MetricType::Counter);
    for (const auto& [dataset, d] : c.datasets) {
      const std::vector<ClientMetric::Label> labels = {{"dataset", dataset}};
      Add(&produced, static_cast<double>(d.elements_produced), labels);
      Add(&produced_bytes, static_cast<double>(d.bytes_produced), labels);
      Add(&produce_seconds, d.produce_seconds, labels);
      Add(&served, static_cast<double>(d.elements_served), labels);
      Add(&served_bytes, static_cast<double>(d.bytes_served), labels);
      Add(&buffered, static_cast<double>(d.buffered_elements), labels);
      Add(&buffered_bytes, static_cast<double>(d.buffered_bytes), labels);
      Add(&window, static_cast<double>(d.window_bytes), labels);
      Add(&skipped, static_cast<double>(d.elements_skipped), labels);
    }
    for (MetricFamily* f : {&produced, &produced_bytes, &produce_seconds, &served, &served_bytes, &buffered,
                            &buffered_bytes, &window, &skipped}) {
      out.push_back(std::move(*f));
    }
    MetricFamily decisions =
        Family("tfdata_worker_auto_compression_tasks",
               "compression auto tasks now, by the decision their measurement made", MetricType::Gauge);
    Add(&decisions, static_cast<double>(c.auto_compressing_tasks), {{"decision", "compress"}});
    Add(&decisions, static_cast<double>(c.auto_plain_tasks), {{"decision", "plain"}});
    out.push_back(std::move(decisions));
    MetricFamily responses = Family("tfdata_worker_compression_responses_total",
                                    "Responses that asked for compression, by outcome: compressed, or plain "
                                    "(snappy saved less than an eighth)",
                                    MetricType::Counter);
    Add(&responses, static_cast<double>(c.responses_compressed_total), {{"outcome", "compressed"}});
    Add(&responses, static_cast<double>(c.responses_left_plain_total), {{"outcome", "plain"}});
    out.push_back(std::move(responses));
    out.push_back(One("tfdata_worker_compression_input_bytes_total",
                      "Element frame bytes of those responses, before snappy", MetricType::Counter,
                      static_cast<double>(c.compression_input_bytes_total)));
    out.push_back(One("tfdata_worker_compression_output_bytes_total",
                      "What snappy made of them (output over input: the compression ratio)", MetricType::Counter,
                      static_cast<double>(c.compression_output_bytes_total)));
    out.push_back(Histogram("tfdata_worker_get_elements_seconds",
                            "Time a GetElements call took in the worker, waiting for elements included",
                            c.get_elements_latency));
    return out;
  }

 private:
  const Worker* w_;
};

}  // namespace

std::string CodeName(int code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  for (char& ch : name) ch = ch == ' ' ? '_' : absl::ascii_toupper(ch);
  return name.empty() ? "UNKNOWN" : name;
}

Metrics::Metrics(std::string role, std::shared_ptr<prometheus::Collectable> state)
    : registry_(std::make_shared<prometheus::Registry>()),
      rpcs_(&prometheus::BuildCounter()
                 .Name("tfdata_" + role + "_rpcs_total")
                 .Help("RPCs answered, by method and status code")
                 .Register(*registry_)),
      state_(std::move(state)) {}

std::unique_ptr<Metrics> Metrics::ForDispatcher(const Dispatcher* dispatcher) {
  return std::unique_ptr<Metrics>(new Metrics("dispatcher", std::make_shared<DispatcherGauges>(dispatcher)));
}

std::unique_ptr<Metrics> Metrics::ForWorker(const Worker* worker) {
  return std::unique_ptr<Metrics>(new Metrics("worker", std::make_shared<WorkerGauges>(worker)));
}

void Metrics::RecordRpc(std::string_view method, int code) {
  rpcs_->Add({{"method", std::string(method)}, {"code", CodeName(code)}}).Increment();
}

std::string Metrics::Render() const {
  std::vector<MetricFamily> families = state_->Collect();
  for (MetricFamily& f : registry_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace tfdata::service
