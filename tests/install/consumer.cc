// A C++ trainer built against an installed tfdata (find_package(tfdata)): it starts a dispatcher
// and a worker on loopback, registers range(10) and reads it over gRPC. Prints the elements, one
// per line; tests/install/test.sh checks them.
#include <cstdio>
#include <memory>

#include "lib/pipeline/loader.h"
#include "lib/service/client/reader.h"
#include "lib/service/client/register_dataset.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "lib/service/grpc/server.h"

namespace svc = tfdata::service;

static int Fail(const absl::Status& status) {
  std::fprintf(stderr, "consumer: %s\n", std::string(status.message()).c_str());
  return 1;
}

int main() {
  svc::DispatcherServer dispatcher(svc::DispatcherConfig{});
  if (auto st = dispatcher.Start("127.0.0.1", 0); !st.ok()) return Fail(st);
  const std::string address = "127.0.0.1:" + std::to_string(dispatcher.port());
  svc::WorkerServerOptions worker_options;
  worker_options.dispatcher_address = address;
  worker_options.host = "127.0.0.1";
  worker_options.worker_address = "127.0.0.1:%port%";
  svc::WorkerServer worker(worker_options);
  if (auto st = worker.Start(); !st.ok()) return Fail(st);

  auto loaded = tfdata::ParsePipelineText("op { range { stop: 10 } }");
  if (!loaded.ok()) return Fail(loaded.status());
  svc::GrpcDispatcherClient client(address);
  auto id = svc::RegisterPipeline(loaded->pipeline, loaded->source(), tfdata::BuildOptions{}, "", svc::COMPRESSION_NONE,
                                  client);
  if (!id.ok()) return Fail(id.status());

  svc::ReaderOptions options;
  options.dataset_id = *id;
  options.protocol = "grpc";
  auto reader = svc::Reader::Create(options, std::make_unique<svc::GrpcDispatcherClient>(address));
  if (!reader.ok()) return Fail(reader.status());
  tfdata::Element element;
  for (;;) {
    auto more = (*reader)->Next(&element);
    if (!more.ok()) return Fail(more.status());
    if (!*more) break;
    std::printf("%lld\n", static_cast<long long>(element.at(0).values<int64_t>()[0]));
  }
  (*reader)->Close();
  return 0;
}
