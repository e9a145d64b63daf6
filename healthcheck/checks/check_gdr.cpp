#include "healthcheck/checks/check_gdr.h"

#include <fmt/format.h>

#include "healthcheck/checks/inventory_cache.h"
#include "util/duration.h"

namespace gpudiag {
namespace {

constexpr KernelRelease kDmaBufKernel{5, 12};
constexpr int kDmaBufDriver = 515;

bool at_least(const KernelRelease& k, const KernelRelease& min) {
  return k.major != min.major ? k.major > min.major : k.minor >= min.minor;
}

const char* kPeermemFix =
    "load it with `modprobe nvidia_peermem` and add it to /etc/modules-load.d/; or run NVIDIA's open kernel "
    "module >= 515 on Linux >= 5.12, which NCCL >= 2.19 uses through dma-buf";

const char* kEfaFix =
    "install the efa driver from the EFA installer (its build carries a `g` in /sys/module/efa/version) and load the "
    "NVIDIA driver before it (`modprobe -r efa && modprobe efa`), so that /sys/class/infiniband/*/device/gdr reads 1; "
    "or run NVIDIA's open kernel module >= 515 on Linux >= 5.12 for dma-buf";

std::string kernel_text_of(const std::optional<KernelRelease>& k) {
  return k ? "Linux " + std::to_string(k->major) + "." + std::to_string(k->minor) : "an unknown kernel";
}

// The GPUDirect path, or why there is none. Returns the summary part.
std::string judge_path(const GpuDirectFacts& f, Status missing, CheckResult& out) {
  if (f.peermem) {
    out.add({"nvidia_peermem", Status::ok, "nvidia_peermem is loaded: GPUDirect RDMA is available", ""});
    return "GPUDirect RDMA through nvidia_peermem";
  }
  // Every RDMA NIC is EFA: the out-of-tree efa driver maps GPU memory itself.
  std::string efa_note;
  if (f.efa_nics > 0 && f.efa_nics == f.rdma_nics) {
    const std::string version = f.efa_version ? *f.efa_version : std::string();
    const bool gdr_build = !version.empty() && version.back() == 'g';
    if (f.efa_gdr_on == f.efa_nics || (gdr_build && f.efa_gdr_on + f.efa_gdr_off == 0)) {
      out.add({"efa", Status::ok,
               fmt::format("nvidia_peermem is not loaded; GPUDirect RDMA goes through the efa driver's own "
                           "peer-memory path (efa {}{})",
                           version.empty() ? "version unknown" : version,
                           f.efa_gdr_on ? fmt::format(", gdr 1 on {} device(s)", f.efa_gdr_on) : ""),
               ""});
      return "GPUDirect RDMA through the efa driver";
    }
    efa_note = f.efa_gdr_off
                   ? fmt::format("; the efa driver {} reports gdr 0 on {} of {} device(s): it found no NVIDIA p2p "
                                 "symbols",
                                 version.empty() ? "(version unknown)" : version, f.efa_gdr_off, f.efa_nics)
                   : fmt::format("; the efa driver ({}) has no GPUDirect path",
                                 version.empty() ? "in-tree, no version file" : version);
  }
  if (!f.driver_loaded) {
    out.add({"nvidia_peermem", missing,
             "GPUDirect RDMA is unavailable: nvidia_peermem is not loaded and neither is the NVIDIA driver "
             "(/proc/driver/nvidia/version is missing)",
             std::string("load the NVIDIA driver (`nvidia-smi` says why it is not), then nvidia_peermem: ") +
                 kPeermemFix});
    return "no GPUDirect RDMA";
  }
  // Not a ternary: from one, gcc 12 (in a unity batch) warns that the release's fields may be
  // uninitialized.
  std::optional<KernelRelease> kernel;
  if (f.kernel_release) kernel = parse_kernel_release(*f.kernel_release);
  auto driver = f.driver_version ? parse_nvidia_version(*f.driver_version) : std::nullopt;
  const bool kernel_too_old = kernel && !at_least(*kernel, kDmaBufKernel);
  const std::string kernel_text = kernel_text_of(kernel);
  const bool driver_unfit = driver && (!driver->open_module || driver->major < kDmaBufDriver);
  if (kernel && driver && !kernel_too_old && !driver_unfit) {
    out.add({"nvidia_peermem", Status::ok,
             fmt::format("nvidia_peermem is not loaded; GPUDirect RDMA can use dma-buf ({}, open kernel "
                         "module {}) with NCCL >= 2.19",
                         kernel_text, driver->version),
             ""});
    return "GPUDirect RDMA through dma-buf";
  }
  if (kernel_too_old || driver_unfit) {
    std::string node = kernel_text;
    if (driver)
      node += fmt::format(" with the {} kernel module {}", driver->open_module ? "open" : "proprietary", driver->version);
    out.add({"nvidia_peermem", missing,
             fmt::format("GPUDirect RDMA is unavailable: nvidia_peermem is not loaded, and dma-buf needs Linux "
                         ">= 5.12 with NVIDIA's open kernel module >= 515 (this node: {}){}",
                         node, efa_note),
             efa_note.empty() ? std::string(kPeermemFix) : std::string(kEfaFix)});
    return "no GPUDirect RDMA";
  }
  const std::string why = !f.kernel_release ? f.kernel_release.error()
                          : !kernel         ? "/proc/sys/kernel/osrelease: not a kernel release: '" +
                                                  *f.kernel_release + "'"
                          : !f.driver_version ? f.driver_version.error()
                                              : "/proc/driver/nvidia/version: not the NVIDIA driver's version "
                                                "line: '" + *f.driver_version + "'";
  out.add({"nvidia_peermem", Status::unknown,
           "nvidia_peermem is not loaded, and whether dma-buf can stand in is unknown: " + why,
           std::string("check `uname -r` and `cat /proc/driver/nvidia/version`; or ") + kPeermemFix});
  return "GPUDirect RDMA unknown";
}

}  // namespace

CheckResult evaluate_gdr(const GpuDirectFacts& f, const GdrSettings& cfg) {
  CheckResult out;
  out.name = "gdr";
  if (f.gpus == 0 || f.rdma_nics == 0) {
    out.add({"gdr", Status::ok,
             fmt::format("not applicable: {} NVIDIA GPUs and {} RDMA NICs", f.gpus, f.rdma_nics), ""});
    out.summary = f.gpus == 0 ? "not applicable (no NVIDIA GPU)" : "not applicable (no RDMA NIC)";
    return out;
  }
  const Status missing = cfg.required == "false" ? Status::warning : Status::critical;
  std::string summary = judge_path(f, missing, out);

  const char* memlock_fix =
      "set `* - memlock unlimited` in /etc/security/limits.conf, LimitMEMLOCK=infinity for slurmd "
      "(`systemctl edit slurmd`) and PropagateResourceLimitsExcept=MEMLOCK in slurm.conf";
  if (!f.memlock) {
    out.add({"memlock", Status::unknown, "cannot read the memlock limit: " + f.memlock.error(), memlock_fix});
    summary += ", memlock unknown";
  } else if (f.memlock->has_value()) {
    out.add({"memlock", Status::warning,
             fmt::format("the memlock limit is {}, not unlimited: RDMA memory registration (ibv_reg_mr) by NCCL "
                         "and MPI fails or falls back to slower paths",
                         size_text(**f.memlock)),
             memlock_fix});
    summary += ", memlock " + size_text(**f.memlock);
  } else {
    out.add({"memlock", Status::ok, "the memlock limit is unlimited", ""});
    summary += ", memlock unlimited";
  }
  out.summary = summary;
  return out;
}

CheckResult run_gdr_check(const CheckContext& ctx) {
  return evaluate_gdr(read_gpudirect_facts(ctx.fs, pci_inventory(ctx), ib_inventory(ctx)), ctx.cfg.gdr);
}

}  // namespace gpudiag
