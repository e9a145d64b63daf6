#include "healthcheck/cuda_nvml_join.h"

#include <fmt/format.h>

#include "probe/probe_json.h"

namespace gpudiag {

int add_cuda_nvml_gaps(CheckResult& out, const nlohmann::json& section) {
  int added = 0;
  if (section.is_object() && section.contains("missing_from_cuda") && section["missing_from_cuda"].is_array())
    for (const auto& g : section["missing_from_cuda"]) {
      const auto index = probe_field<unsigned long long>(g, "index");
      const std::string subject = index ? fmt::format("GPU{}", *index) : "GPU?";
      out.add({subject, Status::critical,
               fmt::format("{} ({}) is seen by NVML but not by CUDA, so it took no part in the test", subject,
                           probe_field<std::string>(g, "pci_bus_id").value_or("bus id unknown")),
               "CUDA cannot use this GPU: look for Xid errors in `dmesg` and at `nvidia-smi -q`; reset the GPU "
               "(`nvidia-smi -r`) or reboot"});
      ++added;
    }
  if (section.is_object() && section.contains("gpus") && section["gpus"].is_array())
    for (const auto& g : section["gpus"])
      if (g.is_object() && g.contains("nvml_index") && g["nvml_index"].is_null()) {
        out.add({"gpus", Status::warning,
                 fmt::format("CUDA device {} ({}) matches no GPU that NVML lists",
                             probe_field<unsigned long long>(g, "index").value_or(0),
                             probe_field<std::string>(g, "pci_bus_id").value_or("bus id unknown")),
                 "CUDA and NVML disagree about the GPUs: compare `nvidia-smi -L` with the CUDA devices"});
        ++added;
      }
  return added;
}

}  // namespace gpudiag
