#include "lib/service/grpc/grpc_util.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tfdata::service {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return absl::OkStatus();
  auto code = static_cast<absl::StatusCode>(status.error_code());
  // We never cancel our own calls, so CANCELLED means the server went away mid-call (shutdown).
  if (code == absl::StatusCode::kCancelled) code = absl::StatusCode::kUnavailable;
  const bool transport = code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded;
  if (transport && !what.empty()) {
    return absl::Status(
        code, absl::StrCat(std::string(what), ": ",
                           code == absl::StatusCode::kDeadlineExceeded ? "no answer in time" : "unreachable", " (",
                           status.error_message(), ")"));
  }
  if (code == absl::StatusCode::kUnauthenticated && !what.empty()) {
    return absl::Status(code, absl::StrCat(std::string(what), ": ", status.error_message()));
  }
  return absl::Status(code, status.error_message());
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Security* security) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Reconnect quickly after a server restarts instead of gRPC's default backoff of up to 2 min.
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the minimum connect timeout, and
  // at 100 ms a busy worker's connection attempt timed out and readers gave its task up (the load
  // test, bench/load.sh). Calls stay bounded by their own deadlines.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  return grpc::CreateCustomChannel(address, MakeChannelCredentials(security), args);
}

void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
}

}  // namespace tfdata::service
