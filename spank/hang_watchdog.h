#pragma once
// The hang watchdog, run by each task's output relay. The tasks of a step on one node
// share a small private directory on local storage (never the shared file system):
// each relay owns a file there whose mtime is its task's last output. When no task of
// the node has written for the duration, the first relay to notice (O_EXCL on a
// marker file) asks torch for its flight-recorder dump, writes hang.<host>.txt with
// every process's stacks into the diag dir, prints one line to stderr and, with
// action kill, ends the node's tasks: SIGTERM, then SIGKILL after the grace period.
// Every relay whose task was ended that way exits with kHangExitCode.
//
// With the CPU rule, a task whose processes used at least kBusyCpuShare of a core since
// the last look counts as making progress even when it prints nothing.
#include <sys/types.h>

#include <string>
#include <vector>

namespace gpudiag {

constexpr int kHangExitCode = 200;   // documented in README and gpudiag(8)
constexpr double kBusyCpuShare = 0.10;

struct HangWatch {
  double duration_s = 0;     // 0: no watchdog
  bool kill = true;          // false: report only
  bool cpu = false;          // the CPU rule
  double kill_grace_s = 10;
  std::string state_dir;     // node-local, private to the user: one per step and node
  std::string diag_dir;      // hang report and torch dumps go here
  std::string host;          // short node name, for the file name and the message
  std::string step;          // "JOB.STEP", for the report
  int rank = 0;
};

// Pure: the node is hung when every task's last progress is `duration` old or older.
bool node_silent(double now, const std::vector<double>& last_progress, double duration);

class HangWatchdog {
 public:
  // Joins the node's state dir; error() says why not (then the watchdog is off).
  HangWatchdog(HangWatch w, pid_t child);
  ~HangWatchdog();
  HangWatchdog(const HangWatchdog&) = delete;
  HangWatchdog& operator=(const HangWatchdog&) = delete;

  bool active() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  void output_seen();  // cheap: updates the mtime at most once a second
  void tick();         // about once a second
  // True when a relay of this node ended the tasks for a hang.
  bool ended_for_hang() const;

 private:
  void declare_hang();
  std::vector<std::pair<int, pid_t>> node_tasks() const;  // rank, program pid
  void signal_trees(int sig);

  HangWatch w_;
  pid_t child_;
  int fd_ = -1;
  std::string my_file_;
  std::string error_;
  double last_touch_ = 0;
  double last_cpu_ = -1, last_cpu_at_ = 0;
  double kill_at_ = 0;  // when SIGKILL follows the SIGTERM; 0: not pending
};

// /dev/shm/gpudiag-<uid>-<step> (or under TMPDIR when /dev/shm is missing).
std::string hang_state_dir(unsigned uid, const std::string& step);

}  // namespace gpudiag
