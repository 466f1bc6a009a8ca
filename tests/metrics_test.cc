// lib/service/metrics: the text a scrape gets from a live in-process cluster's cores, and the HTTP
// endpoint (a real socket on loopback: status line, content type, 404, a taken port).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include "lib/service/common/latency_histogram.h"
#include "lib/service/metrics/http_server.h"
#include "lib/service/metrics/metrics.h"
#include "tests/test_cluster.h"

using namespace tfdata;
using namespace tfdata::service;

namespace {

// GET `path` from 127.0.0.1:`port`: the whole response (HTTP/1.0, so the server closes).
std::string Get(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  REQUIRE(write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size()));
  std::string response;
  char buf[4096];
  for (int i = 0; i < 10000; ++i) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

}  // namespace

TEST_CASE("metrics: a dispatcher's and a worker's counts after a read", "[metrics][cluster]") {
  testing::TestCluster cluster(1);
  const std::string id = cluster.Register("op { range { stop: 10 } }");
  auto reader = cluster.NewReader(id);
  REQUIRE(reader.ok());
  int n = 0;
  for (; n < 100; ++n) {
    Element e;
    auto more = (*reader)->Next(&e);
    REQUIRE(more.ok());
    if (!*more) break;
  }
  CHECK(n == 10);
  auto dispatcher = Metrics::ForDispatcher(&cluster.dispatcher());
  dispatcher->RecordRpc("GetDataset", 5);
  const std::string d = dispatcher->Render();
  CHECK(d.find("tfdata_dispatcher_workers{state=\"alive\"} 1\n") != std::string::npos);
  CHECK(d.find("tfdata_dispatcher_datasets 1\n") != std::string::npos);
  CHECK(d.find("tfdata_dispatcher_jobs{mode=\"parallel_epochs\"} 1\n") != std::string::npos);
  CHECK(d.find("tfdata_dispatcher_rpcs_total{code=\"NOT_FOUND\",method=\"GetDataset\"} 1\n") != std::string::npos);
  CHECK(d.find("# TYPE tfdata_dispatcher_workers_removed_total counter") != std::string::npos);
  const std::string w = Metrics::ForWorker(cluster.worker(0).worker())->Render();
  CHECK(w.find("tfdata_worker_tasks 1\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_elements_served_total{dataset=\"" + id + "\"} 10\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_served_bytes_total{dataset=\"" + id + "\"} 80\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_elements_produced_total{dataset=\"" + id + "\"} 10\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_produced_bytes_total{dataset=\"" + id + "\"} 80\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_buffered_elements{dataset=\"" + id + "\"} 0\n") != std::string::npos);
  CHECK(w.find("tfdata_worker_produce_seconds_total{dataset=\"" + id + "\"} ") != std::string::npos);
  CHECK(CodeName(0) == "OK");
  CHECK(CodeName(14) == "UNAVAILABLE");
}

