#pragma once
// What the plan hands the output relay (relay/output_relay.h, relay/node_relay.h) for one
// task: which streams to relay, the tag, the line bound and the watchdog's settings.
#include <cstddef>
#include <string>

#include "spank/plan/hang_watch.h"

namespace gpudiag {

// slurmstepd's message bound (SLURM_IO_MAX_MSG_LEN): one line per message.
constexpr std::size_t kSlurmIoMessage = 1024;

struct RelayPlan {
  std::string tag;       // e.g. "[node7:3]"
  bool out = false;      // relay stdout (fd 1)
  bool err = false;      // relay stderr (fd 2)
  bool tag_out = true;   // tag the lines of a relayed stream, or pass its bytes as they are
  bool tag_err = true;
  std::size_t max_line = kSlurmIoMessage;
  HangWatch hang;        // duration 0: no watchdog
  // slurmstepd signals only its own children, the relay (proctrack/cgroup, proctrack_kind.h):
  // pass its signals on too. false: they reach the program directly, and passing them
  // on would deliver them twice.
  bool forward_stepd_signals = false;
};

}  // namespace gpudiag
