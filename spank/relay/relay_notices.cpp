#include "spank/relay/relay_notices.h"

#include "util/control_bytes.h"

namespace gpudiag {

std::string node_relay_not_started(std::string_view error) {
  return "gpudiag: each task relays its own output: " + escape_control(error);
}

std::string task_relays_itself(int rank, std::string_view error) {
  return "gpudiag: task " + std::to_string(rank) + " relays its own output (the node's relay thread refused it: " +
         escape_control(error) + ")";
}

std::string task_runs_without_relay(int rank, std::string_view error) {
  return "gpudiag: task " + std::to_string(rank) + " runs without the output relay (no prefix, no hang watchdog): " +
         escape_control(error);
}

}  // namespace gpudiag