TEST_CASE("metrics: a worker's buffers, time per element and compression, by dataset", "[metrics][cluster]") {
  // Small buffers on both sides, so that production stops soon and the counts hold still.
  testing::TestCluster cluster(0);
  WorkerConfig config;
  config.buffer_elements = 16;
  cluster.set_worker_config(config);
  cluster.AddWorker();
  // 1 ms an element: the time per element must show it. Snappy: every response asks for it.
  const std::string id = cluster.Register(
      "op { range { stop: 100000 } } op { map { fn { sleep { micros: 1000 } } } } op { batch { batch_size: 4 } }", "",
      COMPRESSION_SNAPPY);
  ReaderOptions options;
  options.dataset_id = id;
  options.buffer_elements = 8;
  options.max_elements_per_request = 4;
  auto reader = cluster.NewReader(options);
  REQUIRE(reader.ok());
  for (int i = 0; i < 20; ++i) {
    Element e;
    auto more = (*reader)->Next(&e);
    REQUIRE(more.ok());
    REQUIRE(*more);
  }
  Worker* worker = cluster.worker(0).worker();
  // The reader's buffer fills, then the task's: elements wait there, produced and not served.
  // Until the producer stops on the full buffer the counts move (and are read one after another).
  WorkerCounts c, previous;
  for (int i = 0; i < 500; ++i) {
    c = worker->Counts();
    const WorkerCounts::Dataset& now = c.datasets[id];
    const WorkerCounts::Dataset& before = previous.datasets[id];
    if (now.buffered_elements > 0 && now.elements_produced == before.elements_produced &&
        now.buffered_elements == before.buffered_elements) {
      break;
    }
    previous = c;
    absl::SleepFor(absl::Milliseconds(50));
  }
  const WorkerCounts::Dataset& d = c.datasets[id];
  CHECK(d.tasks == 1);
  CHECK(d.buffered_elements > 0);
  CHECK(d.buffered_bytes == 32 * d.buffered_elements);  // 4 int64 scalars a batch
  CHECK(d.buffered_elements <= 16);
  CHECK(d.elements_produced == d.elements_served + d.buffered_elements);
  CHECK(d.bytes_produced == 32 * d.elements_produced);
  CHECK(d.elements_served >= 20);
  // Four 1 ms sleeps a batch: at least 4 ms an element, and not wildly more.
  const double per_element = d.produce_seconds / static_cast<double>(d.elements_produced);
  CHECK(per_element >= 0.004);
  CHECK(per_element < 0.1);
  CHECK(c.responses_compressed_total + c.responses_left_plain_total >= 1);
  CHECK(c.compression_input_bytes_total > 0);
  CHECK(c.compression_output_bytes_total > 0);
  const std::string w = Metrics::ForWorker(worker)->Render();
  CHECK(w.find("tfdata_worker_buffered_elements{dataset=\"" + id + "\"} ") != std::string::npos);
  CHECK(w.find("tfdata_worker_compression_input_bytes_total ") != std::string::npos);
  CHECK(w.find("tfdata_worker_compression_responses_total{outcome=\"compressed\"} ") != std::string::npos);
  CHECK(w.find("tfdata_worker_auto_compression_tasks{decision=\"compress\"} 0\n") != std::string::npos);
}

TEST_CASE("metrics: the HTTP endpoint answers GET, 404 elsewhere, and a taken port is an error", "[metrics]") {
  HttpServer server;
  server.Handle("/metrics", [](std::string* content_type) {
    *content_type = "text/plain; version=0.0.4";
    return std::string("x 1\n");
  });
  REQUIRE(server.Start("127.0.0.1", 0).ok());
  REQUIRE(server.port() > 0);
  const std::string ok = Get(server.port(), "/metrics");
  CHECK(ok.rfind("HTTP/1.", 0) == 0);
  CHECK(ok.find(" 200 OK\r\n") != std::string::npos);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.size() >= 4);
  CHECK(ok.substr(ok.size() - 4) == "x 1\n");
  CHECK(Get(server.port(), "/other").find(" 404 ") != std::string::npos);
  CHECK(Get(server.port(), "/metrics/more").find(" 404 ") != std::string::npos);
  HttpServer second;
  const absl::Status taken = second.Start("127.0.0.1", server.port());
  CHECK(absl::IsUnavailable(taken));
  CHECK(taken.message().find("cannot listen on 127.0.0.1:" + std::to_string(server.port())) != std::string::npos);
}

TEST_CASE("metrics: a latency histogram counts into cumulative buckets", "[metrics]") {
  LatencyHistogram h;
  h.Record(absl::Microseconds(30));  // <= 50 µs
  h.Record(absl::Microseconds(50));  // <= 50 µs (bounds are inclusive)
  h.Record(absl::Milliseconds(3));   // <= 5 ms
  h.Record(absl::Seconds(20));       // +Inf only
  const LatencyHistogram::Snapshot s = h.Get();
  REQUIRE(s.cumulative.size() == LatencyHistogram::kBounds.size());
  CHECK(s.cumulative[0] == 2);
  CHECK(s.cumulative[5] == 2);      // 2.5 ms
  CHECK(s.cumulative[6] == 3);      // 5 ms
  CHECK(s.cumulative.back() == 3);  // 10 s
  CHECK(s.count == 4);
  CHECK(s.sum_seconds == Approx(20.00308));
}
