#pragma once
// YAML text to the config's tree (config_tree.h): the one place gpudiag uses yaml-cpp.
// gpudiag-health and the CLI link it; the plugin loads it only when its config cache
// misses (config/yaml_module.cpp), so that srun and slurmstepd carry neither yaml-cpp nor
// the shared C++ runtime it needs on a launch whose config did not change.
#include <string>
#include <string_view>

#include "config/config_tree.h"
#include "util/result.h"

namespace gpudiag {

// Errors: "gpudiag: SOURCE:LINE: not valid YAML: ..." (or "too large" past the tree's bounds).
Result<ConfigNode> yaml_to_tree(std::string_view text, const std::string& source);

}  // namespace gpudiag
