// Stable pipeline fingerprints: the same pipeline gives the same fingerprint on every run and
// machine, so the dispatcher can de-duplicate registrations.
#pragma once

#include <string>

#include "proto/pipeline.pb.h"

namespace tfdata {

// 32 hex digits: XXH3-128 of the pipeline's deterministic binary serialization. Pipelines that
// differ only in how they were written (text spacing, field order, explicit default values of
// plain fields) share a fingerprint.
std::string PipelineFingerprint(const pipeline::Pipeline& pipeline);

}  // namespace tfdata
