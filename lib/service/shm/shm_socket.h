// The shared-memory data plane's plumbing: a worker's abstract Unix socket, messages with an
// optional descriptor over it, and sealed memfds (proto/shm.proto describes the conversation).
//
// Why these choices: an abstract socket name and memfds have no file-system entry, so a
// SIGKILLed reader or worker leaks nothing (the kernel frees both with the last descriptor and
// mapping); seals let each side map the other's memfd without fearing SIGBUS from a file that
// shrinks under it. Stateless functions, thread-safe; every descriptor returned is owned by the
// caller (UniqueFd closes it).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"

namespace tfdata::service::shm {

// Both sides check it in the hello.
inline constexpr int kShmProtocolVersion = 1;
// Bound on one message (descriptors, never element bytes). A response lists one size per
// element, so the server caps elements per response at kMaxElementsPerResponse to stay below it.
inline constexpr size_t kMaxMessageBytes = 128 << 10;
inline constexpr int kMaxElementsPerResponse = 8192;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  ~UniqueFd();
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The abstract socket name of the worker that advertises `address` (without the leading NUL).
std::string SocketName(const std::string& address);

// Binds and listens on SocketName(address). AlreadyExists when another process holds the name.
absl::StatusOr<UniqueFd> Listen(const std::string& address);
// Connects to the worker at `address`: UNAVAILABLE when no worker of this host (this network
// namespace) listens under that name.
absl::StatusOr<UniqueFd> Connect(const std::string& address);

// The effective uid of the process at the other end of `socket` (the kernel's record, from
// connect or listen time; a peer cannot forge it).
absl::StatusOr<uid_t> PeerUid(int socket);
// Under mutual TLS a reader proves who it is with its certificate; shared memory skips that
// check, so then only processes that could read the worker's key anyway may use it: the
// worker's own user, or root. True when `reader` may read from `worker` (uids) so.
bool SameUserOrRoot(uid_t reader, uid_t worker);

// Sends `msg` (at most kMaxMessageBytes), with descriptor `fd` attached unless it is -1 (the
// caller keeps its own copy). Waits at most `timeout` for room. UNAVAILABLE when the peer is gone.
absl::Status Send(int socket, const google::protobuf::MessageLite& msg, int fd, absl::Duration timeout);
// Receives one message into `msg`, and the descriptor attached to it (or an empty UniqueFd) into
// `*fd` when fd is not null (an unexpected descriptor is closed and is an error). Waits at most
// `timeout`: DEADLINE_EXCEEDED then; UNAVAILABLE when the peer closed; DATA_LOSS for a message that
// does not parse.
absl::Status Receive(int socket, google::protobuf::MessageLite* msg, UniqueFd* fd, absl::Duration timeout);

// A new memfd of `size` bytes, sealed so that it can neither shrink nor grow.
absl::StatusOr<UniqueFd> CreateSealedMemfd(const char* name, size_t size);
// Checks that `fd` is a memfd sealed against shrinking and holding at least `size` bytes, and
// returns its size. What a peer's descriptor must pass before it is mapped.
absl::StatusOr<size_t> CheckSealedMemfd(int fd, size_t size);

}  // namespace tfdata::service::shm
