#pragma once
// The gpu check's second half: what the driver (NVML, through the probe's "devices"
// section) says about each GPU, against the PCI count and the config.
#include <nlohmann/json.hpp>

#include "healthcheck/report/report.h"
#include "config/config.h"

namespace gpudiag {

// Pure: adds findings for the GPU count the driver sees, each GPU's uncorrected ECC
// errors, pending page retirement, row remapping, NVLink states and model.
// Returns a summary fragment such as "8 seen by driver 570.86".
std::string add_driver_view(CheckResult& out, const nlohmann::json& devices, int pci_gpus, const GpuExpect& expect);

}  // namespace gpudiag
