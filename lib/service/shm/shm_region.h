// The reader's memory for one shared-memory connection: a sealed memfd that both sides map
// writable, used as a ring. Before each request the reader reserves
// the largest free span at the ring's head (Reserve); the worker writes that response's frames
// there; the reader then keeps exactly the bytes the response used (Commit), as one Buffer that
// the response's tensors alias. When the last tensor lets go of that Buffer, its bytes are free
// again: the space returns to the worker without a message, because the reader owns it.
//
// Blocks are freed in any order; space is reused once every older block is free too (tensors are
// mostly dropped in the order they came, and a response that finds no room goes through a memfd
// of the worker's, ShmResponse.overflow). Thread-safe: blocks are released from any thread. The
// region lives as long as its owner or any Buffer of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/core/tensor.h"
#include "lib/service/shm/shm_socket.h"

namespace tfdata::service::shm {

class ReaderRegion : public std::enable_shared_from_this<ReaderRegion> {
 public:
  // Blocks start on this boundary (a cache line; frames need 8).
  static constexpr size_t kBlockAlign = 64;

  // A new region of `bytes` (a multiple of the page size, > 0).
  static absl::StatusOr<std::shared_ptr<ReaderRegion>> Create(size_t bytes);
  ~ReaderRegion();
  ReaderRegion(const ReaderRegion&) = delete;
  ReaderRegion& operator=(const ReaderRegion&) = delete;

  // The memfd to send to the worker (the region keeps it open).
  int fd() const { return fd_.get(); }
  size_t size() const { return size_; }

  struct Span {
    size_t offset = 0, capacity = 0;
  };
  // The free span for the next response: at the ring's head, or at its start when the head has
  // less than `want` left and the start has more. Capacity 0 when the ring is full. Only one
  // reservation may be outstanding (a connection serves one call at a time).
  Span Reserve(size_t want) const;
  // Keeps bytes [offset, offset + used) of the last reservation (used <= its capacity, > 0) as a
  // Buffer; they are free again when the Buffer and every Buffer sharing it are gone.
  std::shared_ptr<Buffer> Commit(size_t offset, size_t used);

  // Bytes held by live blocks (tests).
  size_t BytesInUse() const;

 private:
  struct Block {
    size_t start, end;
    bool released = false;
  };
  ReaderRegion(UniqueFd fd, const uint8_t* base, size_t size) : fd_(std::move(fd)), base_(base), size_(size) {}
  void Release(size_t start);

  const UniqueFd fd_;
  const uint8_t* const base_;
  const size_t size_;
  mutable absl::Mutex mu_;
  std::deque<Block> blocks_ ABSL_GUARDED_BY(mu_);  // in allocation (ring) order
};

}  // namespace tfdata::service::shm
