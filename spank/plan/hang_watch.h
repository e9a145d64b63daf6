#pragma once
// What the plan hands the hang watchdog (watchdog/hang_watchdog.h) for one task, and
// where the node's tasks of a step meet. The plan fills it in; the watchdog carries it out.
#include <string>

namespace gpudiag {

struct HangWatch {
  double duration_s = 0;     // 0: no watchdog
  bool kill = true;          // false: report only
  bool cpu = false;          // the CPU rule
  double kill_grace_s = 10;
  double report_timeout_s = 10;  // the whole stack report, all tools and processes together
  // Each step in the diag dir, and all of them together once one got no answer (a hung
  // NFS mount): hang_diag_dir.h.
  double diag_dir_timeout_s = 5;
  std::string state_dir;     // node-local, private to the user: one per step and node
  std::string diag_dir;      // hang report and torch dumps go here
  std::string host;          // short node name, for the file name and the message
  std::string step;          // "JOB.STEP", for the report
  int rank = 0;
  int nodes = 1;             // the step's nodes: with more than one, a hang spreads (hang_spread.h)
};

// Where the node's tasks of a step meet: /dev/shm/gpudiag-<uid>-<step> (or under TMPDIR
// when /dev/shm is missing). The watchdog may end up in a sibling of it (hang_watchdog.h).
std::string hang_state_dir(unsigned uid, const std::string& step);

}  // namespace gpudiag
