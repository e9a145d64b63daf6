#pragma once
// Sets environment variables without overriding the user. A variable that is present
// counts as the user's unless GPUDIAG_INJECTED records it with the tag of its present
// value: a step's tasks inherit what the plugin set for them, and a nested srun must be
// free to replace those values with its own (ARCHITECTURE §3), but not a value the user
// exported since (issue 21.7: `export NCCL_SOCKET_IFNAME=eth0` inside `srun --pty bash`).
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "spank/plan/dist_env.h"

namespace gpudiag {

constexpr const char* kInjectedVar = "GPUDIAG_INJECTED";

// What an EnvTarget returns for a variable that is present but longer than it can read
// (slurmstepd's spank_getenv takes 8 KiB): the user's, and never a value to copy.
constexpr std::string_view kUnreadableValue = "(too long)";

class EnvTarget {
 public:
  virtual ~EnvTarget() = default;
  virtual std::optional<std::string> get(const std::string& name) = 0;
  virtual bool set(const std::string& name, const std::string& value) = 0;
};

// GPUDIAG_INJECTED is NAME:TAG pairs joined by ',' (TAG: 8 hex digits of a hash of the
// value set), one per variable the plugin set: bounded by the plugin's own list.
using InjectedRecord = std::map<std::string, std::string>;
std::string injected_value_tag(std::string_view value);
InjectedRecord parse_injected(std::string_view text);
std::string format_injected(const InjectedRecord& record);
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
