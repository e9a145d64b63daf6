#pragma once
// Sets environment variables without overriding the user. A variable that is present
// counts as the user's unless GPUDIAG_INJECTED names it: a batch script inherits what
// the plugin set for the batch step, and a later srun inside it must be free to
// replace those values with the step's own (DESIGN §3).
#include <optional>
#include <string>
#include <string_view>

#include "spank/dist_env.h"

namespace gpudiag {

constexpr const char* kInjectedVar = "GPUDIAG_INJECTED";

class EnvTarget {
 public:
  virtual ~EnvTarget() = default;
  virtual std::optional<std::string> get(const std::string& name) = 0;
  virtual bool set(const std::string& name, const std::string& value) = 0;
};

// The user's value of `name`: present, and not one the plugin injected (what apply_env
// leaves alone).
std::optional<std::string> user_value(EnvTarget& env, const std::string& name);

// Applies `wanted` in order and records what it set in GPUDIAG_INJECTED. Returns the
// names it left alone because the user had set them.
std::vector<std::string> apply_env(EnvTarget& env, const EnvList& wanted);

// Values must be one line of printable text: nothing reaches a task's environment
// that could smuggle a newline or escape sequence.
bool safe_env_value(std::string_view v);

}  // namespace gpudiag
