#include "cmd/common.h"

#include "absl/strings/numbers.h"

#include <csignal>

#include "fmt/format.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {
namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

int Fail(const absl::Status& status, int code) { return Fail(std::string(status.message()), code); }

int Fail(const std::string& message, int code) {
  fmt::print(stderr, "tfdata: error: {}\n", message);
  return code;
}

void InstallSignalHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool StopRequested() { return g_stop.load(std::memory_order_relaxed); }
const std::atomic<bool>* StopFlag() { return &g_stop; }

absl::StatusOr<std::shared_ptr<const PathPolicy>> AllowedPathsFlag(const std::vector<std::string>& dirs,
                                                                   const std::string& who) {
  if (dirs.empty()) {
    spdlog::warn(
        "{}: no --allowed-path given: pipelines may open any file this process can read (give the data "
        "directories with --allowed-path DIR)",
        who);
    return std::shared_ptr<const PathPolicy>();
  }
  auto policy = PathPolicy::Create(dirs, "--allowed-path");
  if (!policy.ok()) return policy.status();
  return std::make_shared<const PathPolicy>(*std::move(policy));
}

BuildOptions LocalBuildOptions() {
  BuildOptions options;
  options.functions.allow_plugins = true;
  return options;
}

}  // namespace tfdata::cmd

#include <unistd.h>

#include <thread>

#include "lib/output/element_writer.h"
#include "lib/output/run_stats.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace tfdata::cmd {

absl::StatusOr<absl::Duration> ParseDurationFlag(const std::string& text, const std::string& flag, bool allow_never) {
  if (allow_never && (text == "-1" || text == "never")) return absl::InfiniteDuration();
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(fmt::format("{}: \"{}\" is not a duration (expected e.g. 500ms, 10s, 5m{})", flag,
                                                  text, allow_never ? ", or -1 for never" : ""));
  }
  return d;
}

absl::StatusOr<int64_t> ParseByteSizeFlag(const std::string& text, const std::string& flag) {
  static const std::pair<const char*, int64_t> kUnits[] = {{"KiB", 1LL << 10},
                                                           {"MiB", 1LL << 20},
                                                           {"GiB", 1LL << 30},
                                                           {"KB", 1000},
                                                           {"MB", 1000000},
                                                           {"GB", 1000000000},
                                                           {"B", 1}};
  std::string number = text;
  int64_t unit = 1;
  for (const auto& [suffix, size] : kUnits) {
    const std::string s = suffix;
    if (number.size() > s.size() && number.compare(number.size() - s.size(), s.size(), s) == 0) {
      number.resize(number.size() - s.size());
      unit = size;
      break;
    }
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(number, &n) || n <= 0 || n > (int64_t{1} << 50) / unit) {
    return absl::InvalidArgumentError(
        fmt::format("{}: \"{}\" is not a size in bytes (expected e.g. 64MiB, 1GiB, 1000000)", flag, text));
  }
  return n * unit;
}

absl::StatusOr<service::TargetWorkers> ParseTargetWorkersFlag(const std::string& text) {
  if (text == "auto") return service::TARGET_WORKERS_AUTO;
  if (text == "any") return service::TARGET_WORKERS_ANY;
  if (text == "local") return service::TARGET_WORKERS_LOCAL;
  return absl::InvalidArgumentError(fmt::format("--target-workers: \"{}\" is not one of any, local, auto", text));
}

void AddLogLevelFlag(CLI::App* sub, std::string* level) {
  sub->add_option("--log-level", *level, "Log level: trace, debug, info, warn, error, off")->capture_default_str();
}

absl::Status ApplyLogLevel(const std::string& level) {
  const auto l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(
        fmt::format("--log-level: \"{}\" is not a level (trace, debug, info, warn, error, off)", level));
  }
  // Logs go to stderr: stdout carries the elements (and the servers' address line).
  if (spdlog::get("tfdata") == nullptr) spdlog::set_default_logger(spdlog::stderr_color_mt("tfdata"));
  spdlog::set_level(l);
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  return absl::OkStatus();
}

void AddOutputFlags(CLI::App* sub, OutputFlags* flags) {
  sub->add_option("--take", flags->take, "Stop after N elements (default: all)");
  sub->add_option("--format", flags->format, "Output: text (one element per line), jsonl, tfrecord, null (count only)")
      ->capture_default_str();
  sub->add_option("--output,-o", flags->output, "Write elements to PATH instead of stdout (required for tfrecord)");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress line and no summary on stderr");
}

