#include "lib/service/shm/shm_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tfdata::service::shm {
namespace {

constexpr char kMarker = 'T';

absl::Status Errno(const std::string& what, int err) {
  return absl::InternalError(absl::StrCat("shared-memory data plane: ", what, ": ", std::strerror(err)));
}

// sockaddr_un for an abstract name (sun_path[0] = NUL, then the name; no terminator counted).
absl::StatusOr<std::pair<sockaddr_un, socklen_t>> AbstractAddress(const std::string& address) {
  const std::string name = SocketName(address);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (name.size() + 1 > sizeof(sa.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory data plane: worker address \"", address, "\" is too long for a socket name"));
  }
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  return std::make_pair(sa, static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size()));
}

// A new SOCK_SEQPACKET Unix socket and the abstract address of the worker at `address`.
absl::StatusOr<std::pair<UniqueFd, std::pair<sockaddr_un, socklen_t>>> SocketFor(const std::string& address) {
  auto sa = AbstractAddress(address);
  if (!sa.ok()) return sa.status();
  UniqueFd fd(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return Errno("socket", errno);
  return std::make_pair(std::move(fd), *sa);
}

// Waits until `socket` is ready for `events`; false on timeout.
absl::StatusOr<bool> WaitReady(int socket, short events, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{socket, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30)));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return Errno("poll", errno);
  }
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

std::string SocketName(const std::string& address) { return absl::StrCat("tfdata-shm:", address); }

absl::StatusOr<UniqueFd> Listen(const std::string& address) {
  auto s = SocketFor(address);
  if (!s.ok()) return s.status();
  auto& [fd, sa] = *s;
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa.first), sa.second) != 0) {
    if (errno == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("shared-memory data plane: another process serves \"@", SocketName(address), "\" on this host"));
    }
    return Errno(absl::StrCat("binding @", SocketName(address)), errno);
  }
  if (listen(fd.get(), 128) != 0) return Errno("listen", errno);
  return std::move(fd);
}

absl::StatusOr<UniqueFd> Connect(const std::string& address) {
  auto s = SocketFor(address);
  if (!s.ok()) return s.status();
  auto& [fd, sa] = *s;
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&sa.first), sa.second) != 0) {
    return absl::UnavailableError(
        absl::StrCat("worker ", address, ": no shared-memory data plane on this host (", std::strerror(errno), ")"));
  }
  return std::move(fd);
}

absl::StatusOr<uid_t> PeerUid(int socket) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Errno("SO_PEERCRED", errno);
  }
  return cred.uid;
}

bool SameUserOrRoot(uid_t reader, uid_t worker) { return reader == worker || reader == 0; }

absl::Status Send(int socket, const google::protobuf::MessageLite& msg, int fd, absl::Duration timeout) {
  // A marker byte first: an empty protobuf would otherwise be a zero-length message, which a
  // receiver cannot tell from the peer closing.
  std::string bytes(1, kMarker);
  msg.AppendToString(&bytes);
  if (bytes.size() > kMaxMessageBytes) {
    return absl::InternalError(absl::StrCat("shared-memory data plane: a message of ", bytes.size(), " bytes"));
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    std::memset(control, 0, sizeof(control));
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  while (true) {
    if (sendmsg(socket, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return absl::OkStatus();
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      auto ready = WaitReady(socket, POLLOUT, timeout);
      if (!ready.ok()) return ready.status();
      if (!*ready) return absl::DeadlineExceededError("shared-memory data plane: the peer reads nothing");
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
      return absl::UnavailableError("shared-memory data plane: the peer closed the connection");
    }
    return Errno("sendmsg", errno);
  }
}

absl::Status Receive(int socket, google::protobuf::MessageLite* msg, UniqueFd* fd, absl::Duration timeout) {
  if (fd != nullptr) *fd = UniqueFd();
  // One byte more than a message may hold, so that an oversized one shows as truncated. One
  // buffer per thread: this runs for every response, and a fresh zeroed 128 KiB each time cost
  // more than the message.
  thread_local std::unique_ptr<char[]> buf(new char[kMaxMessageBytes + 1]);
  while (true) {
    auto ready = WaitReady(socket, POLLIN, timeout);
    if (!ready.ok()) return ready.status();
    if (!*ready) return absl::DeadlineExceededError("shared-memory data plane: no answer in time");
    iovec iov{buf.get(), kMaxMessageBytes + 1};
    msghdr mh{};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    mh.msg_control = control;
    mh.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(socket, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0 && errno != ECONNRESET) return Errno("recvmsg", errno);
    // Take every descriptor first, so that none leaks whatever the message turns out to be.
    std::vector<UniqueFd> fds;
    if (n >= 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&mh); c != nullptr; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int received;
          std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
          fds.emplace_back(received);
        }
      }
    }
    if (n <= 0) return absl::UnavailableError("shared-memory data plane: the peer closed the connection");
    if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || static_cast<size_t>(n) > kMaxMessageBytes) {
      return absl::DataLossError("shared-memory data plane: an oversized message");
    }
    if (fds.size() > 1 || (!fds.empty() && fd == nullptr)) {
      return absl::DataLossError("shared-memory data plane: a message with unexpected descriptors");
    }
    if (buf[0] != kMarker || !msg->ParseFromArray(buf.get() + 1, static_cast<int>(n - 1))) {
      return absl::DataLossError("shared-memory data plane: a message that does not parse");
    }
    if (!fds.empty()) *fd = std::move(fds[0]);
    return absl::OkStatus();
  }
}

absl::StatusOr<UniqueFd> CreateSealedMemfd(const char* name, size_t size) {
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return Errno("memfd_create", errno);
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory data plane: a region of ", size, " bytes: ", std::strerror(errno)));
  }
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) return Errno("sealing", errno);
  return fd;
}

absl::StatusOr<size_t> CheckSealedMemfd(int fd, size_t size) {
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError("shared-memory data plane: the peer's region is not sealed against shrinking");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) return Errno("fstat", errno);
  if (static_cast<uint64_t>(st.st_size) < size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared-memory data plane: the peer's region holds ", st.st_size, " bytes, not ", size));
  }
  return static_cast<size_t>(st.st_size);
}

}  // namespace tfdata::service::shm
