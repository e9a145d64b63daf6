#pragma once
// plugstack.conf arguments: `required .../gpudiag.so [config=PATH] [config_cache=DIR|off]`. Strict: an
// unknown key or a malformed argument is an error, never silently ignored.
#include <string>
#include <vector>

#include "util/result.h"

namespace gpudiag {

// Where root keeps the parsed config between steps (spank/slurm/plugin_config.h).
constexpr const char* kDefaultConfigCacheDir = "/run/gpudiag";

struct PluginArgs {
  std::string config;        // empty: /etc/gpudiag/gpudiag.yaml if it exists
  bool config_given = false; // then a missing file is an error
  std::string config_cache = kDefaultConfigCacheDir;  // "": none (config_cache=off)
};

Result<PluginArgs> parse_plugin_args(const std::vector<std::string>& args);

}  // namespace gpudiag
