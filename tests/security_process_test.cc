// Closed to strangers: TLS, mutual TLS and the shared token, as real processes on loopback, with
// certificates made by the openssl CLI (the commands of docs/operations.md#security).
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "grpcpp/grpcpp.h"
#include "proto/service.grpc.pb.h"
#include "tests/process_util.h"
#include "tests/test_util.h"

using namespace tfdata::testing;

namespace {

// Runs openssl (found on PATH) with `args`; fails the test if it fails.
void OpenSsl(const std::vector<std::string>& args) {
  std::vector<std::string> full{"/usr/bin/env", "openssl"};
  full.insert(full.end(), args.begin(), args.end());
  auto r = RunCommand(full);
  INFO("openssl (the Debian package openssl, scripts/install-deps.sh): " << r.err);
  REQUIRE(r.exit_code == 0);
}

// A key and a certificate `name`.key/.crt signed by `ca` (ca.key/.crt), for localhost and 127.0.0.1.
void MakeCertificate(const TempDir& dir, const std::string& ca, const std::string& name, const std::string& usage) {
  OpenSsl({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc", "-keyout",
           dir.Join(name + ".key"), "-out", dir.Join(name + ".csr"), "-subj", "/CN=" + name});
  WriteFile(dir.Join(name + ".ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=" + usage + "\n");
  OpenSsl({"x509", "-req", "-in", dir.Join(name + ".csr"), "-CA", dir.Join(ca + ".crt"), "-CAkey",
           dir.Join(ca + ".key"), "-CAcreateserial", "-days", "2", "-extfile", dir.Join(name + ".ext"), "-out",
           dir.Join(name + ".crt")});
}

void MakeCa(const TempDir& dir, const std::string& name) {
  OpenSsl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-noenc", "-keyout",
           dir.Join(name + ".key"), "-out", dir.Join(name + ".crt"), "-days", "2", "-subj", "/CN=" + name});
}

// ca.crt; server.crt (servers, and workers as clients of the dispatcher); client.crt (readers);
// other-ca.crt, a CA that signed none of them.
void MakeCertificates(const TempDir& dir) {
  MakeCa(dir, "ca");
  MakeCa(dir, "other-ca");
  MakeCertificate(dir, "ca", "server", "serverAuth,clientAuth");
  MakeCertificate(dir, "ca", "client", "clientAuth");
}

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// The port in a --port-file.
std::string PortIn(const std::string& path) {
  std::string port = ReadFile(path);
  while (!port.empty() && port.back() == '\n') port.pop_back();
  return port;
}

constexpr char kRange[] = "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n";

}  // namespace

