// Conversions at the gRPC edge: statuses and channels (addresses: common/address.h). Stateless
// and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "lib/service/grpc/security.h"

namespace tfdata::service {

grpc::Status ToGrpcStatus(const absl::Status& status);
// `what` names the call and its peer, e.g. "dispatcher localhost:5000: GetOrCreateJob"; it
// prefixes the message of a transport error (unreachable peer, deadline) or of a refused token,
// so the user sees which server could not be reached or refused the call.
absl::Status FromGrpcStatus(const grpc::Status& status, std::string_view what = {});

// A channel to `address` ("host:port"), plaintext or TLS as `security` says (security.h; null:
// plaintext), with reconnect settings suitable for detecting dead peers.
// Channel arguments for large HTTP/2 frames and windows were measured and made no difference on
// loopback (docs/performance.md), so data and control channels are made the same way.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address, const Security* security);

// Sets a deadline `timeout` from now on `ctx`.
void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout);

}  // namespace tfdata::service
