#include "spank/plan/env_writer.h"

#include <cstdint>
#include <cstdio>

#include "util/control_bytes.h"
#include "util/text_lists.h"

namespace gpudiag {

bool safe_env_value(std::string_view v) { return is_one_printable_line(v); }

std::string injected_value_tag(std::string_view value) {
  // FNV-1a: a user who changes a value gets a different tag; a collision would need
  // a value chosen for it, and then the user would get the plugin's value back.
  std::uint32_t h = 2166136261u;
  for (unsigned char c : value) {
    h ^= c;
    h *= 16777619u;
  }
  char out[9];
  std::snprintf(out, sizeof out, "%08x", static_cast<unsigned>(h));
  return out;
}

InjectedRecord parse_injected(std::string_view text) {
  InjectedRecord out;
  for (const std::string& entry_text : split_list(text)) {
    std::string_view entry = entry_text;
    auto colon = entry.find(':');
    // An entry without a tag (the names-only record of older versions) proves nothing
    // about the value: it is treated as the user's.
    if (colon == std::string_view::npos || colon == 0) continue;
    out[std::string(entry.substr(0, colon))] = std::string(entry.substr(colon + 1));
  }
  return out;
}

std::string format_injected(const InjectedRecord& record) {
  std::string out;
  for (const auto& [name, tag] : record) out += (out.empty() ? "" : ",") + name + ":" + tag;
  return out;
}

namespace {

// Only a value still equal to what a plugin injected is ours to replace: one the user
// exported since (even inside a step) stays.
bool still_injected(const InjectedRecord& record, const std::string& name, const std::string& present) {
  auto it = record.find(name);
  return it != record.end() && it->second == injected_value_tag(present);
}

}  // namespace

std::optional<std::string> user_value(EnvTarget& env, const std::string& name) {
  auto v = env.get(name);
  if (!v || still_injected(parse_injected(env.get(kInjectedVar).value_or("")), name, *v)) return std::nullopt;
  return v;
}

std::vector<std::string> apply_env(EnvTarget& env, const EnvList& wanted) {
  const std::optional<std::string> before = env.get(kInjectedVar);
  InjectedRecord record = parse_injected(before.value_or(""));
  std::vector<std::string> kept;
  for (const auto& [name, value] : wanted) {
    if (!safe_env_value(value)) continue;
    auto present = env.get(name);
    if (present) {
      if (!still_injected(record, name, *present)) {
        kept.push_back(name);
        record.erase(name);
        continue;
      }
      // Already in place (a nested step's NCCL defaults, as the outer step set them): in a
      // forked task each spank_setenv costs Slurm a 256 KiB buffer (issue 34).
      if (*present == value) continue;
    }
    if (env.set(name, value)) record[name] = injected_value_tag(value);
  }
  std::string text = format_injected(record);
  if (text != before) env.set(kInjectedVar, text);
  return kept;
}

}  // namespace gpudiag
