#pragma once
// torch's flight recorder, read (issue 31.4). On a hang the watchdog asks each rank for a
// dump through torch's pipe (TORCH_NCCL_DEBUG_INFO_PIPE_FILE, spank/plan/failfast_env.cpp) and
// torch writes <diag dir>/fr_trace.rank<N> (TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank), a
// pickled dict: {"version", "pg_config", "pg_status", "entries": [{"pg_id",
// "collective_seq_id", "profiling_name" ("nccl:all_reduce"), "state" ("scheduled",
// "started", "completed"), "is_p2p", ...}], ...} (FlightRecorder.hpp's *_key constants,
// version 2.3 to 2.10). The collective each rank reached on the default process group
// says which ranks are missing from the one the others wait in.
#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "stacks/verdict/stack_classes.h"

namespace gpudiag {

struct FlightRank {
  int rank = -1;
  bool read = false;
  std::string why;          // !read: why not
  std::string version;      // the dump's "version"
  long long last_seq = -1;  // the highest collective_seq_id on the default group (-1: none)
  std::string last_name;    // its profiling name, "nccl:" dropped
  std::string last_state;   // scheduled, started, completed
};

// Pure: one rank's dump.
FlightRank flight_rank_from_dump(std::string_view bytes, int rank);

// Pure: a verdict line (starting "gpudiag: flight recorder: ") for the ranks' dumps:
// ranks missing from the collective the others reached, or that they all reached the same
// one. `nodes` names each rank's node where the stacks did. "" when nothing was read.
std::string flight_finding(const std::vector<FlightRank>& ranks, const std::vector<RankRef>& nodes);

// The line for a step with no dump at all: torch cannot record here.
std::string flight_absent_finding();

// Reads fr_trace.rank<N> in the open dir `dir_fd` (the fd stays the caller's): regular
// files of `owner` only, opened relative to the fd, at most 64 MiB each.
std::vector<FlightRank> read_flight_dumps(int dir_fd, uid_t owner);
// The same by path: opened once, never through a link.
std::vector<FlightRank> read_flight_dumps(const std::string& dir, uid_t owner);

}  // namespace gpudiag
