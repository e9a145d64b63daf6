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
// Across nodes (hang_spread.h): the node that declares a hang signals the step's other
// nodes through Slurm, each of them writes its own hang.<host>.txt, and no node kills
// its tasks before every node's report is in (or a deadline passed). The marker says
// "dump" while that goes on and "kill" once the SIGTERM is out: only then do the node's
// other relays start their SIGKILL countdown.
//
// With the CPU rule, a task whose processes used at least kBusyCpuShare of a core since
// the last look counts as making progress even when it prints nothing.
//
// Hostile neighbours (other users on the node, who may write where the report goes):
// - The state dir is /dev/shm/gpudiag-<uid>-<step>, whose name anyone can predict and
//   create first. A name that is not this user's private directory (lstat: a directory,
//   owned by the user, no group or other access, not a link) is skipped for the next of
//   a fixed list (<name>.1 ... <name>.8); the rule is util/private_file.h's, and once
//   picked the dir is used through an fd. The list is fixed so that the node's tasks,
//   which start at the same time and cannot talk yet, all walk it the same way and meet
//   in the first name that is theirs (mkdir makes exactly one of them its creator). The
//   creator says on stderr which name was taken and by whom. When every name is taken,
//   each task watches only itself, in a private dir of its own (mkdtemp), and says so:
//   a neighbour can weaken the watchdog that way, never switch it off. Never silent.
//   Not /run/user/<uid>, though only the user can create names there: logind removes
//   it when the user's last login session on the node ends, which would pull the state
//   away mid-step. A name nobody can guess would need a secret the tasks share before
//   they start, which only the plugin's slurmstepd side could hand down.
//   Left open: a neighbour who deletes a squatted name in the instant between two tasks'
//   walks can split the node's tasks into two groups that each watch themselves.
// - The report is created exclusively (util/private_file.h: O_CREAT|O_EXCL|O_NOFOLLOW|
//   O_NONBLOCK, 0600, then fstat: a regular file): a FIFO or link at hang.<host>.txt is
//   never opened, and the report goes to hang.<host>.<random>.txt instead (or, failing
//   that, to stderr). The
//   message names where it went. The diag dir is opened once (O_DIRECTORY|O_NOFOLLOW,
//   then fstat: still this user's private dir) and the report made with openat. A step
//   without a diag dir (a neighbour took its name) still has the watchdog: the report
//   goes to stderr.
// - Nothing delays the kill for long: the report has one overall deadline
//   (report_timeout_s), every step in the diag dir runs in a child with a deadline
//   (diag_dir_timeout_s, hang_diag_dir.h: a diag dir on a hung NFS mount costs that one
//   deadline, and the report then goes to stderr), and the relay keeps ticking after
//   the program closed its pipes.
#include <sys/types.h>

#include <string>
#include <vector>

#include "spank/plan/hang_watch.h"

namespace gpudiag {

class HangDiagDir;

constexpr int kHangExitCode = 200;   // documented in README and gpudiag(8)
constexpr double kBusyCpuShare = 0.10;


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
  // Something the user should know although the watchdog runs (a squatted name).
  const std::string& notice() const { return notice_; }
  const std::string& state_dir() const { return w_.state_dir; }
  void output_seen();  // cheap: updates the mtime at most once a second
  void tick();         // about once a second
  // True when a relay of this node ended the tasks for a hang.
  bool ended_for_hang() const;

 private:
  // `asked`: another node declared the hang (SIGURG), this one dumps for the step.
  void declare_hang(bool asked);
  void wait_for_other_nodes(double start, bool torch_asked, HangDiagDir& diag) const;
  std::vector<std::pair<int, pid_t>> node_tasks() const;  // rank, program pid
  void signal_trees(int sig);

  HangWatch w_;
  pid_t child_;
  int fd_ = -1;      // this task's file in the state dir
  int dir_fd_ = -1;  // the state dir, checked private (util/private_file.h)
  std::string my_name_, my_file_;
  std::string error_;
  std::string notice_;
  double last_touch_ = 0;
  double last_cpu_ = -1, last_cpu_at_ = 0;
  double kill_at_ = 0;  // when SIGKILL follows the SIGTERM; 0: not pending
  pid_t listener_ = 0;  // passes Slurm's SIGURG on to this relay (hang_spread.h)
};

// Pure: which state dir to use. What lstat said about each candidate, in order.
enum class DirFact { missing, ours, taken };
struct DirPick {
  int use = -1;     // the first candidate that is ours
  int create = -1;  // when none is: the first missing one, to mkdir and look again
};
DirPick pick_state_dir(const std::vector<DirFact>& candidates);

}  // namespace gpudiag
