#pragma once
// What decides whether GPUDirect RDMA can work on this node: the nvidia_peermem module,
// the dma-buf path (Linux >= 5.12 with NVIDIA's open kernel module >= 515, which
// NCCL >= 2.19 uses), the efa driver's own peer-memory path (the out-of-tree driver from
// amzn-drivers maps GPU memory with nvidia_p2p_get_pages), and the memlock limit that
// ibv_reg_mr runs into.
#include <optional>
#include <string>
#include <string_view>

#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_devices.h"
#include "util/result.h"
#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

struct KernelRelease {
  int major = 0, minor = 0;
};
// "6.1.0-28-amd64" -> 6.1; nullopt for anything else.
std::optional<KernelRelease> parse_kernel_release(std::string_view text);

// The first line of /proc/driver/nvidia/version:
//   NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ...
//   NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build ...
struct NvidiaDriver {
  bool open_module = false;
  std::string version;  // "550.54.15"
  int major = 0;        // 550
};
std::optional<NvidiaDriver> parse_nvidia_version(std::string_view text);

// The soft "Max locked memory" of /proc/<pid>/limits: nullopt for unlimited, else bytes.
// Garbage is an error.
Result<std::optional<unsigned long long>> parse_memlock_limit(std::string_view limits_text);

struct GpuDirectFacts {
  int gpus = 0, rdma_nics = 0;
  bool peermem = false;  // /sys/module/nvidia_peermem: the module is loaded
  Result<std::string> kernel_release = Result<std::string>::failure("not read");  // /proc/sys/kernel/osrelease
  bool driver_loaded = false;  // /proc/driver/nvidia/version exists
  Result<std::string> driver_version = Result<std::string>::failure("not read");  // /proc/driver/nvidia/version
  // The out-of-tree efa driver (amzn-drivers kernel/linux/efa): its MODULE_VERSION ends
  // in "g" ("2.13.1g", /sys/module/efa/version; the in-tree driver has no version file),
  // and its efa_sysfs.c puts a `gdr` file on each EFA PCI device that reads 1 when the
  // NVIDIA driver's p2p symbols are there to map GPU memory with, 0 when not.
  int efa_nics = 0;  // of rdma_nics, those driven by efa
  Result<std::string> efa_version = Result<std::string>::failure("not read");
  int efa_gdr_on = 0, efa_gdr_off = 0;  // EFA devices whose gdr file reads 1, 0
  // This process's memlock limit, read from /proc/self/limits: a health check run by
  // slurmd inherits slurmd's limits, which are what its jobs get.
  Result<std::optional<unsigned long long>> memlock =
      Result<std::optional<unsigned long long>>::failure("not read");
};

// `pci` and `ib` say whether the node has GPUs and RDMA NICs.
GpuDirectFacts read_gpudirect_facts(const RootedFs& fs, const PciInventory& pci, const IbInventory& ib);

}  // namespace gpudiag
