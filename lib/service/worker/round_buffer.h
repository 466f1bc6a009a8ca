// Coordinated reads on a worker: the rounds of one task. Round r holds one element per consumer;
// consumer i takes element i. A round is opened by the first request for it, with the next
// elements of the task's stream, and closed once every slot was taken or it expired.
//
// A consumer that stops for good must not hold the others back forever: a round open longer than
// the expiry drops its untaken elements and marks their consumers absent; rounds opened while a
// consumer is absent hold no element for it, and its next request marks it present again. A
// request that cannot get its own slot (its round closed, or a retry of a slot already taken) is
// "late": the task serves it the stream's next element instead, so the consumer still gets an
// element of this worker for the round.
//
// Not thread-safe: the task guards it with its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/time/time.h"
#include "lib/core/tensor.h"

namespace tfdata::service {

class RoundBuffer {
 public:
  explicit RoundBuffer(int num_consumers) : present_(static_cast<size_t>(num_consumers), true) {}

  int num_consumers() const { return static_cast<int>(present_.size()); }
  // Marks the consumer present (it asked for something).
  void Touch(int consumer) { present_[static_cast<size_t>(consumer)] = true; }
  // The round was opened before (open or closed).
  bool Known(int64_t round) const;
  // Consumers a new round needs an element for.
  int NumPresent() const;
  // Opens `round` with `elements`, one per present consumer in consumer order.
  void Open(int64_t round, std::vector<Element> elements, absl::Time now);
  // Consumer `consumer`'s element of `round`, moved out; nullopt when the round is closed or the
  // slot was taken already (a late request).
  std::optional<Element> Take(int64_t round, int consumer);
  // Closes rounds open longer than `expiry` as of `now`; returns the elements dropped.
  int64_t Expire(absl::Time now, absl::Duration expiry);
  // Bytes of untaken elements held.
  int64_t bytes() const { return bytes_; }
  size_t open_rounds() const { return rounds_.size(); }

 private:
  struct Round {
    std::vector<std::optional<Element>> slots;
    int64_t untaken = 0;
    absl::Time opened;
  };
  void CloseLocked(std::map<int64_t, Round>::iterator it);

  std::vector<bool> present_;
  std::map<int64_t, Round> rounds_;
  // Closed rounds; only the newest kMaxClosed are remembered, older ones count as closed when
  // they are below the oldest one remembered.
  std::set<int64_t> closed_;
  int64_t bytes_ = 0;
};

}  // namespace tfdata::service
