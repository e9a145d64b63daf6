#pragma once
// Streams NCCL debug lines from any number of files into a per-process summary: the
// memory used depends on the number of processes and distinct warnings, never on the
// length of the logs (collective tracking keeps a bounded window).
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/rank_cap.h"

namespace gpudiag {

struct CommInfo {
  std::string comm_id;
  int rank = -1, nranks = 0;
  bool started = false, complete = false;
  // The last collective logged on it (COLL lines): where this rank's collectives stopped.
  std::uint64_t last_op = 0;
  std::string last_coll;  // "" when none was logged
};

// One NCCL process (host:pid), usually one rank.
struct NcclProcess {
  std::string host, pid, source;  // source: the first file it appeared in
  std::string version, network, plugin, oob;
  std::vector<std::string> ib_devices;      // "mlx5_0:1/IB"
  std::vector<std::string> socket_devices;  // "eth0"
  std::vector<std::string> gdr_disabled;    // HCAs logged with "GPU Direct RDMA Disabled"
  bool ib_no_device = false;                // "NET/IB : No device found."
  bool ib_disabled_by_env = false;          // "NCCL_IB_DISABLE set by environment to 1."
  std::string socket_ifname, ib_hca;        // NCCL_SOCKET_IFNAME / NCCL_IB_HCA as NCCL logged them
  bool no_socket_iface = false;             // "Bootstrap : no socket interface found": NCCL never started
  // std::less<> lets a string_view look up without building a string per line.
  std::map<std::string, std::uint64_t, std::less<>> transports, collectives;
  std::map<int, std::uint64_t> ib_errors;   // completion status -> count
  std::map<std::string, CommInfo, std::less<>> comms;  // by comm pointer
  std::uint64_t warnings = 0, lines = 0;
  bool shm_failed = false, reg_mr_failed = false, p2p_disabled = false, duplicate_gpu = false;

  // The comm with the most ranks stands for the process's place in the job.
  const CommInfo* world() const;
  std::string label() const;  // "host:rank" or "host:pid <pid>"
};

struct WarnGroup {
  std::string text;  // the message with pointers blanked
  std::uint64_t count = 0;
  std::set<std::string> who;  // process labels, filled at finish
  std::set<std::string> keys; // host:pid while streaming
};

struct CollMismatch {
  std::string group, op_count;
  std::vector<std::pair<std::string, std::string>> calls;  // (process key, collective)
};

struct NcclLogAnalysis {
  std::vector<NcclProcess> processes;  // sorted by rank, then host and pid
  std::vector<WarnGroup> warnings;     // most frequent first
  std::uint64_t warn_groups_dropped = 0;  // WARN lines whose text came after kMaxWarnGroups others
  std::uint64_t process_lines_dropped = 0;  // lines of processes that came after kMaxProcesses others
  std::vector<CollMismatch> mismatches;
  std::uint64_t lines = 0, nccl_lines = 0, bytes = 0;
  std::vector<std::string> files;
  std::vector<std::string> read_errors;  // "path: why"
  bool truncated = false;                // a byte budget stopped the reading
};

class NcclLogAnalyzer {
 public:
  // `source` names the file in reports; it is copied only for a new process.
  void add_line(std::string_view line, std::string_view source);
  void add_file_name(const std::string& f) { out_.files.push_back(f); }
  void add_read_error(const std::string& e) { out_.read_errors.push_back(e); }
  void add_bytes(std::uint64_t n) { out_.bytes += n; }
  void set_truncated() { out_.truncated = true; }
  NcclLogAnalysis finish();

 private:
  // nullptr for a new process once kMaxProcesses are kept.
  NcclProcess* process(std::string_view host, std::string_view pid, std::string_view source);
  void note_collective(NcclProcess& p, const std::string& key, std::string_view name, std::string_view op_count,
                       std::string_view comm);
  void note_warning(std::string_view msg, const std::string& key);
  void apply_bare_versions();

  std::unordered_map<std::string, NcclProcess> procs_;
  std::string key_;  // reused buffer: no allocation per line
  std::map<std::string, WarnGroup> warns_;
  // (group, opCount) -> (first caller's key, its collective); a bounded window.
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> ops_;
  std::map<std::pair<std::string, std::string>, CollMismatch> mismatches_;
  // source -> the version of its bare "NCCL version X" lines ("" when they disagree).
  std::map<std::string, std::string, std::less<>> bare_versions_;
  NcclLogAnalysis out_;
};

// What one analysis keeps, whatever the logs hold: a log that names a new process or a
// new warning text on every line (a runaway job, or any user's planted file) costs at
// most these, not memory in proportion to its length. The report says when one was hit.
constexpr std::size_t kMaxProcesses = kMaxRanks;
constexpr std::size_t kMaxWarnGroups = 200;
constexpr std::size_t kMaxTrackedOps = 1 << 16;

}  // namespace gpudiag
