// Which files a pipeline may open: the worker's --allowed-path directories.
//
// A pipeline comes from whoever can reach the dispatcher, so a worker that holds data under /data
// should not open /etc/shadow for it. Paths are checked after symlinks and ".." are resolved
// (realpath), so neither can lead out of an allowed directory. A file that does not exist yet
// (a cache file being written) is checked by its resolved parent directory.
//
// Immutable after Create; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tfdata {

class PathPolicy {
 public:
  // Every path allowed.
  PathPolicy() = default;
  // Only paths under `dirs` (each must exist; resolved now). `flag` names the setting in errors
  // ("--allowed-path").
  static absl::StatusOr<PathPolicy> Create(const std::vector<std::string>& dirs, std::string flag);

  bool restricts() const { return !dirs_.empty(); }
  const std::vector<std::string>& dirs() const { return dirs_; }

  // OK when `path` may be opened; PERMISSION_DENIED naming the path, the resolved path when it
  // differs, and the allowed directories otherwise.
  absl::Status Check(const std::string& path) const;

 private:
  std::vector<std::string> dirs_;  // resolved, without a trailing '/'
  std::string flag_;
};

}  // namespace tfdata
