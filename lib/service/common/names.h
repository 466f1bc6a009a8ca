// "job 7", "task 12": the one way ids are printed in logs and messages, by every role.
#pragma once

#include <cstdint>
#include <string>

namespace tfdata::service {

std::string JobName(int64_t id);
std::string IterationName(int64_t id);
std::string TaskName(int64_t id);
std::string ClientName(int64_t id);

}  // namespace tfdata::service
