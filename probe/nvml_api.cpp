#include "probe/nvml_api.h"

namespace gpudiag::probe {

std::string Nvml::err(nvmlReturn_t r) const {
  const char* s = error_string ? error_string(r) : nullptr;
  return std::string(s ? s : "NVML error") + " (" + std::to_string(r) + ")";
}

Nvml load_nvml(const std::string& configured) {
  Nvml n;
  // The driver installs libnvidia-ml.so.1 in the linker path; containers built by the
  // NVIDIA toolkit put it under /usr/local/nvidia.
  n.lib = load_library(configured, {"libnvidia-ml.so.1", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                                    "/usr/lib64/libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1"});
  if (!n.lib) return n;
  std::string& m = n.missing;
  resolve(n.lib, n.init, {"nvmlInit_v2", "nvmlInit"}, m);
  resolve(n.lib, n.shutdown, {"nvmlShutdown"}, m);
  resolve(n.lib, n.error_string, {"nvmlErrorString"}, m);
  resolve(n.lib, n.driver_version, {"nvmlSystemGetDriverVersion"}, m);
  resolve(n.lib, n.count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, m);
  resolve(n.lib, n.handle, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, m);
  resolve(n.lib, n.name, {"nvmlDeviceGetName"}, m);
  resolve(n.lib, n.uuid, {"nvmlDeviceGetUUID"}, m);
  resolve(n.lib, n.pci_info, {"nvmlDeviceGetPciInfo_v3"}, m);
  resolve(n.lib, n.total_ecc, {"nvmlDeviceGetTotalEccErrors"}, m);
  resolve(n.lib, n.retired_pending, {"nvmlDeviceGetRetiredPagesPendingStatus"}, m);
  resolve(n.lib, n.p2p_status, {"nvmlDeviceGetP2PStatus"}, m);
  // Optional: remapped rows exist from Ampere drivers on, NVLink only where it exists.
  std::string optional;
  resolve(n.lib, n.remapped_rows, {"nvmlDeviceGetRemappedRows"}, optional);
  resolve(n.lib, n.nvlink_state, {"nvmlDeviceGetNvLinkState"}, optional);
  resolve(n.lib, n.field_values, {"nvmlDeviceGetFieldValues"}, optional);
  resolve(n.lib, n.nvlink_capability, {"nvmlDeviceGetNvLinkCapability"}, optional);
  resolve(n.lib, n.mig_mode, {"nvmlDeviceGetMigMode"}, optional);
  resolve(n.lib, n.fabric_info, {"nvmlDeviceGetGpuFabricInfo"}, optional);
  resolve(n.lib, n.clocks_event_reasons,
          {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}, optional);
  resolve(n.lib, n.temperature, {"nvmlDeviceGetTemperature"}, optional);
  resolve(n.lib, n.temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"}, optional);
  resolve(n.lib, n.pcie_replay_counter, {"nvmlDeviceGetPcieReplayCounter"}, optional);
  return n;
}

}  // namespace gpudiag::probe
