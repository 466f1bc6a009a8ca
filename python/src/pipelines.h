// Pipelines from Python: the schema the builder is generated from (proto/pipeline.proto's
// descriptors), Python values to pipeline text through protobuf reflection, and what a pipeline
// produces (element spec, component names, cardinality). All functions need the GIL.
#pragma once

#include <nanobind/nanobind.h>

#include <optional>
#include <string>
#include <vector>

#include "lib/pipeline/loader.h"

namespace tfdata::python {

// Component names of the pipeline's elements where every component has one (the features of
// parse_example); nullopt otherwise.
std::optional<std::vector<std::string>> ElementNames(const pipeline::Pipeline& pipeline);

// Parses pipeline text (InvalidArgumentError naming `name`:line:col otherwise).
LoadedPipeline ParseText(const std::string& text, const std::string& name);

// Build options for pipelines the user runs or validates in their own process: plugins allowed.
BuildOptions ClientBuildOptions();

// (spec, names, cardinality) as described in python/tfdata/pipeline.py: spec is a list of
// (dtype name, shape tuple with None for unknown dimensions, or None for unknown rank), or None
// when unknown.
nanobind::tuple Describe(const Dataset& dataset, const pipeline::Pipeline& pipeline);

void BindPipelines(nanobind::module_& m);

}  // namespace tfdata::python
