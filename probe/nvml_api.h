#pragma once
// The part of NVML the probe uses, declared here because NVML's header ships with the
// driver's development package, not with the CUDA toolkit. Values and the PCI info
// layout are NVML's stable ABI (nvml.h, nvmlDeviceGetPciInfo_v3).
#include <string>
#include <vector>

#include "util/lib_loader.h"

namespace gpudiag::probe {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInvalidArgument = 2;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlNoPermission = 4;  // e.g. a GPU that the job's cgroup hides
constexpr nvmlReturn_t kNvmlDriverNotLoaded = 9;
constexpr nvmlReturn_t kNvmlLibRmVersionMismatch = 18;  // driver upgraded, old module loaded
constexpr unsigned kNvmlMaxLinks = 18;              // NVML_NVLINK_MAX_LINKS
constexpr unsigned kNvmlFiNvlinkLinkCount = 91;     // NVML_FI_DEV_NVLINK_LINK_COUNT
constexpr int kNvmlNvlinkCapP2pSupported = 0;       // NVML_NVLINK_CAP_P2P_SUPPORTED
constexpr int kNvmlValueTypeUnsignedInt = 1;        // NVML_VALUE_TYPE_UNSIGNED_INT
constexpr unsigned char kNvmlFabricNotSupported = 0;  // NVML_GPU_FABRIC_STATE_*
constexpr unsigned char kNvmlFabricNotStarted = 1;
constexpr unsigned char kNvmlFabricInProgress = 2;
constexpr unsigned char kNvmlFabricCompleted = 3;
constexpr int kNvmlTemperatureGpu = 0;                // NVML_TEMPERATURE_GPU (nvmlTemperatureSensors_t)
constexpr int kNvmlTemperatureThresholdSlowdown = 1;  // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};

struct nvmlFieldValue_t {
  unsigned fieldId, scopeId;
  long long timestamp, latencyUsec;
  int valueType;  // nvmlValueType_t
  nvmlReturn_t nvmlReturn;
  union {
    double dVal;
    unsigned uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
  } value;
};
static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t is 40 bytes in nvml.h");

// nvmlDeviceGetGpuFabricInfo (R535 and later), the unversioned struct.
struct nvmlGpuFabricInfo_t {
  char clusterUuid[16];
  nvmlReturn_t status;  // meaningful once state is COMPLETED
  unsigned cliqueId;
  unsigned char state;  // nvmlGpuFabricState_t
};

struct Nvml {
  Library lib;
  std::string missing;  // symbols the library lacks
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;
  // (device, NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1, NVML_VOLATILE_ECC=0, count)
  nvmlReturn_t (*total_ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pending)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*remapped_rows)(nvmlDevice_t, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned, int*) = nullptr;
  // (d1, d2, NVML_P2P_CAPS_INDEX_READ=0 / WRITE=1 / NVLINK=2, status)
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  // Optional, null where the driver lacks them.
  nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
  // (device, link, NVML_NVLINK_CAP_*, result)
  nvmlReturn_t (*nvlink_capability)(nvmlDevice_t, unsigned, int, unsigned*) = nullptr;
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;  // current, pending
  nvmlReturn_t (*fabric_info)(nvmlDevice_t, nvmlGpuFabricInfo_t*) = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons (R535 on), else the older name for the same
  // bitmask, nvmlDeviceGetCurrentClocksThrottleReasons.
  nvmlReturn_t (*clocks_event_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
  // (device, nvmlTemperatureSensors_t, degrees C)
  nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
  // (device, nvmlTemperatureThresholds_t, degrees C)
  nvmlReturn_t (*temperature_threshold)(nvmlDevice_t, int, unsigned*) = nullptr;
  nvmlReturn_t (*pcie_replay_counter)(nvmlDevice_t, unsigned*) = nullptr;

  std::string err(nvmlReturn_t r) const;
};

// Loads and resolves; lib.handle is null when no candidate loads. Optional entry points
// (remapped rows, NVLink) may stay null on old drivers.
Nvml load_nvml(const std::string& configured);

}  // namespace gpudiag::probe
