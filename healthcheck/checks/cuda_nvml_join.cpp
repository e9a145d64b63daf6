#include "healthcheck/checks/cuda_nvml_join.h"

#include <fmt/format.h>

#include "probe/probe_json.h"

namespace gpudiag {

int add_cuda_nvml_gaps(CheckResult& out, const nlohmann::json& section) {
  int added = 0;
  if (section.is_object() && section.contains(probe_json::kMissingFromCuda) && section[probe_json::kMissingFromCuda].is_array())
    for (const auto& g : section[probe_json::kMissingFromCuda]) {
      const auto index = probe_field<unsigned long long>(g, probe_json::kIndex);
      const std::string subject = index ? fmt::format("GPU{}", *index) : "GPU?";
      out.add({subject, Status::critical,
               fmt::format("{} ({}) is seen by NVML but not by CUDA, so it took no part in the test", subject,
                           probe_field<std::string>(g, probe_json::kPciBusId).value_or("bus id unknown")),
               "CUDA cannot use this GPU: look for Xid errors in `dmesg` and at `nvidia-smi -q`; reset the GPU "
               "(`nvidia-smi -r`) or reboot"});
      ++added;
    }
  if (section.is_object() && section.contains(probe_json::kGpus) && section[probe_json::kGpus].is_array())
    for (const auto& g : section[probe_json::kGpus])
      if (g.is_object() && g.contains(probe_json::kNvmlIndex) && g[probe_json::kNvmlIndex].is_null()) {
        out.add({"gpus", Status::warning,
                 fmt::format("CUDA device {} ({}) matches no GPU that NVML lists",
                             probe_field<unsigned long long>(g, probe_json::kIndex).value_or(0),
                             probe_field<std::string>(g, probe_json::kPciBusId).value_or("bus id unknown")),
                 "CUDA and NVML disagree about the GPUs: compare `nvidia-smi -L` with the CUDA devices"});
        ++added;
      }
  return added;
}

}  // namespace gpudiag
