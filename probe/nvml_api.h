#pragma once
// The part of NVML the probe uses, declared here because NVML's header ships with the
// driver's development package, not with the CUDA toolkit. Values and the PCI info
// layout are NVML's stable ABI (nvml.h, nvmlDeviceGetPciInfo_v3).
#include <string>
#include <vector>

#include "probe/lib_loader.h"

namespace gpudiag::probe {

using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlInvalidArgument = 2;
constexpr nvmlReturn_t kNvmlNotSupported = 3;
constexpr nvmlReturn_t kNvmlDriverNotLoaded = 9;
constexpr unsigned kNvmlMaxLinks = 18;  // NVML_NVLINK_MAX_LINKS

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
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

  std::string err(nvmlReturn_t r) const;
};

// Loads and resolves; lib.handle is null when no candidate loads. Optional entry points
// (remapped rows, NVLink) may stay null on old drivers.
Nvml load_nvml(const std::string& configured);

}  // namespace gpudiag::probe
