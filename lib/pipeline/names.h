// The names of a pipeline's element components, as far as its text tells them: parse_example's
// features name its outputs, select and zip carry names along. Used for what trainers receive (a
// dict by feature name) and what a Python function receives. Stateless, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "proto/pipeline.pb.h"

namespace tfdata {

// One name per component, "" for a component without one; nullopt when the components are not
// known (after a plugin, or a Python function without output_names).
using ComponentNames = std::optional<std::vector<std::string>>;

ComponentNames NamesAfterFunction(ComponentNames names, const pipeline::Function& fn);
// The names after `p`'s ops, `names` being those of its input (nullopt for a top-level pipeline).
ComponentNames NamesOf(const pipeline::Pipeline& p, ComponentNames names);
// `names` when every component has a name and no two share one (then the element can be a dict);
// otherwise nullopt.
ComponentNames DistinctNames(ComponentNames names);

}  // namespace tfdata
