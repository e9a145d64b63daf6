#pragma once
// What a check remembers between runs ("since the last run"): one small JSON file per
// node, <state_dir>/<node>.json, {"version": 1, "node": ..., "checks": {"xid": ...}}.
// Written atomically, 0600 in a 0700 directory; never through a symlink; read and
// written within a deadline (util/private_file.h). A file that is missing, garbage,
// unreadable or on a filesystem that does not answer means "no previous run" (with a
// note saying why), never an error that stops the checks.
#include <nlohmann/json.hpp>

#include <mutex>
#include <string>
#include <vector>

#include "util/private_file.h"
#include "util/result.h"

namespace gpudiag {

constexpr const char* kDefaultStateDir = "/var/lib/gpudiag";

// The checks that read and write run state: the state file is only opened (and its
// directory only created) when one of them runs.
bool uses_run_state(const std::vector<std::string>& checks);

class RunState {
 public:
  // No state at all (e.g. --fs-root without --state-dir): every check sees a first run.
  static RunState disabled(std::string why);
  static RunState load(const std::string& dir, const std::string& node, double timeout_s = kFileTimeoutS);

  bool enabled() const { return enabled_; }
  // Why there is no previous state although state is kept (garbage, unreadable,
  // disabled); empty for a good file or a plain first run.
  const std::string& note() const { return note_; }
  const std::string& path() const { return path_; }
  // The check's stored value, null when there is none.
  nlohmann::json previous(const std::string& check) const;
  // Stored by save(); checks run one at a time, but the runner's thread may outlive a
  // timed-out run, so access is locked.
  void set(const std::string& check, nlohmann::json value);
  // Writes the file when something was set; the checks that did not run keep theirs.
  Result<bool> save() const;

  RunState(RunState&& o) noexcept;
  RunState& operator=(RunState&&) = delete;

 private:
  RunState() = default;
  bool enabled_ = false;
  std::string path_, note_, node_;
  FilePlace place_;
  double timeout_s_ = kFileTimeoutS;
  nlohmann::json previous_ = nlohmann::json::object();
  nlohmann::json updates_ = nlohmann::json::object();
  mutable std::mutex mu_;
};

}  // namespace gpudiag
