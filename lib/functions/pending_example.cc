// TEMPORARY (removed when parse_example lands).
#include "lib/functions/function.h"
namespace tfdata {
absl::StatusOr<std::unique_ptr<Function>> MakeParseExample(const pipeline::ParseExample&) { return absl::UnimplementedError("parse_example"); }
}