TEST_CASE(
    "security: a cluster over mutual TLS reads, and refuses clients without the CA, with another CA or "
    "without a certificate",
    "[security][process]") {
  TempDir dir;
  MakeCertificates(dir);
  const std::vector<std::string> server_tls = {
      "--tls-cert", dir.Join("server.crt"), "--tls-key", dir.Join("server.key"), "--tls-ca", dir.Join("ca.crt")};
  Process dispatcher(
      Concat({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1"}, server_tls),
      dir.Join("d"));
  const std::string addr = "localhost:" + WaitForPort(dir.Join("d.port"));
  CHECK_THAT(dispatcher.out(), Catch::Contains("(mutual TLS)"));
  auto workers = StartWorkers(dir, addr, 1, server_tls);
  CHECK_THAT(workers[0]->out(), Catch::Contains("(mutual TLS)"));

  const std::vector<std::string> client_tls = {"--tls-ca",  dir.Join("ca.crt"),    "--tls-cert", dir.Join("client.crt"),
                                               "--tls-key", dir.Join("client.key")};
  auto reg = RunTfdata(Concat({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr}, client_tls));
  INFO(reg.err);
  REQUIRE(reg.exit_code == 0);
  auto read = RunTfdata(Concat({"read", "--dispatcher", addr, "--dataset-id", "1"}, client_tls));
  INFO(read.err);
  CHECK(read.exit_code == 0);
  CHECK(read.out == kRange);  // through the dispatcher and the worker's data plane, both over TLS
  CHECK_THAT(workers[0]->err(), !Catch::Contains("heartbeat to the dispatcher failed"));

  const auto started = std::chrono::steady_clock::now();
  auto plain = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1"});
  CHECK(plain.exit_code == 1);
  CHECK(plain.out.empty());
  CHECK_THAT(plain.err, Catch::Contains("dispatcher " + addr) && Catch::Contains("the server may use TLS"));
  auto other_ca = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--tls-ca", dir.Join("other-ca.crt"),
                             "--tls-cert", dir.Join("client.crt"), "--tls-key", dir.Join("client.key")});
  CHECK(other_ca.exit_code == 1);
  CHECK(other_ca.out.empty());
  CHECK_THAT(other_ca.err, Catch::Contains("TLS handshake failed"));
  auto no_cert = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--tls-ca", dir.Join("ca.crt")});
  CHECK(no_cert.exit_code == 1);
  CHECK(no_cert.out.empty());
  CHECK_THAT(no_cert.err, Catch::Contains("TLS handshake failed"));
  // Refused at once, not after the reads' retries run out.
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));

  // The data plane too: a plaintext call straight to the worker gets nothing.
  auto stub = tfdata::service::WorkerService::NewStub(
      grpc::CreateChannel("localhost:" + PortIn(dir.Join("w0.port")), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  tfdata::service::GetElementsRequest req;
  tfdata::service::GetElementsResponse resp;
  CHECK(stub->GetElements(&ctx, req, &resp).error_code() == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("security: TLS without client certificates refuses a client without the CA", "[security][process]") {
  TempDir dir;
  MakeCertificates(dir);
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1",
                      "--tls-cert", dir.Join("server.crt"), "--tls-key", dir.Join("server.key")},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));  // the certificate names the IP too
  CHECK_THAT(dispatcher.out(), Catch::Contains("(TLS)"));
  auto reg =
      RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--tls-ca", dir.Join("ca.crt")});
  INFO(reg.err);
  CHECK(reg.exit_code == 0);
  CHECK(reg.out == "1\n");
  auto plain = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr});
  CHECK(plain.exit_code == 1);
  CHECK_THAT(plain.err, Catch::Contains("the server may use TLS: give the client its CA (--tls-ca)"));
  auto bench = RunTfdata(
      {"bench", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--duration", "0.1", "--warmup", "0"});
  CHECK(bench.exit_code == 1);
  CHECK_THAT(bench.err, Catch::Contains("the server may use TLS"));
}

TEST_CASE("security: the shared token is checked on every call of both services", "[security][process]") {
  TempDir dir;
  WriteFile(dir.Join("token"), "s3cret-token\n");
  WriteFile(dir.Join("wrong"), "not-the-token\n");
  Process dispatcher({"dispatcher", "--port", "0", "--port-file", dir.Join("d.port"), "--host", "127.0.0.1",
                      "--auth-token-file", dir.Join("token")},
                     dir.Join("d"));
  const std::string addr = "127.0.0.1:" + WaitForPort(dir.Join("d.port"));
  auto workers = StartWorkers(dir, addr, 1, {"--auth-token-file", dir.Join("token")});
  auto reg = RunTfdata(
      {"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr, "--auth-token-file", dir.Join("token")});
  INFO(reg.err);
  REQUIRE(reg.exit_code == 0);

  auto right = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--auth-token-file", dir.Join("token")});
  INFO(right.err);
  CHECK(right.exit_code == 0);
  CHECK(right.out == kRange);
  auto missing = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.out.empty());
  CHECK_THAT(missing.err, Catch::Contains("dispatcher " + addr) && Catch::Contains("missing or wrong auth token"));
  auto wrong = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--auth-token-file", dir.Join("wrong")});
  CHECK(wrong.exit_code == 1);
  CHECK_THAT(wrong.err, Catch::Contains("missing or wrong auth token"));
  auto unregistered = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", addr});
  CHECK(unregistered.exit_code == 1);
  CHECK_THAT(unregistered.err, Catch::Contains("missing or wrong auth token"));

  // The worker's data plane, called directly: without the token UNAUTHENTICATED, with it the call
  // gets through to the worker (which runs no task 12345).
  auto stub = tfdata::service::WorkerService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + PortIn(dir.Join("w0.port")), grpc::InsecureChannelCredentials()));
  tfdata::service::GetElementsRequest req;
  req.set_task_id(12345);
  tfdata::service::GetElementsResponse resp;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto st = stub->GetElements(&ctx, req, &resp);
    CHECK(st.error_code() == grpc::StatusCode::UNAUTHENTICATED);
    CHECK_THAT(st.error_message(), Catch::Contains("missing or wrong auth token"));
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx.AddMetadata("authorization", "Bearer not-the-token");
    CHECK(stub->GetElements(&ctx, req, &resp).error_code() == grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    ctx.AddMetadata("authorization", "Bearer s3cret-token");
    CHECK(stub->GetElements(&ctx, req, &resp).error_code() == grpc::StatusCode::NOT_FOUND);
  }

  // A worker without the token cannot register: the dispatcher refuses its heartbeats.
  Process stranger({"worker", "--dispatcher", addr, "--port-file", dir.Join("s.port"), "--heartbeat-interval", "100ms"},
                   dir.Join("s"));
  WaitForPort(dir.Join("s.port"));
  CHECK(WaitFor([&] { return stranger.err().find("missing or wrong auth token") != std::string::npos; }));
  CHECK_THAT(dispatcher.err(), !Catch::Contains("worker localhost:" + PortIn(dir.Join("s.port"))));
  auto again = RunTfdata({"read", "--dispatcher", addr, "--dataset-id", "1", "--auth-token-file", dir.Join("token")});
  CHECK(again.exit_code == 0);
  CHECK(again.out == kRange);  // from the one registered worker only
}

