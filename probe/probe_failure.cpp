#include "probe/probe_failure.h"

#include "probe/nvml_api.h"
#include "probe/probe_options.h"

namespace gpudiag::probe {

const char* const kOldDriverHint =
    "this driver is older than gpudiag supports (it needs R470, CUDA 11.4, or later; R535 and R550 work): upgrade "
    "the driver, or point gpu.libraries at the right library";

nlohmann::json nvml_init_failure(int nvml_code, const std::string& text) {
  const std::string message = "nvmlInit failed: " + text;
  if (nvml_code == kNvmlLibRmVersionMismatch)
    return probe_error("driver_fault", message + ": the loaded kernel module and the user-space driver differ",
                       "the driver was upgraded without a reboot: reboot the node (or unload and reload the nvidia "
                       "kernel modules)");
  if (nvml_code == kNvmlDriverNotLoaded)
    return probe_error("driver", message, "the NVIDIA kernel module is not loaded: `modprobe nvidia`, then look at `dmesg`");
  return probe_error("driver", message, "look at `dmesg` and `nvidia-smi`");
}

nlohmann::json cuda_init_failure(CUresult r, const std::string& text) {
  const std::string message = "cuInit failed: " + text;
  switch (r) {
    case CUDA_ERROR_NO_DEVICE:
      return probe_error("no_gpu", "CUDA sees no GPU: " + text, "check `nvidia-smi` and the job's device cgroup");
    case CUDA_ERROR_SYSTEM_NOT_READY:
      return probe_error("driver_fault", message + ": the NVSwitch fabric is not initialised",
                         "start nvidia-fabricmanager (`systemctl status nvidia-fabricmanager`, "
                         "/var/log/fabricmanager.log); its version must match the driver's");
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
      return probe_error("driver_fault", message + ": libcuda and the kernel module are different versions",
                         "reinstall matching driver packages, or reboot after a driver upgrade; in a container, check "
                         "the CUDA forward-compatibility libraries");
    default:
      return probe_error("driver", message, "look at `dmesg` (Xid errors) and `nvidia-smi`");
  }
}

nlohmann::json gpu_call_failure(const GpuCallError& e, const std::string& nccl_text, const std::string& hint) {
  std::string message = e.message;
  if (!nccl_text.empty()) message += "; NCCL: " + nccl_text;
  auto has = [&](const char* s) { return nccl_text.find(s) != std::string::npos; };
  if (e.cuda == CUDA_ERROR_OUT_OF_MEMORY || has("out of memory"))
    return probe_error("busy", message + " (another process holds the GPU's memory, or the check asks for more than it has)",
                       "run the check while the node is idle (HealthCheckProgram, or a job that owns the node); "
                       "`nvidia-smi` lists the processes; the all_reduce needs twice nccl.bytes per GPU");
  if (e.cuda == CUDA_ERROR_DEVICE_UNAVAILABLE)
    return probe_error("busy", message + " (an exclusive-process GPU in use by another process)",
                       "run the check while the node is idle; `nvidia-smi -q -d COMPUTE` shows the compute mode");
  // NCCL links the CUDA runtime, whose cudaErrorInsufficientDriver (35) it reports as text.
  if (has("driver version is insufficient") || has("InsufficientDriver"))
    return probe_error("incompatible", message + " (this NCCL needs a newer driver)",
                       "install an NCCL built for the driver's CUDA version (cuda_driver_version), upgrade the "
                       "driver, or set gpu.libraries.nccl");
  return probe_error("gpu", message, hint);
}

}  // namespace gpudiag::probe
