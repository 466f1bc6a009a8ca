// The TLS and auth-token flags shared by the servers (dispatcher, worker) and the clients (worker,
// read, register, bench --dispatcher): --tls-cert, --tls-key, --tls-ca, --auth-token-file.
#pragma once

#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "lib/service/grpc/security.h"

namespace tfdata::cmd {

// Adds the four flags to `sub`, filling `files`, with help worded for `role`. Servers load them
// with service::LoadSecurity (errors name the flag and the file: exit with kExitUsage).
void AddSecurityFlags(CLI::App* sub, service::SecurityFiles* files, service::SecurityRole role);

// For clients: loads the files and makes them the process-wide client security
// (service::SetClientSecurity); call before any client is made. Errors as service::LoadSecurity.
absl::Status ApplyClientSecurityFlags(const service::SecurityFiles& files);

}  // namespace tfdata::cmd
