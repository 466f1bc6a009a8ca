#include "lib/service/common/names.h"

#include "absl/strings/str_cat.h"

namespace tfdata::service {

std::string JobName(int64_t id) { return absl::StrCat("job ", id); }
std::string IterationName(int64_t id) { return absl::StrCat("iteration ", id); }
std::string TaskName(int64_t id) { return absl::StrCat("task ", id); }
std::string ClientName(int64_t id) { return absl::StrCat("client ", id); }

}  // namespace tfdata::service
