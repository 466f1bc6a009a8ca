// Helpers shared by the files that apply journal records to DispatcherState
// (dispatcher_state.cc, dispatcher_state_splits.cc). Not for other callers.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tfdata::service::state_internal {

// A record that does not fit the state (the journal and the state disagree).
inline absl::Status Inconsistent(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat("dispatcher state: ", what));
}

// The mapped value for `key`, or nullptr.
template <typename Map, typename Key>
auto* Find(Map& map, const Key& key) {
  auto it = map.find(key);
  return it == map.end() ? nullptr : &it->second;
}

}  // namespace tfdata::service::state_internal
