#pragma once
// What the plugin writes to slurmd's log (and the step's stderr) when an output relay
// cannot start. The error text comes from the relay code and the system; it is escaped
// (util/control_bytes.h) all the same, so that no text that reaches it, now or later, can
// forge a line in slurmd's log (issue 30).
#include <string>
#include <string_view>

namespace gpudiag {

// The node's relay thread did not start (user_init): each task relays itself.
std::string node_relay_not_started(std::string_view error);
// The node's relay thread refused this task's handoff: the task relays itself.
std::string task_relays_itself(int rank, std::string_view error);
// The task's own relay did not start: the program runs without one.
std::string task_runs_without_relay(int rank, std::string_view error);

}  // namespace gpudiag
