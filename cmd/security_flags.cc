#include "cmd/security_flags.h"

namespace tfdata::cmd {

void AddSecurityFlags(CLI::App* sub, service::SecurityFiles* files, service::SecurityRole role) {
  using service::SecurityRole;
  service::SecurityFiles& f = *files;
  switch (role) {
    case SecurityRole::kServer:
      sub->add_option("--tls-cert", f.tls_cert,
                      "PEM certificate this server presents: every RPC over TLS (with --tls-key)");
      sub->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
      sub->add_option("--tls-ca", f.tls_ca,
                      "PEM CA certificate(s): require clients to present a certificate signed by them (mutual TLS)");
      sub->add_option("--auth-token-file", f.auth_token_file,
                      "File holding a shared token: calls that do not carry it are refused (UNAUTHENTICATED)");
      break;
    case SecurityRole::kServerAndClient:
      sub->add_option("--tls-cert", f.tls_cert,
                      "PEM certificate this worker presents, to readers (every RPC over TLS) and to the dispatcher "
                      "(with --tls-key)");
      sub->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
      sub->add_option("--tls-ca", f.tls_ca,
                      "PEM CA certificate(s): the dispatcher's certificate must be signed by them, and so must the "
                      "certificates readers present (mutual TLS)");
      sub->add_option(
          "--auth-token-file", f.auth_token_file,
          "File holding a shared token: sent to the dispatcher, and calls that do not carry it are refused");
      break;
    case SecurityRole::kClient:
      sub->add_option("--tls-ca", f.tls_ca,
                      "PEM CA certificate(s) the dispatcher's and workers' certificates are verified against: connect "
                      "over TLS");
      sub->add_option("--tls-cert", f.tls_cert,
                      "PEM client certificate to present, for servers that require one (mutual TLS; with --tls-key)");
      sub->add_option("--tls-key", f.tls_key, "PEM private key of --tls-cert");
      sub->add_option("--auth-token-file", f.auth_token_file,
                      "File holding the shared token the servers were started with, sent on every call");
      break;
  }
}

absl::Status ApplyClientSecurityFlags(const service::SecurityFiles& files) {
  auto security = service::LoadSecurity(files, service::SecurityRole::kClient);
  if (!security.ok()) return security.status();
  service::SetClientSecurity(*std::move(security));
  return absl::OkStatus();
}

}  // namespace tfdata::cmd
