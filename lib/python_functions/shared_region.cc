#include "lib/python_functions/shared_region.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "fmt/format.h"

namespace tfdata::python_functions {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::InternalError(fmt::format("python helper memory: {}: {}", what, std::strerror(errno)));
}

size_t RoundUp(size_t size) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t n = page;
  while (n < size) n *= 2;  // doubling: a growing batch remaps a few times, not on every call
  return n;
}

}  // namespace

absl::StatusOr<SharedRegion> SharedRegion::Create(const std::string& name, size_t size) {
  SharedRegion r;
  r.fd_ = memfd_create(name.c_str(), 0);  // inherited by the helper: no MFD_CLOEXEC
  if (r.fd_ < 0) return Errno("memfd_create");
  if (auto st = r.Map(size, /*grow=*/true); !st.ok()) return st;
  return r;
}

absl::StatusOr<SharedRegion> SharedRegion::Adopt(int fd) {
  SharedRegion r;
  r.fd_ = fd;
  if (auto st = r.Map(1, /*grow=*/false); !st.ok()) return st;
  return r;
}

SharedRegion::SharedRegion(SharedRegion&& o) noexcept
    : fd_(o.fd_), mapping_(std::move(o.mapping_)), mapped_(o.mapped_) {
  o.fd_ = -1;
  o.mapped_ = 0;
}

SharedRegion& SharedRegion::operator=(SharedRegion&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.fd_;
    mapping_ = std::move(o.mapping_);
    mapped_ = o.mapped_;
    o.fd_ = -1;
    o.mapped_ = 0;
  }
  return *this;
}

SharedRegion::~SharedRegion() {
  if (fd_ >= 0) close(fd_);
}

absl::Status SharedRegion::Map(size_t size, bool grow) {
  if (size <= mapped_) return absl::OkStatus();
  struct stat st;
  if (fstat(fd_, &st) != 0) return Errno("fstat");
  size_t file = static_cast<size_t>(st.st_size);
  if (file < size) {
    if (!grow) {
      return absl::DataLossError(
          fmt::format("python helper memory: {} bytes expected, the region holds {}", size, file));
    }
    file = RoundUp(size);
    if (ftruncate(fd_, static_cast<off_t>(file)) != 0) return Errno(fmt::format("growing to {} bytes", file));
  }
  void* p = mmap(nullptr, file, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return Errno(fmt::format("mapping {} bytes", file));
  mapping_ = std::shared_ptr<void>(p, [file](void* q) { munmap(q, file); });
  mapped_ = file;
  return absl::OkStatus();
}

}  // namespace tfdata::python_functions
