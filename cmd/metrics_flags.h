// --metrics-port and --metrics-port-file of `tfdata dispatcher` and `tfdata worker`: Prometheus
// metrics at http://HOST:PORT/metrics (lib/service/metrics), on the server's --host.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "lib/service/metrics/http_server.h"
#include "lib/service/metrics/metrics.h"

namespace tfdata::cmd {

struct MetricsFlags {
  int port = -1;  // -1: no metrics endpoint
  std::string port_file;
};

void AddMetricsFlags(CLI::App* sub, MetricsFlags* flags);
// Serves `metrics` when --metrics-port was given (nullptr otherwise); writes --metrics-port-file.
// With a `dispatcher`, also its status page at / and /status.json (lib/service/metrics/status_page.h).
absl::StatusOr<std::unique_ptr<service::HttpServer>> StartMetrics(const MetricsFlags& flags, const std::string& host,
                                                                  const service::Metrics* metrics,
                                                                  const service::Dispatcher* dispatcher = nullptr);

}  // namespace tfdata::cmd
