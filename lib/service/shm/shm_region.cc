#include "lib/service/shm/shm_region.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tfdata::service::shm {

absl::StatusOr<std::shared_ptr<ReaderRegion>> ReaderRegion::Create(size_t bytes) {
  auto fd = CreateSealedMemfd("tfdata-shm-reader", bytes);
  if (!fd.ok()) return fd.status();
  // Writable, as the gRPC plane's buffers are: a consumer may change its tensors in place; the
  // worker writes only spans that no live block holds.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd->get(), 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("shared-memory data plane: mapping ", bytes, " bytes: ", std::strerror(errno)));
  }
  return std::shared_ptr<ReaderRegion>(new ReaderRegion(*std::move(fd), static_cast<const uint8_t*>(p), bytes));
}

ReaderRegion::~ReaderRegion() { munmap(const_cast<uint8_t*>(base_), size_); }

ReaderRegion::Span ReaderRegion::Reserve(size_t want) const {
  absl::MutexLock lock(&mu_);
  if (blocks_.empty()) return {0, size_};  // start over at 0: those pages are mapped on both sides already
  const size_t head = blocks_.back().end, tail = blocks_.front().start;
  if (head <= tail) return {head, tail - head};  // wrapped: the free bytes lie between head and tail
  const size_t at_end = size_ - head, at_start = tail;
  if (at_end >= want || at_end >= at_start) return {head, at_end};
  return {0, at_start};
}

std::shared_ptr<Buffer> ReaderRegion::Commit(size_t offset, size_t used) {
  const size_t end = std::min(size_, (offset + used + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
  {
    absl::MutexLock lock(&mu_);
    blocks_.push_back({offset, end});
  }
  // The lease: its deleter frees the block, and it keeps the region (and so the mapping) alive.
  struct Lease {
    Lease(std::shared_ptr<ReaderRegion> r, size_t s) : region(std::move(r)), start(s) {}
    Lease(const Lease&) = delete;
    ~Lease() { region->Release(start); }
    const std::shared_ptr<ReaderRegion> region;
    const size_t start;
  };
  auto lease = std::make_shared<const Lease>(shared_from_this(), offset);
  return Buffer::Wrap(base_ + offset, used, std::move(lease));
}

void ReaderRegion::Release(size_t start) {
  absl::MutexLock lock(&mu_);
  for (Block& b : blocks_) {
    if (b.start == start && !b.released) {
      b.released = true;
      break;
    }
  }
  while (!blocks_.empty() && blocks_.front().released) blocks_.pop_front();
}

size_t ReaderRegion::BytesInUse() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const Block& b : blocks_) n += b.released ? 0 : b.end - b.start;
  return n;
}

}  // namespace tfdata::service::shm
