#include "probe/probe_devices.h"

#include "probe/nvml_api.h"
#include "probe/probe_copy.h"

namespace gpudiag::probe {
namespace {

constexpr int kUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatile = 0;     // NVML_VOLATILE_ECC: since the last driver load

struct NvmlSession {
  Nvml nvml;
  nlohmann::json error;  // set when NVML is unusable
  unsigned count = 0;
  std::vector<nvmlDevice_t> handles;

  explicit NvmlSession(const std::string& path) : nvml(load_nvml(path)) {
    if (!nvml.lib) {
      error = probe_error("library", "cannot load NVML: " + describe_attempts(nvml.lib),
                          "install the NVIDIA driver, or set gpu.libraries.nvml in gpudiag.yaml");
      return;
    }
    if (!nvml.missing.empty()) {
      error = probe_error("library", "NVML at " + nvml.lib.path + " lacks " + nvml.missing,
                          "the driver is too old for gpudiag: upgrade it");
      return;
    }
    nvmlReturn_t r = nvml.init();
    if (r != kNvmlSuccess) {
      error = probe_error("driver", "nvmlInit failed: " + nvml.err(r),
                          r == kNvmlDriverNotLoaded ? "the NVIDIA kernel module is not loaded: `modprobe nvidia`, "
                                                      "then look at `dmesg`"
                                                    : "look at `dmesg` and `nvidia-smi`");
      return;
    }
    started = true;
    r = nvml.count(&count);
    if (r != kNvmlSuccess) {
      error = probe_error("driver", "nvmlDeviceGetCount failed: " + nvml.err(r), "look at `nvidia-smi` and `dmesg`");
      return;
    }
    if (count == 0) {
      error = probe_error("no_gpu", "the NVIDIA driver sees no GPU", "check `nvidia-smi` and `lspci -d 10de:`");
      return;
    }
    handles.resize(count, nullptr);
  }
  ~NvmlSession() {
    if (started) nvml.shutdown();
  }
  bool started = false;
};

nlohmann::json describe_gpu(const Nvml& nv, unsigned index, nvmlDevice_t& h) {
  nlohmann::json g = {{"index", index}};
  nlohmann::json errors = nlohmann::json::array();
  nvmlReturn_t r = nv.handle(index, &h);
  if (r != kNvmlSuccess) {
    // GPU_IS_LOST and friends: the driver knows the GPU but cannot talk to it.
    errors.push_back("nvmlDeviceGetHandleByIndex failed: " + nv.err(r));
    h = nullptr;
    g["errors"] = errors;
    return g;
  }
  char buf[128] = {};
  if (nv.name(h, buf, sizeof buf) == kNvmlSuccess) g["name"] = buf;
  if (nv.uuid(h, buf, sizeof buf) == kNvmlSuccess) g["uuid"] = buf;
  nvmlPciInfo_t pci{};
  if ((r = nv.pci_info(h, &pci)) == kNvmlSuccess) g["pci_bus_id"] = pci.busId;
  else errors.push_back("nvmlDeviceGetPciInfo failed: " + nv.err(r));

  unsigned long long ecc = 0;
  r = nv.total_ecc(h, kUncorrected, kVolatile, &ecc);
  if (r == kNvmlSuccess) g["ecc_uncorrected_volatile"] = ecc;
  else if (r != kNvmlNotSupported) errors.push_back("reading ECC counters failed: " + nv.err(r));

  int pending = 0;
  r = nv.retired_pending(h, &pending);
  if (r == kNvmlSuccess) g["retired_pages_pending"] = pending != 0;

  if (nv.remapped_rows) {
    unsigned corr = 0, unc = 0, pend = 0, fail = 0;
    if (nv.remapped_rows(h, &corr, &unc, &pend, &fail) == kNvmlSuccess)
      g["remapped_rows"] = {{"correctable", corr}, {"uncorrectable", unc}, {"pending", pend != 0}, {"failure", fail != 0}};
  }
  nlohmann::json links = nlohmann::json::array();
  if (nv.nvlink_state) {
    for (unsigned l = 0; l < kNvmlMaxLinks; ++l) {
      int active = 0;
      r = nv.nvlink_state(h, l, &active);
      if (r == kNvmlInvalidArgument) break;  // past this GPU's last link
      if (r == kNvmlNotSupported) break;     // a GPU without NVLink
      if (r != kNvmlSuccess) continue;
      links.push_back({{"link", l}, {"active", active != 0}});
    }
  }
  g["nvlink"] = links;
  g["errors"] = errors;
  return g;
}

}  // namespace

nlohmann::json probe_error(const std::string& kind, const std::string& message, const std::string& hint) {
  nlohmann::json e = {{"kind", kind}, {"message", message}};
  if (!hint.empty()) e["hint"] = hint;
  return {{"error", e}};
}

nlohmann::json probe_devices(const ProbeOptions& opts) {
  NvmlSession s(opts.nvml_path);
  if (!s.error.is_null()) return s.error;
  nlohmann::json out = {{"nvml_library", s.nvml.lib.path}};
  char ver[96] = {};
  if (s.nvml.driver_version(ver, sizeof ver) == kNvmlSuccess) out["driver_version"] = ver;
  nlohmann::json gpus = nlohmann::json::array();
  for (unsigned i = 0; i < s.count; ++i) gpus.push_back(describe_gpu(s.nvml, i, s.handles[i]));
  out["gpus"] = gpus;
  return out;
}

nlohmann::json probe_p2p(const ProbeOptions& opts) {
  nlohmann::json out;
  {
    NvmlSession s(opts.nvml_path);
    if (!s.error.is_null()) return s.error;
    nlohmann::json gpus = nlohmann::json::array();
    for (unsigned i = 0; i < s.count; ++i) {
      nlohmann::json g = describe_gpu(s.nvml, i, s.handles[i]);
      gpus.push_back({{"index", i}, {"name", g.value("name", "")}, {"pci_bus_id", g.value("pci_bus_id", "")}});
    }
    out["gpus"] = gpus;
    // Rows and columns in NVML order, which is PCI order, as nvidia-smi prints them.
    // -1: the query failed (shown as U, unknown).
    const std::pair<const char*, int> kinds[] = {{"read", 0}, {"write", 1}, {"nvlink", 2}};
    for (const auto& [name, index] : kinds) {
      nlohmann::json m = nlohmann::json::array();
      for (unsigned i = 0; i < s.count; ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (unsigned j = 0; j < s.count; ++j) {
          int st = -1;
          if (i == j) st = 0;
          else if (s.handles[i] && s.handles[j] && s.nvml.p2p_status(s.handles[i], s.handles[j], index, &st) != kNvmlSuccess)
            st = -1;
          row.push_back(st);
        }
        m.push_back(row);
      }
      out[name] = m;
    }
  }
  if (opts.bandwidth) out["bandwidth"] = probe_peer_bandwidth(opts);
  return out;
}

}  // namespace gpudiag::probe
