#include "spank/slurm/plugin_args.h"

namespace gpudiag {

Result<PluginArgs> parse_plugin_args(const std::vector<std::string>& args) {
  PluginArgs out;
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return Result<PluginArgs>::failure("gpudiag: plugstack argument '" + a + "' is not key=value (known: config=PATH)");
    std::string key = a.substr(0, eq), value = a.substr(eq + 1);
    if (key == "config") {
      if (value.empty() || value[0] != '/')
        return Result<PluginArgs>::failure("gpudiag: plugstack config= needs an absolute path, not '" + value + "'");
      out.config = value;
      out.config_given = true;
    } else {
      return Result<PluginArgs>::failure("gpudiag: unknown plugstack argument '" + key + "' (known: config=PATH)");
    }
  }
  return out;
}

}  // namespace gpudiag
