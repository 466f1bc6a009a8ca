// TEMPORARY (removed when the image functions land).
#include "lib/functions/function.h"
namespace tfdata {
absl::StatusOr<std::unique_ptr<Function>> MakeDecodeJpeg(const pipeline::DecodeJpeg&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakeResize(const pipeline::Resize&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakeRandomCrop(const pipeline::RandomCrop&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakeCenterCrop(const pipeline::CenterCrop&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakeRandomFlipLeftRight(const pipeline::RandomFlipLeftRight&) { return absl::UnimplementedError("x"); }
absl::StatusOr<std::unique_ptr<Function>> MakeNormalize(const pipeline::Normalize&) { return absl::UnimplementedError("x"); }
}
