// A memory region shared between a worker and one of its Python helper processes: a memfd that
// the helper inherits, mapped by both. Either side may grow it (the writer of a message makes room
// for it); the other maps the new size before it reads (Map). A crashed process leaks nothing:
// the memfd has no name in any file system and goes away with its last descriptor and mapping.
//
// Mappings are reference-counted: Data() returns the current mapping's owner, so memory handed
// out as tensors stays mapped after a later Map moved the region. Not thread-safe: one side's
// calls come from one thread at a time (the pool serialises calls per helper).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace tfdata::python_functions {

class SharedRegion {
 public:
  // A new region of `size` bytes (rounded up to a page); `name` shows in /proc/PID/fd.
  static absl::StatusOr<SharedRegion> Create(const std::string& name, size_t size);
  // The region behind descriptor `fd` (inherited from the worker); takes ownership of `fd`.
  static absl::StatusOr<SharedRegion> Adopt(int fd);

  SharedRegion() = default;
  SharedRegion(SharedRegion&&) noexcept;
  SharedRegion& operator=(SharedRegion&&) noexcept;
  ~SharedRegion();

  // Makes at least `size` bytes mapped: maps the file's current size when the other side grew
  // it, and (`grow`) enlarges the file when it is smaller still.
  absl::Status Map(size_t size, bool grow);

  uint8_t* data() const { return mapping_ ? static_cast<uint8_t*>(mapping_.get()) : nullptr; }
  size_t size() const { return mapped_; }
  // Keeps the current mapping alive (for tensors that alias it).
  std::shared_ptr<void> mapping() const { return mapping_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::shared_ptr<void> mapping_;  // munmap when the last holder lets go
  size_t mapped_ = 0;
};

}  // namespace tfdata::python_functions
