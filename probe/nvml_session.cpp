#include "probe/nvml_session.h"

#include "probe/probe_failure.h"
#include "probe/probe_options.h"

namespace gpudiag::probe {

NvmlSession::NvmlSession(const std::string& path) : nvml_(load_nvml(path)) {
  Nvml& nv = nvml_;
  if (!nv.lib) {
    error_ = probe_error("library", "cannot load NVML: " + describe_attempts(nv.lib),
                         "install the NVIDIA driver, or set gpu.libraries.nvml in gpudiag.yaml");
    return;
  }
  if (!nv.missing.empty()) {
    error_ = probe_error("library", "NVML at " + nv.lib.path + " lacks " + nv.missing, kOldDriverHint);
    return;
  }
  nvmlReturn_t r = nv.init();
  if (r != kNvmlSuccess) {
    error_ = nvml_init_failure(r, nv.err(r));
    return;
  }
  started_ = true;
  unsigned count = 0;
  r = nv.count(&count);
  if (r != kNvmlSuccess) {
    error_ = probe_error("driver", "nvmlDeviceGetCount failed: " + nv.err(r), "look at `nvidia-smi` and `dmesg`");
    return;
  }
  if (count == 0) {
    error_ = probe_error("no_gpu", "the NVIDIA driver sees no GPU", "check `nvidia-smi` and `lspci -d 10de:`");
    return;
  }
  gpus_.resize(count);
  for (unsigned i = 0; i < count; ++i) {
    NvmlGpu& g = gpus_[i];
    r = nv.handle(i, &g.handle);
    if (r != kNvmlSuccess) {
      g.handle = nullptr;
      g.hidden = r == kNvmlNoPermission;
      g.problem = "nvmlDeviceGetHandleByIndex failed: " + nv.err(r);
      continue;
    }
    char buf[128] = {};
    if (nv.name(g.handle, buf, sizeof buf) == kNvmlSuccess) g.name = buf;
    if (nv.uuid(g.handle, buf, sizeof buf) == kNvmlSuccess) g.uuid = buf;
    nvmlPciInfo_t pci{};
    if (nv.pci_info(g.handle, &pci) == kNvmlSuccess) g.pci_bus_id = pci.busId;
    unsigned current = 0, pending = 0;
    if (nv.mig_mode && nv.mig_mode(g.handle, &current, &pending) == kNvmlSuccess) g.mig = current != 0;
  }
}

NvmlSession::~NvmlSession() {
  if (started_) nvml_.shutdown();
}

std::string mig_gpus(const std::vector<NvmlGpu>& gpus) {
  std::string out;
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (gpus[i].mig) out += (out.empty() ? "GPU" : ", GPU") + std::to_string(i);
  return out;
}

}  // namespace gpudiag::probe
