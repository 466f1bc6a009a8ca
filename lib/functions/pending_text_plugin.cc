// TEMPORARY (removed when tokenize and plugins land).
#include "lib/functions/function.h"
namespace tfdata {
absl::StatusOr<std::unique_ptr<Function>> MakeTokenize(const pipeline::Tokenize&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakePlugin(const pipeline::Plugin&, const FunctionOptions&) { return absl::UnimplementedError("x"); }
}
