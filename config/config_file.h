#pragma once
// The config from YAML text or a file, through yaml-cpp (yaml_tree.h): gpudiag-health,
// the CLI and the tests. The plugin reads through its cache (spank/slurm/plugin_config.h)
// and reaches this code only in gpudiag_yaml.so, loaded when the cache misses.
#include <string>
#include <string_view>

#include "config/config.h"
#include "util/result.h"

namespace gpudiag {

// Parses YAML text; `source` names it in error messages.
Result<Config> parse_config(std::string_view yaml_text, const std::string& source);
// Reads and parses a file. Errors start with "gpudiag: " and name file:line; the
// caller adds how to point at another file, which differs between its tools.
Result<Config> load_config_file(const std::string& path);

}  // namespace gpudiag
