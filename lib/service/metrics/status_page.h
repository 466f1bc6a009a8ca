// Renderings of the dispatcher's status (Dispatcher::GetStatus, proto/status.proto): the status
// page at / on the dispatcher's --metrics-port, /status.json, and `tfdata status`'s table. All
// three come from one DispatcherStatus; these functions only lay it out.
//
// Pure functions: thread-safe.
#pragma once

#include <string>

#include "proto/status.pb.h"

namespace tfdata::service {

// Plain HTML with a little CSS, refreshing itself every `refresh_seconds`. Names from users
// (addresses, tags, job names, ops) are escaped. Rows carry classes and data attributes
// (tr.worker[data-address], tr.job[data-job]) for scripts and tests.
std::string StatusHtml(const DispatcherStatus& status, int refresh_seconds = 5);
// protobuf's JSON mapping of DispatcherStatus, with the .proto's field names and every field
// (zeros too); 64-bit integers are strings, as the mapping says.
std::string StatusJson(const DispatcherStatus& status);
// Aligned text tables for a terminal.
std::string StatusText(const DispatcherStatus& status);

// "12.3 MB/s"-style amounts for people (decimal units).
std::string HumanBytes(double bytes);

}  // namespace tfdata::service