int WriteElements(const std::function<absl::StatusOr<bool>(Element*)>& next, const OutputFlags& f,
                  const std::function<std::string()>& summary_suffix,
                  const std::function<absl::Status(int64_t)>& checkpoint, int64_t checkpoint_every) {
  auto format = ParseOutputFormat(f.format);
  if (!format.ok()) return Fail(format.status(), kExitUsage);
  auto writer = MakeElementWriter(*format, f.output);
  if (!writer.ok()) return Fail(writer.status(), kExitUsage);
  // Progress only when a person watches stderr and the elements do not go to the same terminal.
  const bool progress = !f.quiet && isatty(STDERR_FILENO) && (!f.output.empty() || !isatty(STDOUT_FILENO));
  RunStats stats(progress);
  Element e;
  int code = kExitOk;
  bool write_failed = false;  // then what was written is behind what was handed out: no checkpoint
  while (f.take < 0 || stats.elements() < f.take) {
    if (StopRequested()) {
      code = kExitInterrupted;
      break;
    }
    auto more = next(&e);
    if (!more.ok()) {
      code = Fail(more.status(), kExitRuntimeError);
      break;
    }
    if (!*more) break;
    if (auto st = (*writer)->Write(e); !st.ok()) {
      code = Fail(st, kExitRuntimeError);
      write_failed = true;
      break;
    }
    stats.Add(e);
    if (checkpoint && checkpoint_every > 0 && stats.elements() % checkpoint_every == 0) {
      absl::Status st = (*writer)->Flush();
      if (st.ok()) st = checkpoint(stats.elements());
      if (!st.ok()) {
        code = Fail(st, kExitRuntimeError);
        write_failed = true;
        break;
      }
    }
  }
  if (checkpoint && !write_failed) {
    // Also after an interruption or a read error: what was written is what was handed out.
    absl::Status st = (*writer)->Flush();
    if (st.ok()) st = checkpoint(stats.elements());
    if (!st.ok()) code = Fail(st, kExitRuntimeError);
  }
  if (auto st = (*writer)->Close(); !st.ok() && code == kExitOk) code = Fail(st, kExitRuntimeError);
  if (!f.quiet) {
    fmt::print(stderr, "{}{}{}\n", stats.Finish(), summary_suffix ? summary_suffix() : "",
               code == kExitInterrupted ? " (interrupted)" : "");
  }
  return code;
}

void WaitForStopSignal(const std::function<bool()>& done) {
  while (!StopRequested() && !(done && done())) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

}  // namespace tfdata::cmd

#include <cstdio>
#include <fstream>

#include "lib/service/client/read_loss.h"
#include "lib/service/client/register_dataset.h"

namespace tfdata::cmd {

absl::Status WritePortFile(const std::string& path, int port) {
  if (path.empty()) return absl::OkStatus();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << port << "\n";
    if (!out.flush()) return absl::UnavailableError(fmt::format("--port-file: cannot write {}", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(fmt::format("--port-file: cannot write {}", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegisterPipelineFile(const std::string& path, const std::string& dataset_id,
                                                 service::DispatcherClient& dispatcher,
                                                 service::Compression compression) {
  auto loaded = LoadPipelineFile(path);
  if (!loaded.ok()) return loaded.status();
  return service::RegisterPipeline(loaded->pipeline, loaded->source(), LocalBuildOptions(), dataset_id, compression,
                                   dispatcher);
}

int FailRegistration(const absl::Status& status) {
  const bool file_problem = absl::IsInvalidArgument(status) || absl::IsNotFound(status);
  return Fail(status, file_problem ? kExitBadPipeline : kExitRuntimeError);
}

std::string DroppedSummary(const service::Reader& reader) {
  const std::string loss = service::DescribeReadLoss(reader);
  return loss.empty() ? "" : fmt::format(" ({})", loss);
}

int ReadExitCode(int code, const service::Reader& reader) {
  if (code != kExitOk || service::DescribeReadLoss(reader).empty()) return code;
  fmt::print(stderr, "tfdata: warning: the read lost data:{}; exit code {}\n", DroppedSummary(reader),
             static_cast<int>(kExitPartialLoss));
  return kExitPartialLoss;
}

absl::StatusOr<service::ProcessingMode> ParseModeFlag(const std::string& name) {
  if (name == "parallel_epochs" || name == "off") return service::PARALLEL_EPOCHS;
  if (name == "distributed_epoch" || name == "dynamic") return service::DISTRIBUTED_EPOCH;
  if (name == "file") return service::SHARD_FILE;
  if (name == "data") return service::SHARD_DATA;
  if (name == "file_or_data") return service::SHARD_FILE_OR_DATA;
  if (name == "hint") return service::SHARD_HINT;
  return absl::InvalidArgumentError(fmt::format(
      "--mode: unknown processing mode \"{}\" (available: parallel_epochs, alias off; distributed_epoch, alias "
      "dynamic; static sharding: file, data, file_or_data, hint)",
      name));
}

}  // namespace tfdata::cmd
