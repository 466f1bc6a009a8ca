#include "lib/io/path_policy.h"

#include <climits>
#include <cstdlib>
#include <string>

#include "fmt/format.h"

namespace tfdata {
namespace {

// realpath(3), or "" when the path cannot be resolved.
std::string Resolve(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/');
}

}  // namespace

absl::StatusOr<PathPolicy> PathPolicy::Create(const std::vector<std::string>& dirs, std::string flag) {
  PathPolicy p;
  p.flag_ = std::move(flag);
  for (const std::string& d : dirs) {
    const std::string resolved = Resolve(d);
    if (resolved.empty()) {
      return absl::InvalidArgumentError(fmt::format("{} {}: no such directory", p.flag_, d));
    }
    p.dirs_.push_back(resolved);
  }
  return p;
}

absl::Status PathPolicy::Check(const std::string& path) const {
  if (dirs_.empty()) return absl::OkStatus();
  std::string resolved = Resolve(path);
  if (resolved.empty()) {
    // Not there (yet): where it would be created decides.
    const size_t slash = path.find_last_of('/');
    const std::string parent = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    const std::string resolved_parent = Resolve(parent);
    if (!resolved_parent.empty())
      resolved = resolved_parent + "/" + path.substr(slash == std::string::npos ? 0 : slash + 1);
  }
  if (!resolved.empty()) {
    for (const std::string& d : dirs_) {
      if (Under(resolved, d)) return absl::OkStatus();
    }
  }
  std::string allowed;
  for (const std::string& d : dirs_) allowed += (allowed.empty() ? "" : ", ") + d;
  return absl::PermissionDeniedError(fmt::format("{}{} is outside the allowed paths ({} {})", path,
                                                 !resolved.empty() && resolved != path ? " (" + resolved + ")" : "",
                                                 flag_, allowed));
}

}  // namespace tfdata
