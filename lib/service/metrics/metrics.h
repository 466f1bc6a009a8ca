// Prometheus metrics of a dispatcher or a worker process (docs/operations.md lists them all),
// served by `--metrics-port` at /metrics in the text exposition format.
//
// The counts of the state are read from the core when /metrics is scraped (Dispatcher::Counts,
// Worker::Counts), so they cost nothing between scrapes; event counters that the cores do not
// keep (RPCs by method and code) live in a prometheus-cpp registry here. Names and units follow
// Prometheus conventions (tfdata_<role>_..._total, _bytes); labels are bounded (methods, status
// codes, modes, states, live jobs, and a worker's datasets: nothing per element or worker). The per-job gauges
// come from Dispatcher::GetStatus, the status page's source.
//
// Thread-safe. The core a Metrics object reads must outlive it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/registry.h"

namespace tfdata::service {

class Dispatcher;
class Worker;

class Metrics {
 public:
  static std::unique_ptr<Metrics> ForDispatcher(const Dispatcher* dispatcher);
  static std::unique_ptr<Metrics> ForWorker(const Worker* worker);

  // One RPC answered with `code` (absl/grpc status code numbers agree): for the gRPC adapter.
  void RecordRpc(std::string_view method, int code);
  // Everything, in the text exposition format (version 0.0.4).
  std::string Render() const;

 private:
  Metrics(std::string role, std::shared_ptr<prometheus::Collectable> state);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>* rpcs_;  // owned by registry_
  std::shared_ptr<prometheus::Collectable> state_;
};

// The Prometheus name of a status code: "OK", "NOT_FOUND", ... (the label value of `code`).
std::string CodeName(int code);

}  // namespace tfdata::service
