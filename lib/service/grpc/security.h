// Closing the service to strangers at the gRPC edge: TLS (optionally mutual) on every channel and
// server, and an optional shared token that clients send on every call and servers check.
//
// Material is loaded once from files (LoadSecurity) into an immutable Security, shared by const
// pointer; a null pointer means plaintext and no token. Servers take theirs explicitly
// (server.h). Clients take theirs explicitly too, except the data plane's "grpc" transport, which
// the registry creates from an address alone: it, and GrpcDispatcherClient when given none, use
// the process-wide client security (SetClientSecurity).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace tfdata::service {

// The files as the user named them; empty: not given.
struct SecurityFiles {
  std::string tls_cert;         // PEM certificate (chain) this process presents
  std::string tls_key;          // PEM private key of tls_cert
  std::string tls_ca;           // PEM CA certificates that peers' certificates must chain to
  std::string auth_token_file;  // the shared token (surrounding whitespace is ignored)
  // How errors name the settings: CLI flags ("--tls-cert FILE") or Python arguments ("tls_cert").
  bool python_names = false;
};

// Loaded material. Immutable; thread-safe to share.
struct Security {
  std::string cert_pem;  // empty: no certificate (client: no client certificate)
  std::string key_pem;
  std::string ca_pem;  // server: require and verify client certificates (mutual TLS); client: the
                       // CA servers are verified against (empty with TLS on: the system's roots)
  std::string token;   // empty: no token
  // Clients: TLS when any of cert/ca is given. Servers: TLS when cert is given.
  bool client_tls() const { return !cert_pem.empty() || !ca_pem.empty(); }
  bool server_tls() const { return !cert_pem.empty(); }
};

// What the process does with the material: the checks differ (a server needs a certificate for
// TLS; a worker is both and uses the same files for both roles).
enum class SecurityRole { kServer, kClient, kServerAndClient };

// Reads and checks the files: each readable, PEM of the right kind, the key matching the
// certificate, cert and key given together, a server's CA only with its certificate, a token of
// printable ASCII. Errors (InvalidArgument) name the setting and the file. Returns null when
// nothing is given.
absl::StatusOr<std::shared_ptr<const Security>> LoadSecurity(const SecurityFiles& files, SecurityRole role);

// For logs: "" (null or nothing), else e.g. " (mutual TLS, auth token)" as a server sees it.
std::string DescribeServerSecurity(const Security* security);

// The credentials a server listens with: insecure for null or no certificate; with a CA, client
// certificates are required and verified.
std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const Security* security);
// The credentials a channel connects with: insecure unless client_tls().
std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const Security* security);

// Client side: adds "authorization: Bearer <token>" to `ctx` when `security` has a token.
void AddAuthToken(grpc::ClientContext* ctx, const Security* security);
// Server side: OK when `security` has no token or the call carries it (compared in constant
// time); UNAUTHENTICATED "missing or wrong auth token" otherwise. Thread-safe.
grpc::Status CheckAuthToken(const grpc::ServerContext& ctx, const Security* security);

// A failed call's status, with a hint when it looks like a TLS mismatch: a plaintext client whose
// connection the server closed (the server speaks TLS), or a failed TLS handshake.
absl::Status ExplainSecurityError(absl::Status status, const Security* security);

// The process-wide client security: what the "grpc" data-plane transport and a
// GrpcDispatcherClient built without explicit security use. Thread-safe; read when a client is
// constructed, so set it once, before the first client is made (the CLI does so from its flags,
// Python from tfdata.set_client_security). Null (the default): plaintext, no token.
void SetClientSecurity(std::shared_ptr<const Security> security);
std::shared_ptr<const Security> GetClientSecurity();

}  // namespace tfdata::service
