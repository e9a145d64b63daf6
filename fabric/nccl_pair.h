#pragma once
// The NCCL part of --diag=fabric (issue 32) on a node: one rank of a two-node NCCL
// all_reduce, run by the GPU probe (gpudiag-gpu-probe pair) as a child of the task, so
// that the GPU libraries never load into the task's process and a stuck GPU call is
// killed at the deadline. Rank 0's probe makes the unique id and stays up as NCCL's
// bootstrap root; the id goes to the other node through srun.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace gpudiag::fabric {

struct NcclProbe {
  std::string probe;  // gpudiag-gpu-probe
  std::string cuda_library, nccl_library;  // gpu.libraries ("" : the probe's search)
};

// The probe the task would run: gpu.probe, else the install's libexec; "" with `why`
// when it is not there.
std::string nccl_probe_path(const std::string& configured, std::string& why);

// One line of the probe's output, parsed. Pure: the probe is ours, but its line passes
// through a process a user may have tampered with.
struct ProbeLine {
  std::string id;  // {"id": HEX}
  std::optional<std::uint64_t> bytes, usec;
  std::string error;  // {"error": {"message": ...}}
};
std::optional<ProbeLine> parse_probe_line(const std::string& line);

struct NcclPairResult {
  std::uint64_t bytes = 0, usec = 0;
  std::string error;
};
// Rank 0: `on_id` gets the id as soon as the probe says it (false: give up). Rank 1:
// `id` is rank 0's. The child is killed at `deadline_s`.
NcclPairResult run_nccl_pair(const NcclProbe& p, int rank, const std::string& id, double deadline_s,
                             const std::function<bool(const std::string&)>& on_id);

}  // namespace gpudiag::fabric
