// `tfdata read`: read a registered dataset (or a pipeline file, registering it) through the service.
#include "cmd/common.h"
#include "cmd/security_flags.h"
#include "cmd/subcommands.h"
#include "fmt/format.h"
#include "lib/core/status_macros.h"
#include "lib/output/element_writer.h"
#include "lib/pipeline/sharding.h"
#include "lib/service/client/coordinated_reader.h"
#include "lib/service/client/read_state.h"
#include "lib/service/client/reader.h"
#include "lib/service/common/address.h"
#include "lib/service/common/wire_compression.h"
#include "lib/service/grpc/grpc_dispatcher.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {
namespace {

struct ReadFlags {
  std::string dispatcher;
  std::string dataset_id;
  std::string pipeline;
  std::string mode = "parallel_epochs";
  std::string job_name;
  int max_outstanding_requests = 4;
  int num_consumers = 0;
  int consumer_index = 0;
  bool cross_trainer_cache = false;
  bool exactly_once = false;
  std::string save_state;
  int64_t save_state_every = 1000;
  std::vector<std::string> resume;
  bool deterministic = false;
  std::string trainer_id;
  std::string target_workers = "auto";
  std::string worker_tag;
  std::string compression = "none";
  std::string transfer = "auto";
  OutputFlags output;
  std::string log_level = "warn";
  service::SecurityFiles security;
};

int RunRead(const ReadFlags& f) {
  if (auto st = ApplyLogLevel(f.log_level); !st.ok()) return Fail(st, kExitUsage);
  auto address = service::ParseAddress(f.dispatcher, "--dispatcher");
  if (!address.ok()) return Fail(address.status(), kExitUsage);
  auto mode = ParseModeFlag(f.mode);
  if (!mode.ok()) return Fail(mode.status(), kExitUsage);
  if (f.dataset_id.empty() == f.pipeline.empty())
    return Fail("give either --dataset-id or a PIPELINE file", kExitUsage);
  if (f.max_outstanding_requests < 1) return Fail("--max-outstanding-requests must be at least 1", kExitUsage);
  if (auto format = ParseOutputFormat(f.output.format); !format.ok()) return Fail(format.status(), kExitUsage);
  auto target = ParseTargetWorkersFlag(f.target_workers);
  if (!target.ok()) return Fail(target.status(), kExitUsage);
  auto compression = service::ParseCompression(f.compression);
  if (!compression.ok()) return Fail(compression.status(), kExitUsage);
  if (f.num_consumers < 0) return Fail("--num-consumers must be at least 0", kExitUsage);
  if (f.num_consumers > 0 && (f.consumer_index < 0 || f.consumer_index >= f.num_consumers)) {
    return Fail(
        fmt::format("--consumer-index {} is outside [0, --num-consumers {})", f.consumer_index, f.num_consumers),
        kExitUsage);
  }
  if (f.num_consumers == 0 && f.consumer_index != 0) return Fail("--consumer-index needs --num-consumers", kExitUsage);
  if (f.num_consumers > 0 && f.job_name.empty()) {
    return Fail("coordinated reads (--num-consumers) need a --job-name shared by the consumers", kExitUsage);
  }
  if (f.cross_trainer_cache && (f.job_name.empty() || f.trainer_id.empty())) {
    return Fail("--cross-trainer-cache needs a --job-name shared by the trainers and a --trainer-id for this one",
                kExitUsage);
  }
  if (!f.cross_trainer_cache && !f.trainer_id.empty())
    return Fail("--trainer-id needs --cross-trainer-cache", kExitUsage);
  // Read states are of exactly-once reads: asking for one asks for those.
  const bool stateful = !f.save_state.empty() || !f.resume.empty();
  if (stateful && *mode != service::DISTRIBUTED_EPOCH && !IsStaticSharding(*mode)) {
    return Fail(
        "--save-state and --resume need --mode distributed_epoch or static sharding: a parallel_epochs read has no "
        "position a new job could resume from (docs/guarantees.md: resumable reads)",
        kExitUsage);
  }
  if (f.deterministic && *mode != service::DISTRIBUTED_EPOCH) {
    return Fail("--deterministic needs --mode distributed_epoch", kExitUsage);
  }
  // In distributed_epoch, read states and order are those of exactly-once reads.
  const bool exactly_once = f.exactly_once || f.deterministic || (stateful && *mode == service::DISTRIBUTED_EPOCH);
  if (f.deterministic && !f.job_name.empty()) {
    return Fail("--deterministic needs a reader alone in its job: drop --job-name", kExitUsage);
  }
  if (f.save_state_every < 1) return Fail("--save-state-every must be at least 1", kExitUsage);
  if (f.exactly_once && *mode != service::DISTRIBUTED_EPOCH)
    return Fail("--exactly-once needs --mode distributed_epoch", kExitUsage);
  if (exactly_once && f.num_consumers > 0)
    return Fail("--exactly-once and coordinated reads (--num-consumers) cannot be combined", kExitUsage);
  // The dispatcher client and the data plane's clients (made by the reader) use it.
  if (auto st = ApplyClientSecurityFlags(f.security); !st.ok()) return Fail(st, kExitUsage);

  std::string dataset_id = f.dataset_id;
  if (!f.pipeline.empty()) {
    service::GrpcDispatcherClient client(*address);
    auto id = RegisterPipelineFile(f.pipeline, "", client, *compression);
    if (!id.ok()) return FailRegistration(id.status());
    dataset_id = *id;
  }
  if (f.num_consumers > 0) {
    if (*mode != service::PARALLEL_EPOCHS && *mode != service::DISTRIBUTED_EPOCH) {
      return Fail(
          "coordinated reads need --mode parallel_epochs or distributed_epoch (static sharding pins each "
          "reader to its local worker)",
          kExitUsage);
    }
    service::CoordinatedReadOptions options;
    options.dataset_id = dataset_id;
    options.job_name = f.job_name;
    options.num_consumers = f.num_consumers;
    options.consumer_index = f.consumer_index;
    options.mode = *mode;
    options.max_outstanding_rounds = f.max_outstanding_requests;
    options.protocol = f.transfer;
    auto reader =
        service::CoordinatedReader::Create(options, std::make_unique<service::GrpcDispatcherClient>(*address));
    if (!reader.ok()) return Fail(reader.status(), kExitRuntimeError);
    const int code = WriteElements(
        [&](Element* e) { return (*reader)->Next(e); }, f.output,
        [&] {
          const int64_t n = (*reader)->rounds_substituted();
          return n == 0 ? std::string() : fmt::format(" ({} round(s) served by another worker: theirs was lost)", n);
        });
    (*reader)->Close();
    return code;
  }

  service::ReaderOptions options;
  options.dataset_id = dataset_id;
  options.target_workers = *target;
  options.worker_tag = f.worker_tag;
  options.cross_trainer_cache = f.cross_trainer_cache;
  options.trainer_id = f.trainer_id;
  options.mode = *mode;
  options.job_name = f.job_name;
  options.max_outstanding_requests = f.max_outstanding_requests;
  options.exactly_once = exactly_once;
  options.deterministic = f.deterministic;
  options.protocol = f.transfer;
  for (const std::string& path : f.resume) {
    auto state = service::ReadReadStateFile(path);
    if (!state.ok()) return Fail(state.status(), kExitRuntimeError);
    options.resume.push_back(*std::move(state));
  }
  auto reader = service::Reader::Create(options, std::make_unique<service::GrpcDispatcherClient>(*address));
  if (!reader.ok()) return Fail(reader.status(), kExitRuntimeError);
  std::function<absl::Status(int64_t)> save;
  if (!f.save_state.empty()) {
    save = [&](int64_t) -> absl::Status {
      TFD_ASSIGN_OR_RETURN(const service::ReadState state, (*reader)->SaveState());
      return service::WriteReadStateFile(f.save_state, state);
    };
    // A state from the start: a trainer killed before the first save resumes from nothing read.
    if (auto st = save(0); !st.ok()) return Fail(st, kExitRuntimeError);
  }
  if (!(*reader)->warning().empty()) fmt::print(stderr, "tfdata: warning: {}\n", (*reader)->warning());
  const int code = WriteElements(
      [&](Element* e) { return (*reader)->Next(e); }, f.output,
      [&] {
        const int64_t skipped = (*reader)->elements_skipped();
        const int64_t redone = (*reader)->exactly_once() ? (*reader)->tasks_dropped() : 0;
        return DroppedSummary(**reader) +
               (redone == 0 ? std::string()
                            : fmt::format(" ({} task(s) lost with their workers; their splits were produced again "
                                          "elsewhere, {} duplicate(s) dropped)",
                                          redone, (*reader)->duplicates_dropped())) +
               (skipped == 0 ? std::string()
                             : fmt::format(" ({} element(s) skipped: this trainer fell behind the cross-trainer cache "
                                           "window)",
                                           skipped)) +
               (f.deterministic ? fmt::format(" (in order: at most {:.1f} MiB held for ordering)",
                                              static_cast<double>((*reader)->max_reorder_bytes()) / (1 << 20))
                                : std::string());
      },
      save, f.save_state_every);
  (*reader)->Close();
  return ReadExitCode(code, **reader);
}

}  // namespace

