#include "spank/env_writer.h"

#include <set>

namespace gpudiag {

bool safe_env_value(std::string_view v) {
  for (unsigned char c : v)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

namespace {

std::set<std::string> injected_names(EnvTarget& env) {
  std::set<std::string> injected;
  if (auto list = env.get(kInjectedVar)) {
    std::size_t start = 0;
    while (start <= list->size()) {
      auto comma = list->find(',', start);
      std::string name = list->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!name.empty()) injected.insert(name);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return injected;
}

}  // namespace

std::optional<std::string> user_value(EnvTarget& env, const std::string& name) {
  auto v = env.get(name);
  if (!v || injected_names(env).count(name)) return std::nullopt;
  return v;
}

std::vector<std::string> apply_env(EnvTarget& env, const EnvList& wanted) {
  std::set<std::string> injected = injected_names(env);
  std::vector<std::string> kept;
  std::set<std::string> now = injected;
  for (const auto& [name, value] : wanted) {
    if (!safe_env_value(value)) continue;
    if (env.get(name) && !injected.count(name)) {
      kept.push_back(name);
      now.erase(name);
      continue;
    }
    if (env.set(name, value)) now.insert(name);
  }
  std::string list;
  for (const auto& n : now) list += (list.empty() ? "" : ",") + n;
  env.set(kInjectedVar, list);
  return kept;
}

}  // namespace gpudiag
