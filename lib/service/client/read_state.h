// Read states as stored (issue 22): encoding with a checksum, merging the states of the readers
// of one job, and the state file `tfdata read --save-state` writes atomically.
//
// A state is the ReadState of proto/read_state.proto inside a ReadStateFile, whose xxhash64 makes
// a truncated or corrupted state an error (DataLoss naming where it came from), never a resume
// from the wrong place. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/read_state.pb.h"

namespace tfdata::service {

// The version this build writes and the newest it reads.
inline constexpr uint32_t kReadStateVersion = 1;

std::string EncodeReadState(const ReadState& state);
// `where` names the source in errors ("state file /ckpt/input.state").
absl::StatusOr<ReadState> DecodeReadState(std::string_view bytes, const std::string& where);

// One plan from the states of every reader of a job (one state: itself): what any of them had
// handed out. InvalidArgument when they are of different datasets, split plans or modes.
// `elements` (optional) gets the elements they had handed out in all.
absl::StatusOr<ResumePlan> MergeReadStates(const std::vector<ReadState>& states, int64_t* elements = nullptr);

// Writes the encoded state to `path` atomically: a temporary file beside it, fsync, rename, and an
// fsync of the directory. A crash at any point leaves the old state or the new one.
absl::Status WriteReadStateFile(const std::string& path, const ReadState& state);
absl::StatusOr<ReadState> ReadReadStateFile(const std::string& path);

}  // namespace tfdata::service
