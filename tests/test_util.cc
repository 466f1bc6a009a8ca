#include "tests/test_util.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <catch2/catch.hpp>

namespace tfdata::testing {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tfdata_test_XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream f(path, std::ios::binary);
  f << contents;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

static std::string Drain(int fd) {
  std::string out;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

void RequireTestKind(const std::string& needs) {
  const char* kind = std::getenv("TFDATA_TEST_KIND");
  if (kind == nullptr) return;
  auto rank = [](const std::string& k) { return k == "process" ? 2 : k == "cluster" ? 1 : 0; };
  if (rank(kind) < rank(needs)) {
    FAIL("this test runs " << (needs == "process" ? "a process" : "the test cluster") << " but ctest labels it " << kind
                           << ": tag it [" << needs << "] (tests/test_util.h)");
  }
}

CommandResult RunCommand(const std::vector<std::string>& args) {
  RequireTestKind("process");
  TempDir dir;
  const std::string out_path = dir.Join("stdout");
  const std::string err_path = dir.Join("stderr");
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int fd = open(out_path.c_str(), O_RDONLY);
  r.out = Drain(fd);
  close(fd);
  fd = open(err_path.c_str(), O_RDONLY);
  r.err = Drain(fd);
  close(fd);
  return r;
}

CommandResult RunTfdata(const std::vector<std::string>& args) {
  std::vector<std::string> full{TFDATA_BINARY};
  full.insert(full.end(), args.begin(), args.end());
  return RunCommand(full);
}

std::string SourcePath(const std::string& relative) { return std::string(TFDATA_SOURCE_DIR) + "/" + relative; }

std::vector<int64_t> Int64Scalars(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const auto& e : elements) out.push_back(e.at(0).GetAsInt64(0));
  return out;
}

}  // namespace tfdata::testing
