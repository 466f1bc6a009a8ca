#include "lib/service/grpc/security.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"

namespace tfdata::service {
namespace {

constexpr char kAuthHeader[] = "authorization";
constexpr char kBearer[] = "Bearer ";

struct Names {
  std::string cert, key, ca, token;
};

Names NamesFor(const SecurityFiles& f) {
  if (f.python_names) return {"tls_cert", "tls_key", "tls_ca", "auth_token_file"};
  return {"--tls-cert", "--tls-key", "--tls-ca", "--auth-token-file"};
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat(name, " ", path, ": cannot read (", std::strerror(errno), ")"));
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return absl::InvalidArgumentError(absl::StrCat(name, " ", path, ": cannot read"));
  return s.str();
}

// OpenSSL objects freed on scope exit.
struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

std::unique_ptr<BIO, BioFree> MemBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// Never prompts for a passphrase: an encrypted key is refused.
int NoPassphrase(char*, int, int, void*) { return -1; }

X509Ptr ParseCertificate(const std::string& pem) {
  auto bio = MemBio(pem);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  ERR_clear_error();
  return cert;
}

KeyPtr ParseKey(const std::string& pem) {
  auto bio = MemBio(pem);
  KeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr) : nullptr);
  ERR_clear_error();
  return key;
}

std::array<unsigned char, SHA256_DIGEST_LENGTH> Digest(std::string_view s) {
  std::array<unsigned char, SHA256_DIGEST_LENGTH> out{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out.data());
  return out;
}

ABSL_CONST_INIT absl::Mutex g_client_mu(absl::kConstInit);
// Never destroyed: clients may still be made during static destruction.
std::shared_ptr<const Security>* g_client ABSL_GUARDED_BY(g_client_mu) = nullptr;

}  // namespace

absl::StatusOr<std::shared_ptr<const Security>> LoadSecurity(const SecurityFiles& files, SecurityRole role) {
  const Names n = NamesFor(files);
  if (files.tls_cert.empty() && files.tls_key.empty() && files.tls_ca.empty() && files.auth_token_file.empty()) {
    return std::shared_ptr<const Security>();
  }
  if (files.tls_cert.empty() != files.tls_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(n.cert, " and ", n.key, " go together: give both or neither"));
  }
  if (role != SecurityRole::kClient && !files.tls_ca.empty() && files.tls_cert.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(n.ca, " on a server asks for mutual TLS, which needs the server's own ", n.cert, " and ", n.key));
  }
  auto security = std::make_shared<Security>();
  if (!files.tls_cert.empty()) {
    auto cert = ReadWholeFile(files.tls_cert, n.cert);
    if (!cert.ok()) return cert.status();
    auto key = ReadWholeFile(files.tls_key, n.key);
    if (!key.ok()) return key.status();
    X509Ptr x509 = ParseCertificate(*cert);
    if (x509 == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(n.cert, " ", files.tls_cert, ": not a PEM certificate"));
    }
    KeyPtr pkey = ParseKey(*key);
    if (pkey == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(n.key, " ", files.tls_key, ": not a PEM private key (or one encrypted with a passphrase)"));
    }
    const bool match = X509_check_private_key(x509.get(), pkey.get()) == 1;
    ERR_clear_error();
    if (!match) {
      return absl::InvalidArgumentError(absl::StrCat(n.key, " ", files.tls_key, " does not match ", n.cert, " ",
                                                     files.tls_cert, " (not the key the certificate was made for)"));
    }
    security->cert_pem = *std::move(cert);
    security->key_pem = *std::move(key);
  }
  if (!files.tls_ca.empty()) {
    auto ca = ReadWholeFile(files.tls_ca, n.ca);
    if (!ca.ok()) return ca.status();
    if (ParseCertificate(*ca) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(n.ca, " ", files.tls_ca, ": not a PEM certificate"));
    }
    security->ca_pem = *std::move(ca);
  }
  if (!files.auth_token_file.empty()) {
    auto text = ReadWholeFile(files.auth_token_file, n.token);
    if (!text.ok()) return text.status();
    const std::string token(absl::StripAsciiWhitespace(*text));
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(n.token, " ", files.auth_token_file, ": the file is empty"));
    }
    for (const char c : token) {
      // gRPC metadata values are printable ASCII.
      if (c < 0x20 || c > 0x7e) {
        return absl::InvalidArgumentError(absl::StrCat(n.token, " ", files.auth_token_file,
                                                       ": the token must be one line of printable ASCII characters"));
      }
    }
    security->token = token;
  }
  return std::shared_ptr<const Security>(std::move(security));
}

