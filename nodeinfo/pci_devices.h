#pragma once
// PCI devices from /sys/bus/pci/devices, with the bridges above each one taken from
// its sysfs device path (/sys/devices/pci0000:10/0000:10:01.0/.../0000:13:00.0).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

constexpr std::uint16_t kVendorNvidia = 0x10de;
constexpr std::uint16_t kVendorMellanox = 0x15b3;

struct PciDevice {
  std::string bdf;                       // 0000:13:00.0
  std::string kernel_path;               // resolved path under /sys/devices
  std::optional<std::uint16_t> vendor;
  std::optional<std::uint32_t> class_code;  // 0x030200
  std::optional<int> numa_node;          // -1 when the kernel does not know
  std::vector<std::string> upstream;     // bridge BDFs, nearest first
  std::vector<std::string> errors;       // files that could not be read or parsed

  // An NVIDIA display or 3D controller. NVSwitches (class 0x0680) are not GPUs.
  bool is_nvidia_gpu() const;
};

// "0000:13:00.0" (domain:bus:device.function).
bool is_bdf(std::string_view s);
// The BDFs of the bridges in a sysfs device path, nearest to the device first.
std::vector<std::string> bridges_from_path(std::string_view kernel_path);

struct PciInventory {
  std::string error;  // /sys/bus/pci/devices could not be listed
  std::vector<PciDevice> devices;
  const PciDevice* find(std::string_view bdf) const;
};

PciInventory discover_pci(const RootedFs& fs);
// One device's directory, read the same way as discover_pci does.
PciDevice read_pci_device(const RootedFs& fs, const std::string& bdf);

}  // namespace gpudiag
