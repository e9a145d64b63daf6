#include "probe/probe_devices.h"

#include "probe/nvml_session.h"
#include "probe/probe_copy.h"
#include "probe/probe_json.h"

namespace gpudiag::probe {
namespace {

constexpr int kUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatile = 0;     // NVML_VOLATILE_ECC: since the last driver load

// How many NVLinks the GPU has: NVML's field value where the driver has it, else the
// most any GPU has (links past the GPU's last answer INVALID_ARGUMENT or NOT_SUPPORTED).
unsigned nvlink_count(const Nvml& nv, nvmlDevice_t h) {
  if (!nv.field_values) return kNvmlMaxLinks;
  nvmlFieldValue_t f{};
  f.fieldId = kNvmlFiNvlinkLinkCount;
  if (nv.field_values(h, 1, &f) != kNvmlSuccess || f.nvmlReturn != kNvmlSuccess) return kNvmlMaxLinks;
  unsigned n = f.valueType == kNvmlValueTypeUnsignedInt ? f.value.uiVal : static_cast<unsigned>(f.value.ullVal);
  return n < kNvmlMaxLinks ? n : kNvmlMaxLinks;
}

// Links that are wired for P2P, with their state. Every link is asked: one that is not
// supported (a gap) or has no P2P capability (unwired on a PCIe or NVL board) is
// skipped, never taken as the end of the list or as "down".
nlohmann::json nvlinks(const Nvml& nv, nvmlDevice_t h) {
  nlohmann::json links = nlohmann::json::array();
  if (!nv.nvlink_state) return links;
  const unsigned count = nvlink_count(nv, h);
  for (unsigned l = 0; l < count; ++l) {
    int active = 0;
    if (nv.nvlink_state(h, l, &active) != kNvmlSuccess) continue;
    unsigned p2p = 1;
    if (nv.nvlink_capability && nv.nvlink_capability(h, l, kNvmlNvlinkCapP2pSupported, &p2p) == kNvmlSuccess && !p2p)
      continue;
    links.push_back({{probe_json::kLink, l}, {probe_json::kLinkActive, active != 0}});
  }
  return links;
}

// Raw values only (the health check judges them): a driver that lacks the entry point
// or a GPU that does not support the query leaves the field out.
void add_clocks_and_thermals(const Nvml& nv, nvmlDevice_t h, nlohmann::json& g) {
  unsigned long long reasons = 0;
  if (nv.clocks_event_reasons && nv.clocks_event_reasons(h, &reasons) == kNvmlSuccess)
    g[probe_json::kClocksEventReasons] = reasons;
  unsigned temp = 0;
  if (nv.temperature && nv.temperature(h, kNvmlTemperatureGpu, &temp) == kNvmlSuccess) g[probe_json::kTemperatureC] = temp;
  if (nv.temperature_threshold &&
      nv.temperature_threshold(h, kNvmlTemperatureThresholdSlowdown, &temp) == kNvmlSuccess)
    g[probe_json::kSlowdownTemperatureC] = temp;
  unsigned replays = 0;
  if (nv.pcie_replay_counter && nv.pcie_replay_counter(h, &replays) == kNvmlSuccess) g[probe_json::kPcieReplayCount] = replays;
}

nlohmann::json describe_gpu(const Nvml& nv, unsigned index, const NvmlGpu& gpu) {
  nlohmann::json g = {{probe_json::kIndex, index}};
  nlohmann::json errors = nlohmann::json::array();
  nvmlDevice_t h = gpu.handle;
  if (!h) {
    if (gpu.hidden) {
      g[probe_json::kNotAccessible] = gpu.problem;
    } else {
      // GPU_IS_LOST and friends: the driver knows the GPU but cannot talk to it.
      errors.push_back(gpu.problem);
    }
    g[probe_json::kErrors] = errors;
    return g;
  }
  if (!gpu.name.empty()) g[probe_json::kGpuName] = gpu.name;
  if (!gpu.uuid.empty()) g[probe_json::kUuid] = gpu.uuid;
  nvmlPciInfo_t pci{};
  nvmlReturn_t r = nv.pci_info(h, &pci);
  if (r == kNvmlSuccess) g[probe_json::kPciBusId] = pci.busId;
  else errors.push_back("nvmlDeviceGetPciInfo failed: " + nv.err(r));
  g[probe_json::kMig] = gpu.mig;

  unsigned long long ecc = 0;
  r = nv.total_ecc(h, kUncorrected, kVolatile, &ecc);
  if (r == kNvmlSuccess) g[probe_json::kEccUncorrectedVolatile] = ecc;
  else if (r != kNvmlNotSupported && r != kNvmlNoPermission) errors.push_back("reading ECC counters failed: " + nv.err(r));

  int pending = 0;
  r = nv.retired_pending(h, &pending);
  if (r == kNvmlSuccess) g[probe_json::kRetiredPagesPending] = pending != 0;

  if (nv.remapped_rows) {
    unsigned corr = 0, unc = 0, pend = 0, fail = 0;
    if (nv.remapped_rows(h, &corr, &unc, &pend, &fail) == kNvmlSuccess)
      g[probe_json::kRemappedRows] = {{probe_json::kRowsCorrectable, corr}, {probe_json::kRowsUncorrectable, unc}, {probe_json::kRowsPending, pend != 0}, {probe_json::kRowsFailure, fail != 0}};
  }
  if (nv.fabric_info) {
    // Padded: later drivers may write a field more than the R535 struct has.
    struct {
      nvmlGpuFabricInfo_t info;
      char spare[64];
    } f{};
    if (nv.fabric_info(h, &f.info) == kNvmlSuccess && f.info.state != kNvmlFabricNotSupported)
      g[probe_json::kFabric] = {{probe_json::kFabricState, f.info.state}, {probe_json::kFabricStatus, f.info.status}, {probe_json::kFabricStatusText, nv.err(f.info.status)}};
  }
  add_clocks_and_thermals(nv, h, g);
  g[probe_json::kNvlinks] = nvlinks(nv, h);
  g[probe_json::kErrors] = errors;
  return g;
}

}  // namespace

nlohmann::json probe_error(const std::string& kind, const std::string& message, const std::string& hint) {
  return probe_error_json(kind, message, hint);
}

nlohmann::json probe_devices(const ProbeOptions& opts) {
  NvmlSession s(opts.nvml_path);
  if (!s.error().is_null()) return s.error();
  nlohmann::json out = {{probe_json::kNvmlLibrary, s.nvml().lib.path}};
  char ver[96] = {};
  if (s.nvml().driver_version(ver, sizeof ver) == kNvmlSuccess) out[probe_json::kDriverVersion] = ver;
  nlohmann::json gpus = nlohmann::json::array();
  for (unsigned i = 0; i < s.gpus().size(); ++i) gpus.push_back(describe_gpu(s.nvml(), i, s.gpus()[i]));
  out[probe_json::kGpus] = gpus;
  return out;
}

nlohmann::json probe_p2p(const ProbeOptions& opts) {
  nlohmann::json out;
  std::vector<NvmlGpu> inventory;
  {
    NvmlSession s(opts.nvml_path);
    if (!s.error().is_null()) return s.error();
    const std::size_t n = s.gpus().size();
    nlohmann::json gpus = nlohmann::json::array();
    for (unsigned i = 0; i < n; ++i)
      gpus.push_back({{probe_json::kIndex, i}, {probe_json::kGpuName, s.gpus()[i].name}, {probe_json::kPciBusId, s.gpus()[i].pci_bus_id}});
    out[probe_json::kGpus] = gpus;
    if (std::string mig = mig_gpus(s.gpus()); !mig.empty()) {
      // MIG instances cannot do P2P: the question does not apply.
      out[probe_json::kNotApplicable] = "MIG mode is on (" + mig + ")";
      return out;
    }
    // Rows and columns in NVML order, which is PCI order, as nvidia-smi prints them.
    // -1: the query failed (shown as U, unknown), with the reason in "query_errors".
    nlohmann::json query_errors = nlohmann::json::array();
    const std::pair<const char*, int> kinds[] = {
        {probe_json::kP2pRead, 0}, {probe_json::kP2pWrite, 1}, {probe_json::kP2pNvlink, 2}};
    for (const auto& [name, index] : kinds) {
      nlohmann::json m = nlohmann::json::array();
      for (unsigned i = 0; i < n; ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (unsigned j = 0; j < n; ++j) {
          int st = -1;
          nvmlDevice_t a = s.gpus()[i].handle, b = s.gpus()[j].handle;
          if (i == j) {
            st = 0;
          } else if (a && b) {
            nvmlReturn_t r = s.nvml().p2p_status(a, b, index, &st);
            if (r != kNvmlSuccess) {
              st = -1;
              if (query_errors.size() < 8)
                query_errors.push_back("GPU" + std::to_string(i) + "-GPU" + std::to_string(j) + " " + name + ": " +
                                       s.nvml().err(r));
            }
          }
          row.push_back(st);
        }
        m.push_back(row);
      }
      out[name] = m;
    }
    if (!query_errors.empty()) out[probe_json::kQueryErrors] = query_errors;
    inventory = s.gpus();
  }
  if (opts.bandwidth) out[probe_json::kBandwidth] = probe_peer_bandwidth(opts, inventory);
  return out;
}

}  // namespace gpudiag::probe
