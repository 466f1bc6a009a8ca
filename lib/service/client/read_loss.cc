#include "lib/service/client/read_loss.h"

#include <fmt/format.h>

namespace tfdata::service {

std::string DescribeReadLoss(const Reader& reader) {
  const int64_t dropped = reader.tasks_dropped();
  // Exactly once: a dropped task's splits were produced again elsewhere; nothing was lost.
  if (dropped == 0 || reader.exactly_once()) return "";
  const int64_t lost = reader.splits_lost();
  std::string workers;
  for (const std::string& w : reader.dropped_workers()) workers += (workers.empty() ? "" : ", ") + w;
  return fmt::format("{} task(s) dropped: worker unreachable: {}{}", dropped, workers,
                     lost > 0 ? fmt::format("; {} split(s) lost", lost) : "");
}

}  // namespace tfdata::service
