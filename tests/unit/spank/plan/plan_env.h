#pragma once
// Environments in the plan's tests: a task's in a map (EnvTarget, as spank_getenv/setenv
// see it), and one variable of a plan's list.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "spank/plan/dist_env.h"
#include "spank/plan/env_writer.h"

namespace gpudiag::test {

struct MapEnv : EnvTarget {
  std::map<std::string, std::string> vars;
  std::optional<std::string> get(const std::string& n) override {
    auto it = vars.find(n);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  bool set(const std::string& n, const std::string& v) override {
    vars[n] = v;
    return true;
  }
};

// An environment array (NAME=VALUE entries, null-terminated), as S_JOB_ENV gives a task.
struct EnvArray {
  std::vector<std::string> entries;
  std::vector<const char*> ptrs;
  explicit EnvArray(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) entries.push_back(k + "=" + v);
    for (const auto& e : entries) ptrs.push_back(e.c_str());
    ptrs.push_back(nullptr);
  }
};

inline std::optional<std::string> env_of(const EnvList& env, const std::string& name) {
  for (const auto& [k, v] : env)
    if (k == name) return v;
  return std::nullopt;
}

}  // namespace gpudiag::test
