#include "cmd/metrics_flags.h"

#include "absl/status/status.h"
#include "cmd/common.h"
#include "lib/core/status_macros.h"
#include "lib/service/dispatcher/dispatcher.h"
#include "lib/service/metrics/status_page.h"

namespace tfdata::cmd {

void AddMetricsFlags(CLI::App* sub, MetricsFlags* flags) {
  sub->add_option("--metrics-port", flags->port,
                  "Serve Prometheus metrics at http://HOST:PORT/metrics on --host (0: any free port; unset: none); "
                  "a dispatcher also serves its status page at / and /status.json");
  sub->add_option("--metrics-port-file", flags->port_file, "Write the metrics port to PATH once listening");
}

absl::StatusOr<std::unique_ptr<service::HttpServer>> StartMetrics(const MetricsFlags& flags, const std::string& host,
                                                                  const service::Metrics* metrics,
                                                                  const service::Dispatcher* dispatcher) {
  if (flags.port < 0) {
    if (!flags.port_file.empty()) return absl::InvalidArgumentError("--metrics-port-file needs --metrics-port");
    return nullptr;
  }
  if (flags.port > 65535) return absl::InvalidArgumentError("--metrics-port: must be 0..65535");
  auto server = std::make_unique<service::HttpServer>();
  server->Handle("/metrics", [metrics](std::string* content_type) {
    *content_type = "text/plain; version=0.0.4; charset=utf-8";
    return metrics->Render();
  });
  if (dispatcher != nullptr) {
    // One source for the page, the JSON and `tfdata status`: the core's GetStatus.
    auto status = [dispatcher] {
      service::DispatcherStatus s;
      (void)dispatcher->GetStatus(service::GetStatusRequest(), &s);  // cannot fail: a read of the state
      return s;
    };
    server->Handle("/", [status](std::string* content_type) {
      *content_type = "text/html; charset=utf-8";
      return service::StatusHtml(status());
    });
    server->Handle("/status.json", [status](std::string* content_type) {
      *content_type = "application/json";
      return service::StatusJson(status());
    });
  }
  TFD_RETURN_IF_ERROR(server->Start(host, flags.port));
  TFD_RETURN_IF_ERROR(WritePortFile(flags.port_file, server->port()));
  return server;
}

}  // namespace tfdata::cmd
