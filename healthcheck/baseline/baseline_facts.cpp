#include "healthcheck/baseline/baseline_facts.h"

#include <cstdlib>

#include "healthcheck/checks/check_iommu.h"
#include "healthcheck/checks/gpu_probe.h"
#include "probe/probe_json.h"
#include "nodeinfo/pci_devices.h"
#include "nodeinfo/pcie_links.h"
#include "nodeinfo/sysfs_text.h"
#include "util/this_host.h"

namespace gpudiag {
namespace {

// The pcie check's own reader (one rule for the sysfs format). A GPU's speed is its
// maximum, not its current one: an idle GPU drops its link to 2.5 GT/s, and a floor
// taken then would accept any downtrained link (the pcie check holds gpu_speed against
// what the link can train to).
PcieLinkFact read_link(const RootedFs& fs, const std::string& bdf, const std::string& name, bool gpu) {
  PcieLinkFact l{bdf, name, std::nullopt, std::nullopt};
  const PcieLink link = read_pcie_link(fs, bdf);
  if (link.width) l.width = *link.width;
  const Result<double>& speed = gpu ? link.max_speed : link.speed;
  if (speed) l.speed_gts = *speed;
  return l;
}

std::string node_name(const RootedFs& fs) {
  if (auto raw = fs.read_file("/proc/sys/kernel/hostname", 256))
    if (auto text = attribute_text(*raw, "/proc/sys/kernel/hostname", 255); text && !text->empty())
      return short_name(*text);
  return fs.is_host_root() ? short_hostname() : "an unnamed node";
}

}  // namespace

BaselineFacts gather_baseline_facts(const CheckContext& ctx) {
  BaselineFacts f;
  f.host = node_name(ctx.fs);
  f.ib = discover_ib(ctx.fs);
  PciInventory pci = discover_pci(ctx.fs);
  f.pci_error = pci.error;
  f.roles = port_roles(f.ib, pci.error.empty() ? &pci : nullptr, ctx.cfg.ib);
  for (const auto& dev : pci.devices) {
    if (!dev.is_nvidia_gpu()) continue;
    ++f.pci_gpus;
    f.gpu_links.push_back(read_link(ctx.fs, dev.bdf, "GPU " + dev.bdf, true));
  }
  for (const auto& hca : f.ib.hcas)
    if (!hca.pci_bdf.empty()) f.hca_links.push_back(read_link(ctx.fs, hca.pci_bdf, hca.name, false));
  IommuFacts iommu = read_iommu_facts(ctx.fs);
  f.iommu_mode = iommu_mode(iommu);
  f.iommu_errors = iommu.errors;

  // The same rule as the gpu check: a fixture tree's GPUs are not this machine's driver's.
  if (f.pci_gpus == 0) return f;
  if (!ctx.fs.is_host_root() && ctx.cfg.gpu.probe.empty()) {
    f.gpu_note = "not read: --fs-root is a copy of /sys, and the driver cannot be redirected";
    return f;
  }
  ProbeOutcome probe = run_probe(ctx, "devices", {});
  if (!probe.ok()) {
    f.gpu_note = "not read: " + probe.failure->message;
    return f;
  }
  std::vector<std::string> names;
  if (probe.data.contains("gpus") && probe.data["gpus"].is_array())
    for (const auto& g : probe.data["gpus"]) names.push_back(probe_field<std::string>(g, "name").value_or(""));
  f.gpu_names = names;
  return f;
}

}  // namespace gpudiag