std::string DescribeServerSecurity(const Security* security) {
  if (security == nullptr) return "";
  std::string parts;
  if (security->server_tls()) parts = security->ca_pem.empty() ? "TLS" : "mutual TLS";
  if (!security->token.empty()) absl::StrAppend(&parts, parts.empty() ? "" : ", ", "auth token");
  return parts.empty() ? "" : absl::StrCat(" (", parts, ")");
}

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials(const Security* security) {
  if (security == nullptr || !security->server_tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(security->ca_pem.empty()
                                                ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                                : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = security->ca_pem;
  options.pem_key_cert_pairs.push_back({security->key_pem, security->cert_pem});
  return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const Security* security) {
  if (security == nullptr || !security->client_tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = security->ca_pem;
  options.pem_private_key = security->key_pem;
  options.pem_cert_chain = security->cert_pem;
  return grpc::SslCredentials(options);
}

void AddAuthToken(grpc::ClientContext* ctx, const Security* security) {
  if (security != nullptr && !security->token.empty()) ctx->AddMetadata(kAuthHeader, kBearer + security->token);
}

grpc::Status CheckAuthToken(const grpc::ServerContext& ctx, const Security* security) {
  if (security == nullptr || security->token.empty()) return grpc::Status::OK;
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find(kAuthHeader);
  // Both sides hashed, so that the comparison takes the same time whatever the lengths.
  const auto expected = Digest(kBearer + security->token);
  const auto given =
      Digest(it == metadata.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size()));
  if (it != metadata.end() && CRYPTO_memcmp(expected.data(), given.data(), expected.size()) == 0)
    return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "missing or wrong auth token (this server was started with --auth-token-file: give the client "
                      "the same token)");
}

absl::Status ExplainSecurityError(absl::Status status, const Security* security) {
  if (!absl::IsUnavailable(status)) return status;
  const std::string m(status.message());
  const bool tls = security != nullptr && security->client_tls();
  if (absl::StrContains(m, "Connection refused")) return status;
  if (!tls && (absl::StrContains(m, "Socket closed") || absl::StrContains(m, "Connection reset") ||
               absl::StrContains(m, "andshake"))) {
    return absl::Status(status.code(), absl::StrCat(m, "; the server may use TLS: give the client its CA (--tls-ca)"));
  }
  if (tls && (absl::StrContains(m, "andshake") || absl::StrContains(m, "SSL") || absl::StrContains(m, "ssl") ||
              absl::StrContains(m, "Socket closed") || absl::StrContains(m, "ertificate"))) {
    return absl::Status(
        status.code(),
        absl::StrCat(m,
                     "; TLS handshake failed: check that --tls-ca is the CA that signed the server's certificate, "
                     "that the host name in the address is in that certificate, that the server uses TLS, and for "
                     "mutual TLS that the client gives --tls-cert and --tls-key"));
  }
  return status;
}

void SetClientSecurity(std::shared_ptr<const Security> security) {
  absl::MutexLock lock(&g_client_mu);
  if (g_client == nullptr) g_client = new std::shared_ptr<const Security>();
  *g_client = std::move(security);
}

std::shared_ptr<const Security> GetClientSecurity() {
  absl::MutexLock lock(&g_client_mu);
  return g_client == nullptr ? nullptr : *g_client;
}

}  // namespace tfdata::service