void AddReadCommand(CLI::App& app, std::function<int()>* action) {
  auto f = std::make_shared<ReadFlags>();
  CLI::App* sub = app.add_subcommand("read", "Read a dataset through the service and write its elements");
  sub->add_option("PIPELINE", f->pipeline, "Pipeline file to register and read (instead of --dataset-id)");
  sub->add_option("--dispatcher", f->dispatcher, "Dispatcher address (HOST:PORT or grpc://HOST:PORT)")->required();
  sub->add_option("--dataset-id", f->dataset_id, "A registered dataset's id");
  sub->add_option("--mode", f->mode,
                  "Processing mode: parallel_epochs (alias off: every worker runs the whole pipeline) or "
                  "distributed_epoch (alias dynamic: the source is split among the workers, each element once), or a "
                  "static sharding policy: file, data, file_or_data, hint (needs dispatcher --worker-addresses)")
      ->capture_default_str();
  sub->add_option("--job-name", f->job_name, "Share the job with other readers of this name");
  sub->add_option("--max-outstanding-requests", f->max_outstanding_requests,
                  "Element requests in flight, at most (coordinated reads: rounds fetched ahead)")
      ->capture_default_str();
  sub->add_option("--num-consumers", f->num_consumers,
                  "Coordinated reads: the job is read in rounds by this many consumers (needs --job-name and an "
                  "infinite pipeline); every round's elements come from one worker");
  sub->add_option("--consumer-index", f->consumer_index, "Coordinated reads: this consumer's index in [0, n)");
  sub->add_flag("--cross-trainer-cache", f->cross_trainer_cache,
                "Share the job's elements with other trainers (needs --job-name and --trainer-id): each trainer reads "
                "the whole stream from the workers' sliding windows");
  sub->add_option("--trainer-id", f->trainer_id, "Cross-trainer cache: this trainer's name");
  sub->add_flag("--exactly-once", f->exactly_once,
                "distributed_epoch: every element once even when workers die (their splits are produced again "
                "elsewhere); each split goes through the pipeline on its own, so shuffles need a seed");
  sub->add_option(
      "--save-state", f->save_state,
      "Write the read state (where this read stands, to resume from) to this file atomically every "
      "--save-state-every elements and at exit (distributed_epoch, where it implies --exactly-once, or static "
      "sharding)");
  sub->add_option("--save-state-every", f->save_state_every, "Elements between two saves of --save-state")
      ->capture_default_str();
  sub->add_option("--resume", f->resume,
                  "Start where this read state file left off (repeat it with the states of every reader of a "
                  "shared job, under a new --job-name); distributed_epoch (implies --exactly-once) or static sharding");
  sub->add_flag("--deterministic", f->deterministic,
                "distributed_epoch: the same elements in the same order on every run, whatever the workers' number, "
                "speed or deaths (splits in the job's order, put in order here); implies --exactly-once");
  sub->add_option("--target-workers", f->target_workers,
                  "Which workers to read from: any; local (in this process or on this host); auto (local when this "
                  "process runs a worker, else any)")
      ->capture_default_str();
  sub->add_option("--worker-tag", f->worker_tag, "Read only from workers started with this --tag");
  sub->add_option("--transfer", f->transfer,
                  "Data plane: auto (shared memory to workers on this host, else gRPC), grpc, or shm (this host's "
                  "workers only)")
      ->check(CLI::IsMember({"auto", "grpc", "shm"}))
      ->capture_default_str();
  sub->add_option("--compression", f->compression,
                  "When registering PIPELINE: none, snappy or auto (see tfdata register)")
      ->capture_default_str();
  AddOutputFlags(sub, &f->output);
  AddSecurityFlags(sub, &f->security, service::SecurityRole::kClient);
  AddLogLevelFlag(sub, &f->log_level);
  sub->callback([f, action] { *action = [f] { return RunRead(*f); }; });
}

}  // namespace tfdata::cmd
