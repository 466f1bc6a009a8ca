// The HTTP endpoint of `--metrics-port` (civetweb, from Debian): GET of a registered path answers
// with what its handler renders. Serves plain HTTP on the given interface; no files, no CGI.
//
// Start binds (port 0: any free port) and serves on its own threads until Stop (also the
// destructor). Handlers are called from those threads, concurrently: they must be thread-safe and
// outlive the server. Not thread-safe itself: one owner starts and stops.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"

struct mg_context;
struct mg_connection;

namespace tfdata::service {

class HttpServer {
 public:
  // Renders a response body; `content_type` is set alongside it.
  using Handler = std::function<std::string(std::string* content_type)>;

  HttpServer() = default;
  ~HttpServer() { Stop(); }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Before Start: GET `path` (exactly) calls `handler`.
  void Handle(const std::string& path, Handler handler) { handlers_[path] = std::move(handler); }
  // Listens on host:port; an error names the address (a port in use, a host not of this machine).
  absl::Status Start(const std::string& host, int port);
  void Stop();
  int port() const { return port_; }

 private:
  static int Serve(mg_connection* conn, void* handler);

  std::map<std::string, Handler> handlers_;
  mg_context* ctx_ = nullptr;
  int port_ = 0;
};

}  // namespace tfdata::service
