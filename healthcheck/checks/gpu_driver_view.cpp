#include "healthcheck/checks/gpu_driver_view.h"

#include <fmt/format.h>

#include "probe/probe_json.h"
#include "util/name_patterns.h"

namespace gpudiag {
namespace {

// nvmlClocksEventReason* bits (nvml.h; the same values as the older
// nvmlClocksThrottleReason* names). Idle (0x1), application clocks (0x2), SW power cap
// (0x4) and sync boost (0x10) are how a working GPU runs; these are not.
constexpr unsigned long long kHwSlowdown = 0x8;      // nvmlClocksEventReasonHwSlowdown
constexpr unsigned long long kSwThermal = 0x20;      // nvmlClocksEventReasonSwThermalSlowdown
constexpr unsigned long long kHwThermal = 0x40;      // nvmlClocksEventReasonHwThermalSlowdown
constexpr unsigned long long kHwPowerBrake = 0x80;   // nvmlClocksEventReasonHwPowerBrakeSlowdown
constexpr unsigned kSlowdownMarginC = 5;             // this close to the slowdown temperature: a warning

void check_clocks(CheckResult& out, const nlohmann::json& g, const std::string& subject, const std::string& who,
                  const GpuExpect& expect) {
  if (auto reasons = probe_field<unsigned long long>(g, probe_json::kClocksEventReasons)) {
    std::vector<std::string> names, fixes;
    if (*reasons & kHwSlowdown) {
      names.push_back("HW slowdown");
      fixes.push_back("HW slowdown: the board signals overheating or a power supply fault");
    }
    if (*reasons & kHwThermal) {
      names.push_back("HW thermal slowdown");
      fixes.push_back("HW thermal slowdown: check fans, airflow and the inlet temperature");
    }
    if (*reasons & kHwPowerBrake) {
      names.push_back("HW power brake");
      fixes.push_back("HW power brake: the system asserted it; check the PSUs and the BMC's event log");
    }
    if (!names.empty() && expect.throttle != Policy::ignore) {
      std::string list, fix;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      for (const auto& f : fixes) fix += (fix.empty() ? "" : "; ") + f;
      if (*reasons & kSwThermal) list += ", SW thermal slowdown";
      out.add({subject, policy_status(expect.throttle),
               fmt::format("{}: clocks pulled down by the hardware: {} (clocks event reasons {:#x})", who, list,
                           *reasons),
               fix + " (`nvidia-smi -q -d PERFORMANCE`); gpu.throttle sets how severe this is"});
    }
  }
  const auto temp = probe_field<unsigned long long>(g, probe_json::kTemperatureC);
  const auto slowdown = probe_field<unsigned long long>(g, probe_json::kSlowdownTemperatureC);
  if (temp && slowdown && *slowdown > 0 && (*temp >= *slowdown || *slowdown - *temp <= kSlowdownMarginC))
    out.add({subject, Status::warning,
             fmt::format("{}: {} C, {} its slowdown temperature of {} C", who, *temp,
                         *temp >= *slowdown ? "at or above" : fmt::format("within {} C of", kSlowdownMarginC),
                         *slowdown),
             "the GPU is about to lower its clocks: check fans, airflow and the inlet temperature "
             "(`nvidia-smi -q -d TEMPERATURE`)"});
  const auto replays = probe_field<unsigned long long>(g, probe_json::kPcieReplayCount);
  if (replays && *replays > expect.pcie_replay_max)
    out.add({subject, Status::warning,
             fmt::format("{}: {} PCIe replays since the driver loaded (gpu.pcie_replay_max {})", who, *replays,
                         expect.pcie_replay_max),
             "the PCIe link retransmits: reseat the GPU and check its riser or retimer; watch whether the count "
             "keeps growing (`nvidia-smi -q -d PCIE`)"});
}

void add_metrics(CheckResult& out, const nlohmann::json& g, const std::string& index, const std::string& bus) {
  const std::vector<std::pair<std::string, std::string>> labels = {{"gpu", index}, {"bdf", bus}};
  if (auto t = probe_field<unsigned long long>(g, probe_json::kTemperatureC))
    out.metrics.push_back({"gpudiag_gpu_temperature_celsius", "GPU temperature (NVML, GPU sensor)", labels,
                           static_cast<double>(*t)});
  if (auto r = probe_field<unsigned long long>(g, probe_json::kClocksEventReasons))
    out.metrics.push_back({"gpudiag_gpu_clocks_event_reasons",
                           "NVML clocks event (throttle) reasons bitmask: 0x8 HW slowdown, 0x40 HW thermal, 0x80 "
                           "HW power brake",
                           labels, static_cast<double>(*r)});
  if (auto r = probe_field<unsigned long long>(g, probe_json::kPcieReplayCount))
    out.metrics.push_back(
        {"gpudiag_gpu_pcie_replays", "PCIe replay counter since the driver loaded", labels, static_cast<double>(*r)});
}

void check_one(CheckResult& out, const nlohmann::json& g, std::size_t pos, const GpuExpect& expect) {
  const auto index = probe_field<unsigned long long>(g, probe_json::kIndex).value_or(pos);
  const std::string subject = fmt::format("GPU{}", index);
  const std::string bus = probe_field<std::string>(g, probe_json::kPciBusId).value_or("bus id unknown");
  const std::string name = probe_field<std::string>(g, probe_json::kGpuName).value_or("unknown model");
  const std::string who = fmt::format("{} ({}, {})", subject, name, bus);
  std::size_t before = out.findings.size();

  if (auto why = probe_field<std::string>(g, probe_json::kNotAccessible)) {
    // NO_PERMISSION: a job's device cgroup hides the GPU from this process. Nothing is
    // known about it from here, which is not a fault.
    out.add({subject, Status::unknown, fmt::format("{}: not accessible here ({})", subject, *why),
             "a job's cgroup hides this GPU: run gpudiag-health outside jobs (HealthCheckProgram, as root) to check "
             "it"});
    return;
  }
  if (g.contains(probe_json::kErrors) && g[probe_json::kErrors].is_array())
    for (const auto& e : g[probe_json::kErrors])
      if (e.is_string())
        out.add({subject, Status::critical, fmt::format("{}: {}", who, e.get<std::string>()),
                 "the driver cannot talk to this GPU: look for Xid errors in `dmesg`; reset it (`nvidia-smi -r`) or "
                 "reboot"});
  if (auto ecc = probe_field<unsigned long long>(g, probe_json::kEccUncorrectedVolatile); ecc && *ecc > 0)
    out.add({subject, Status::critical,
             fmt::format("{}: {} uncorrected ECC error(s) since the driver loaded", who, *ecc),
             "results on this GPU cannot be trusted: drain, reset the GPU and watch whether the errors return; "
             "replace it if they do"});
  if (probe_field<bool>(g, probe_json::kRetiredPagesPending).value_or(false))
    out.add({subject, Status::warning, fmt::format("{}: retired memory pages are pending", who),
             "reset the GPU (`nvidia-smi -r`) or reboot so that the pages are retired"});
  if (g.contains(probe_json::kRemappedRows) && g[probe_json::kRemappedRows].is_object()) {
    const auto& rr = g[probe_json::kRemappedRows];
    if (probe_field<bool>(rr, probe_json::kRowsFailure).value_or(false))
      out.add({subject, Status::critical, fmt::format("{}: row remapping failed", who),
               "the GPU has run out of spare memory rows: replace it"});
    else if (probe_field<bool>(rr, probe_json::kRowsPending).value_or(false))
      out.add({subject, Status::warning, fmt::format("{}: a memory row remapping is pending", who),
               "reset the GPU (`nvidia-smi -r`) or reboot to apply it"});
  }
  if (g.contains(probe_json::kNvlinks) && g[probe_json::kNvlinks].is_array() && !g[probe_json::kNvlinks].empty()) {
    std::vector<std::string> down;
    int active = 0, total = 0;
    for (const auto& l : g[probe_json::kNvlinks]) {
      ++total;
      if (probe_field<bool>(l, probe_json::kLinkActive).value_or(false)) ++active;
      else down.push_back(std::to_string(probe_field<unsigned long long>(l, probe_json::kLink).value_or(total - 1)));
    }
    // All links down is how a PCIe card without a bridge looks; some down is a
    // degraded fabric, which costs every collective on the node.
    if (active > 0 && !down.empty()) {
      std::string list;
      for (const auto& d : down) list += (list.empty() ? "" : ", ") + d;
      out.add({subject, Status::critical,
               fmt::format("{}: NVLink {} down ({} of {} active)", who, list, active, total),
               "see `nvidia-smi nvlink -s`; reseat or reboot; on HGX systems check that nvidia-fabricmanager runs"});
    }
  }
  if (g.contains(probe_json::kFabric) && g[probe_json::kFabric].is_object()) {
    // NVSwitch systems: each GPU registers with the fabric manager before CUDA can use
    // it (nvmlGpuFabricState_t: 1 not started, 2 in progress, 3 completed).
    const auto& f = g[probe_json::kFabric];
    const auto state = probe_field<unsigned long long>(f, probe_json::kFabricState).value_or(0);
    const auto status = probe_field<unsigned long long>(f, probe_json::kFabricStatus).value_or(0);
    const std::string fm = "check nvidia-fabricmanager (`systemctl status nvidia-fabricmanager`, "
                           "/var/log/fabricmanager.log); its version must match the driver's";
    if (state == 3 && status != 0)
      out.add({subject, Status::critical,
               fmt::format("{}: NVSwitch fabric registration failed: {}", who,
                           probe_field<std::string>(f, probe_json::kFabricStatusText).value_or(std::to_string(status))),
               fm});
    else if (state == 1)
      out.add({subject, Status::critical, fmt::format("{}: NVSwitch fabric registration has not started", who), fm});
    else if (state == 2)
      out.add({subject, Status::warning, fmt::format("{}: NVSwitch fabric registration is still in progress", who),
               "wait a minute and check again; if it stays, " + fm});
  }
  check_clocks(out, g, subject, who, expect);
  add_metrics(out, g, std::to_string(index), bus);
  if (!expect.model.empty() && !matches(expect.model, name))
    out.add({subject, Status::warning, fmt::format("{} is not a '{}' (gpu.model)", who, expect.model),
             "update gpu.model if the hardware changed"});
  if (out.findings.size() == before)
    out.add({subject, Status::ok,
             fmt::format("{}: healthy{}", who, probe_field<bool>(g, probe_json::kMig).value_or(false) ? ", MIG mode on" : ""), ""});
  // A few replays are normal link life; the count is in details either way.
  if (auto replays = probe_field<unsigned long long>(g, probe_json::kPcieReplayCount);
      replays && *replays > 0 && *replays <= expect.pcie_replay_max)
    out.add({subject, Status::ok, fmt::format("{}: {} PCIe replay(s) since the driver loaded", who, *replays), ""});
}

}  // namespace

std::string add_driver_view(CheckResult& out, const nlohmann::json& devices, int pci_gpus, const GpuExpect& expect) {
  if (!devices.contains(probe_json::kGpus) || !devices[probe_json::kGpus].is_array()) {
    out.add({"probe", Status::unknown, "the GPU probe's answer has no GPU list", "this is a gpudiag bug: please report it"});
    return "driver view unreadable";
  }
  const auto& gpus = devices[probe_json::kGpus];
  const int seen = static_cast<int>(gpus.size());
  if (seen < pci_gpus)
    out.add({"gpus", Status::critical,
             fmt::format("the driver sees {} GPU(s) but {} are on PCI", seen, pci_gpus),
             "a GPU is lost to the driver (Xid 79: fallen off the bus, or failed init): look at `dmesg` and "
             "`nvidia-smi`; reset the GPU or reboot"});
  else if (seen > pci_gpus)
    out.add({"gpus", Status::warning, fmt::format("the driver sees {} GPU(s) but {} are on PCI", seen, pci_gpus),
             "PCI shows fewer NVIDIA GPUs than the driver: check --fs-root and `lspci -d 10de:`"});
  for (std::size_t i = 0; i < gpus.size(); ++i) check_one(out, gpus[i], i, expect);
  out.details["driver"] = devices;
  std::string version = probe_field<std::string>(devices, probe_json::kDriverVersion).value_or("");
  return fmt::format("{} seen by driver{}", seen, version.empty() ? "" : " " + version);
}

}  // namespace gpudiag
