// `tfdata register PIPELINE --dispatcher ADDR`: register a pipeline, print its dataset id.
#include "cmd/common.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/service/common/address.h"
#include "lib/service/common/wire_compression.h"
#include "lib/service/grpc/grpc_dispatcher.h"

namespace tfdata::cmd {
namespace {

struct RegisterFlags {
  std::string pipeline;
  std::string dispatcher;
  std::string dataset_id;
  std::string compression = "none";
  service::SecurityFiles security;
};

int RunRegister(const RegisterFlags& f) {
  auto dispatcher = service::ParseAddress(f.dispatcher, "--dispatcher");
  if (!dispatcher.ok()) return Fail(dispatcher.status(), kExitUsage);
  auto compression = service::ParseCompression(f.compression);
  if (!compression.ok()) return Fail(compression.status(), kExitUsage);
  if (auto st = ApplyClientSecurityFlags(f.security); !st.ok()) return Fail(st, kExitUsage);
  service::GrpcDispatcherClient client(*dispatcher);
  auto id = RegisterPipelineFile(f.pipeline, f.dataset_id, client, *compression);
  if (!id.ok()) return FailRegistration(id.status());
  fmt::print("{}\n", *id);
  return kExitOk;
}

}  // namespace

void AddRegisterCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<RegisterFlags>();
  CLI::App* sub = app.add_subcommand("register", "Register a pipeline with the dispatcher and print its dataset id");
  sub->add_option("PIPELINE", f->pipeline, "Pipeline file")->required();
  sub->add_option("--dispatcher", f->dispatcher, "Dispatcher address (HOST:PORT or grpc://HOST:PORT)")->required();
  sub->add_option("--dataset-id", f->dataset_id, "Choose the dataset id (default: assigned)");
  sub->add_option("--compression", f->compression,
                  "How workers send the elements: none, snappy (compressed, but responses snappy cannot shrink by 1/8 "
                  "travel plain), auto (compressed when the worker "
                  "measures that it makes the transfer faster; never to readers on its host)")
      ->capture_default_str();
  AddSecurityFlags(sub, &f->security, service::SecurityRole::kClient);
  sub->callback([f, action] { *action = [f] { return RunRegister(*f); }; });
}

}  // namespace tfdata::cmd