TEST_CASE("security: bad TLS and token files are refused with the flag and the file named", "[security][process]") {
  TempDir dir;
  MakeCertificates(dir);
  WriteFile(dir.Join("empty"), "\n");
  const std::vector<std::string> dispatcher = {"dispatcher", "--port", "0", "--host", "127.0.0.1"};
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--tls-cert", dir.Join("server.crt"), "--tls-key", dir.Join("client.key")},
       "--tls-key " + dir.Join("client.key") + " does not match --tls-cert " + dir.Join("server.crt")},
      {{"--tls-cert", dir.Join("missing.crt"), "--tls-key", dir.Join("server.key")},
       "--tls-cert " + dir.Join("missing.crt") + ": cannot read"},
      {{"--tls-cert", dir.Join("server.crt")}, "--tls-cert and --tls-key go together"},
      {{"--tls-cert", dir.Join("server.key"), "--tls-key", dir.Join("server.key")},
       "--tls-cert " + dir.Join("server.key") + ": not a PEM certificate"},
      {{"--tls-cert", dir.Join("server.crt"), "--tls-key", dir.Join("server.crt")},
       "--tls-key " + dir.Join("server.crt") + ": not a PEM private key"},
      {{"--tls-ca", dir.Join("ca.crt")}, "--tls-ca on a server asks for mutual TLS"},
      {{"--tls-cert", dir.Join("server.crt"), "--tls-key", dir.Join("server.key"), "--tls-ca", dir.Join("ca.key")},
       "--tls-ca " + dir.Join("ca.key") + ": not a PEM certificate"},
      {{"--auth-token-file", dir.Join("empty")}, "--auth-token-file " + dir.Join("empty") + ": the file is empty"},
      {{"--auth-token-file", dir.Join("nope")}, "--auth-token-file " + dir.Join("nope") + ": cannot read"},
  };
  for (const Case& c : cases) {
    auto r = RunTfdata(Concat(dispatcher, c.flags));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Catch::Contains(c.message));
  }
  auto worker = RunTfdata({"worker", "--dispatcher", "127.0.0.1:1", "--tls-ca", dir.Join("ca.crt")});
  CHECK(worker.exit_code == 2);
  CHECK_THAT(worker.err, Catch::Contains("--tls-ca on a server asks for mutual TLS"));
  auto read = RunTfdata({"read", "--dispatcher", "127.0.0.1:1", "--dataset-id", "1", "--tls-ca", dir.Join("nope")});
  CHECK(read.exit_code == 2);
  CHECK_THAT(read.err, Catch::Contains("--tls-ca " + dir.Join("nope") + ": cannot read"));
  auto reg = RunTfdata({"register", SourcePath("examples/range.pbtxt"), "--dispatcher", "127.0.0.1:1", "--tls-cert",
                        dir.Join("client.crt"), "--tls-key", dir.Join("server.key")});
  CHECK(reg.exit_code == 2);
  CHECK_THAT(reg.err, Catch::Contains("does not match"));
}
