#include "healthcheck/checks/check_gpu.h"
#include "healthcheck/checks/inventory_cache.h"

#include <fmt/format.h>

#include "healthcheck/checks/gpu_driver_view.h"
#include "healthcheck/checks/gpu_probe.h"
#include "util/text_lists.h"
#include "probe/probe_json.h"

namespace gpudiag {
namespace {

std::string numa_text(int numa) { return numa < 0 ? "NUMA unknown" : fmt::format("NUMA {}", numa); }

// The driver's memory error counts per GPU, for --format prometheus.
void add_ecc_metrics(CheckResult& out, const nlohmann::json& data) {
  if (!data.contains(probe_json::kGpus) || !data[probe_json::kGpus].is_array()) return;
  for (const auto& g : data[probe_json::kGpus]) {
    if (!g.is_object() || !g.contains(probe_json::kPciBusId) || !g[probe_json::kPciBusId].is_string()) continue;
    const std::vector<std::pair<std::string, std::string>> labels = {{"gpu", g[probe_json::kPciBusId].get<std::string>()}};
    if (g.contains(probe_json::kEccUncorrectedVolatile) && g[probe_json::kEccUncorrectedVolatile].is_number_unsigned())
      out.metrics.push_back({"gpudiag_gpu_ecc_uncorrected_volatile",
                             "Uncorrected ECC errors on a GPU since the driver loaded (NVML volatile count).", labels,
                             g[probe_json::kEccUncorrectedVolatile].get<double>()});
    if (g.contains(probe_json::kRemappedRows) && g[probe_json::kRemappedRows].is_object())
      for (const char* kind : {probe_json::kRowsCorrectable, probe_json::kRowsUncorrectable})
        if (g[probe_json::kRemappedRows].contains(kind) && g[probe_json::kRemappedRows][kind].is_number_unsigned()) {
          auto l = labels;
          l.emplace_back("cause", kind);
          out.metrics.push_back({"gpudiag_gpu_remapped_rows", "GPU memory rows remapped, by the error that caused it.",
                                 l, g[probe_json::kRemappedRows][kind].get<double>()});
        }
  }
}

}  // namespace

CheckResult evaluate_gpu(const PciInventory& pci, const GpuExpect& expect) {
  CheckResult out;
  out.name = "gpu";
  if (!pci.error.empty()) {
    out.add({"pci", Status::unknown, "cannot list PCI devices: " + pci.error, "is /sys mounted?"});
    out.summary = "PCI devices unreadable";
    return out;
  }
  int gpus = 0, unidentified = 0;
  for (const auto& dev : pci.devices) {
    const bool gpu = dev.is_nvidia_gpu();
    // A device whose vendor or class is unreadable might be a GPU we cannot count;
    // a bad numa_node only blurs the locality report.
    const bool identity = !dev.vendor || !dev.class_code;
    gpus += gpu;
    unidentified += identity;
    for (const auto& err : dev.errors) {
      if (!identity && !gpu) continue;
      out.add({dev.bdf, identity ? Status::unknown : Status::warning,
               fmt::format("PCI device {}: {}", dev.bdf, err),
               "the kernel should never expose this; check `lspci -vvv -s " + dev.bdf + "` and `dmesg`"});
    }
  }
  if (expect.count && gpus < *expect.count) {
    // Devices we could not identify may be the missing GPUs: that is not knowing,
    // not a confirmed loss.
    const bool maybe_there = *expect.count - gpus <= unidentified;
    out.add({"gpus", maybe_there ? Status::unknown : Status::critical,
             fmt::format("{} NVIDIA GPU(s) on PCI where {} are expected{}", gpus, *expect.count,
                         maybe_there ? fmt::format("; {} PCI device(s) could not be identified", unidentified) : ""),
             "a GPU has fallen off the bus or was not enumerated: look for Xid 79 in `dmesg`, then reseat or "
             "replace it; a cold reboot may bring it back for now"});
  } else if (expect.count && gpus > *expect.count) {
    out.add({"gpus", Status::warning, fmt::format("{} NVIDIA GPUs on PCI where {} are expected", gpus, *expect.count),
             "more GPUs than gpu.count: update the config if the hardware changed"});
  }
  out.summary = expect.count ? fmt::format("{} of {} GPUs on PCI", gpus, *expect.count)
                             : fmt::format("{} GPUs on PCI", gpus);
  return out;
}

void add_locality(CheckResult& out, const PciInventory& pci, const IbInventory& ib, const PciLocality& loc) {
  if (!loc.error.empty()) {
    out.add({"topology", Status::ok, "GPU/NIC locality unavailable: " + loc.error, ""});
    return;
  }
  struct Nic {
    std::string name, bdf;
    PciPlace place;
  };
  std::vector<Nic> nics;
  for (const auto& hca : ib.hcas) {
    auto it = loc.by_bdf.find(hca.pci_bdf);
    if (it != loc.by_bdf.end()) nics.push_back({hca.name, hca.pci_bdf, it->second});
  }
  nlohmann::json gpus_json = nlohmann::json::array(), nics_json = nlohmann::json::array();
  std::map<std::string, std::vector<std::string>> gpus_by_switch;
  for (const auto& dev : pci.devices) {
    if (!dev.is_nvidia_gpu()) continue;
    auto it = loc.by_bdf.find(dev.bdf);
    PciPlace place = it == loc.by_bdf.end() ? PciPlace{} : it->second;
    if (place.numa < 0 && dev.numa_node && *dev.numa_node >= 0) place.numa = *dev.numa_node;
    std::vector<std::string> near;
    for (const auto& n : nics)
      if (!place.switch_bdf.empty() && n.place.switch_bdf == place.switch_bdf) near.push_back(n.name);
    if (!place.switch_bdf.empty()) gpus_by_switch[place.switch_bdf].push_back(dev.bdf);
    std::string where = place.switch_bdf.empty() ? "no PCIe switch" : "PCIe switch " + place.switch_bdf;
    out.add({dev.bdf, Status::ok,
             fmt::format("GPU {}: {}, {}, {}", dev.bdf, numa_text(place.numa), where,
                         near.empty() ? "no NIC on the same switch" : "shares it with " + join(near)),
             ""});
    gpus_json.push_back({{"bdf", dev.bdf}, {"numa", place.numa}, {"switch", place.switch_bdf}, {"nics", near}});
  }
  for (const auto& n : nics) {
    std::vector<std::string> near;
    if (!n.place.switch_bdf.empty()) near = gpus_by_switch[n.place.switch_bdf];
    std::string where = n.place.switch_bdf.empty() ? "no PCIe switch" : "PCIe switch " + n.place.switch_bdf;
    out.add({n.name, Status::ok,
             fmt::format("NIC {} ({}): {}, {}, {}", n.name, n.bdf, numa_text(n.place.numa), where,
                         near.empty() ? "no GPU on the same switch" : "shares it with GPU " + join(near)),
             ""});
    nics_json.push_back(
        {{"name", n.name}, {"bdf", n.bdf}, {"numa", n.place.numa}, {"switch", n.place.switch_bdf}, {"gpus", near}});
  }
  out.details[probe_json::kGpus] = std::move(gpus_json);
  out.details["nics"] = std::move(nics_json);
}

static int count_gpus(const PciInventory& pci) {
  int n = 0;
  for (const auto& dev : pci.devices) n += dev.is_nvidia_gpu();
  return n;
}

CheckResult run_gpu_check(const CheckContext& ctx) {
  const PciInventory& pci = pci_inventory(ctx);
  CheckResult out = evaluate_gpu(pci, ctx.cfg.gpu);
  const int pci_gpus = count_gpus(pci);
  // Under --fs-root the PCI view is a fixture and the driver is this machine's: they
  // describe different nodes, so only a configured stand-in probe is asked.
  const bool fixture = ctx.fs.root() != "/";
  if (pci.error.empty() && (pci_gpus > 0 || !ctx.cfg.gpu.expects_none()) && !(fixture && ctx.cfg.gpu.probe.empty())) {
    ProbeOutcome probe = run_probe(ctx, "devices", {});
    if (probe.ok()) {
      out.summary += ", " + add_driver_view(out, probe.data, pci_gpus, ctx.cfg.gpu);
      add_ecc_metrics(out, probe.data);
    } else if (pci_gpus == 0 && probe.failure->status == Status::unknown) {
      // No GPU on PCI and no driver: nothing the driver could add. Said as the good news it
      // is: the probe's "cannot load NVML: ..." would read like an error on an OK line.
      out.add({"driver", Status::ok, "no NVIDIA driver either, as expected without a GPU", ""});
    } else {
      out.add(*probe.failure);
      out.summary += ", driver not queried";
    }
  } else if (fixture && ctx.cfg.gpu.probe.empty()) {
    out.add({"driver", Status::ok, "driver not queried: --fs-root is a copy of /sys, and the driver cannot be redirected", ""});
  }
  if (ctx.want_topology && pci.error.empty()) add_locality(out, pci, ib_inventory(ctx), load_pci_locality(ctx.fs.root()));
  return out;
}

}  // namespace gpudiag
