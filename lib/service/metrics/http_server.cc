#include "lib/service/metrics/http_server.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tfdata::service {

int HttpServer::Serve(mg_connection* conn, void* handler) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (std::strcmp(info->request_method, "GET") != 0 && std::strcmp(info->request_method, "HEAD") != 0) {
    mg_send_http_error(conn, 405, "only GET");
    return 405;
  }
  std::string content_type = "text/plain; charset=utf-8";
  const std::string body = (*static_cast<Handler*>(handler))(&content_type);
  mg_send_http_ok(conn, content_type.c_str(), static_cast<long long>(body.size()));
  if (std::strcmp(info->request_method, "GET") == 0) mg_write(conn, body.data(), body.size());
  return 200;
}

absl::Status HttpServer::Start(const std::string& host, int port) {
  static std::once_flag once;
  std::call_once(once, [] { mg_init_library(0); });
  const std::string ports = absl::StrCat(host, ":", port);
  const char* options[] = {"listening_ports", ports.c_str(), "num_threads", "4", "enable_keep_alive", "yes", nullptr};
  mg_callbacks callbacks{};
  mg_init_data init{&callbacks, this, options};
  char text[256] = {0};
  unsigned code = 0;
  mg_error_data error{&code, text, sizeof(text)};
  ctx_ = mg_start2(&init, &error);
  if (ctx_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", ports, " (", text[0] ? text : "port in use?", ")"));
  }
  // civetweb matches a handler's URI as a prefix; "$" anchors it, so "/" is not every path.
  for (auto& [path, handler] : handlers_) {
    mg_set_request_handler(ctx_, (path + "$").c_str(), &HttpServer::Serve, &handler);
  }
  mg_server_port bound[4];
  const int n = mg_get_server_ports(ctx_, 4, bound);
  port_ = n > 0 ? bound[0].port : port;
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (ctx_ == nullptr) return;
  mg_stop(ctx_);
  ctx_ = nullptr;
}

}  // namespace tfdata::service
