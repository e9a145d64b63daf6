#include "spank/plan/node_env.h"

namespace gpudiag {
namespace {

const std::string* value_in(const EnvList& list, std::string_view name) {
  for (const auto& [n, v] : list)
    if (n == name) return &v;
  return nullptr;
}

// Where a name is set twice the last value stands, as spank_setenv would leave it.
bool set_again_later(const EnvList& list, std::size_t i) {
  for (std::size_t j = i + 1; j < list.size(); ++j)
    if (list[j].first == list[i].first) return true;
  return false;
}

}  // namespace

NodeEnv node_env_of(const PreparedTask& first, EnvTarget& job_env) {
  NodeEnv node;
  for (const auto& [name, value] : first.sets)
    if (!value_in(node.added, name) && !job_env.get(name)) node.added.emplace_back(name, value);
  return node;
}

bool added_by_node(const NodeEnv& node, std::string_view name) { return value_in(node.added, name) != nullptr; }

bool node_env_intact(const NodeEnv& node, const char* const* env) {
  for (const auto& [name, value] : node.added) {
    const auto now = env_lookup(env, name);
    if (!now || *now != value) return false;
  }
  return true;
}

std::vector<EnvEdit> task_env_edits(const NodeEnv& node, const EnvList& task_sets) {
  std::vector<EnvEdit> edits;
  for (std::size_t i = 0; i < task_sets.size(); ++i) {
    const auto& [name, value] = task_sets[i];
    if (set_again_later(task_sets, i)) continue;
    const std::string* added = value_in(node.added, name);
    if (!added || *added != value) edits.push_back({name, value});
  }
  for (const auto& [name, value] : node.added)
    if (!value_in(task_sets, name)) edits.push_back({name, std::nullopt});
  return edits;
}

std::vector<EnvEdit> node_env_removal(const NodeEnv& node, const char* const* env) {
  std::vector<EnvEdit> edits;
  for (const auto& [name, value] : node.added) {
    const auto now = env_lookup(env, name);
    if (now && *now == value) edits.push_back({name, std::nullopt});
  }
  return edits;
}

}  // namespace gpudiag
