#include "healthcheck/state/run_state.h"

#include <algorithm>

#include "util/private_file.h"

namespace gpudiag {
namespace {

constexpr int kVersion = 1;
constexpr std::size_t kMaxStateBytes = 1 << 20;
const char* const kStatefulChecks[] = {"xid", "ibcounters"};

// A node name becomes a file name: nothing that could leave the directory.
std::string file_name_for(const std::string& node) {
  std::string out;
  for (char c : node) {
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                      c == '_' || c == '.';
    out += safe ? c : '_';
  }
  if (out.empty() || out[0] == '.') out = "node" + out;
  return out + ".json";
}

nlohmann::json checks_of(const std::string& text, const std::string& path, std::string& note) {
  auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || doc.value("version", 0) != kVersion || !doc.contains("checks") ||
      !doc["checks"].is_object()) {
    note = "run state " + path + ": not a gpudiag run state file: treated as no previous run";
    return nlohmann::json::object();
  }
  return doc["checks"];
}

}  // namespace

bool uses_run_state(const std::vector<std::string>& checks) {
  return std::any_of(checks.begin(), checks.end(), [](const std::string& c) {
    return std::any_of(std::begin(kStatefulChecks), std::end(kStatefulChecks), [&](const char* s) { return c == s; });
  });
}

RunState::RunState(RunState&& o) noexcept
    : enabled_(o.enabled_),
      path_(std::move(o.path_)),
      note_(std::move(o.note_)),
      node_(std::move(o.node_)),
      place_(std::move(o.place_)),
      timeout_s_(o.timeout_s_),
      previous_(std::move(o.previous_)),
      updates_(std::move(o.updates_)) {}

RunState RunState::disabled(std::string why) {
  RunState s;
  s.note_ = std::move(why);
  return s;
}

RunState RunState::load(const std::string& dir, const std::string& node, double timeout_s) {
  RunState s;
  s.enabled_ = true;
  s.node_ = node;
  s.timeout_s_ = timeout_s;
  s.place_.dir = dir;
  s.place_.name = file_name_for(node);
  s.place_.shown = s.path_ = dir + "/" + s.place_.name;
  s.place_.private_dir = true;
  auto read = read_file_bounded(s.place_, kMaxStateBytes, timeout_s);
  switch (read.kind) {
    case FileRead::read: s.previous_ = checks_of(read.bytes, s.path_, s.note_); break;
    case FileRead::no_dir:  // created on save: a first run
    case FileRead::no_file: break;
    case FileRead::failed: s.note_ = "run state " + read.error + ": treated as no previous run"; break;
  }
  return s;
}

nlohmann::json RunState::previous(const std::string& check) const {
  std::lock_guard lock(mu_);
  auto it = previous_.find(check);
  return it == previous_.end() ? nlohmann::json() : *it;
}

void RunState::set(const std::string& check, nlohmann::json value) {
  std::lock_guard lock(mu_);
  updates_[check] = std::move(value);
}

Result<bool> RunState::save() const {
  std::lock_guard lock(mu_);
  if (!enabled_ || updates_.empty()) return false;
  nlohmann::json checks = previous_;
  for (auto it = updates_.begin(); it != updates_.end(); ++it) checks[it.key()] = it.value();
  nlohmann::json doc = {{"version", kVersion}, {"node", node_}, {"checks", checks}};
  // A node name that is not UTF-8 must not lose the state (nlohmann throws by default).
  const std::string text = doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  auto written = write_file_atomically(place_, text, 0600, timeout_s_);
  if (!written)
    return Result<bool>::failure(written.error() + " (the run state: point --state-dir or health.state_dir at a "
                                 "local directory this user owns)");
  return written;
}

}  // namespace gpudiag
