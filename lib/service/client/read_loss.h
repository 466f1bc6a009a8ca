// What a read lost, in words: one sentence for every place that reports it (the CLI's summary and
// exit-code-4 warning, the Python iterator's DataLossWarning), so that they say the same thing.
#pragma once

#include <string>

#include "lib/service/client/reader.h"

namespace tfdata::service {

// "" when the reader dropped no task; otherwise e.g. "2 task(s) dropped: worker unreachable:
// localhost:5051, localhost:5052; 3 split(s) lost". Thread-safe (the reader's counters are).
std::string DescribeReadLoss(const Reader& reader);

}  // namespace tfdata::service
