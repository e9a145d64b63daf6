#include "healthcheck/checks/port_roles.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "healthcheck/checks/ib_selection.h"
#include "util/name_patterns.h"

namespace gpudiag {
namespace {

bool rule_matches(const RoleRule& r, const RolePort& p) {
  if (!r.hca.empty() && !matches(r.hca, p.hca)) return false;
  if (r.port && *r.port != p.port) return false;
  if (!r.netdev.empty() &&
      std::none_of(p.netdevs.begin(), p.netdevs.end(), [&](const std::string& n) { return matches(r.netdev, n); }))
    return false;
  return true;
}

// A bonded RoCE device (mlx5_bond_0) carries the host network, not the GPU fabric.
bool is_bond(const std::string& hca) { return hca.find("_bond_") != std::string::npos; }

}  // namespace

PortRoles assign_roles(const std::vector<RolePort>& ports, int gpus, const std::vector<RoleRule>& rules) {
  PortRoles out;
  std::vector<std::size_t> open;  // ports the config and the bond rule leave to the node
  for (std::size_t i = 0; i < ports.size(); ++i) {
    const RolePort& p = ports[i];
    auto rule = std::find_if(rules.begin(), rules.end(), [&](const RoleRule& r) { return rule_matches(r, p); });
    if (rule != rules.end()) {
      out[p.subject()] = {rule->role, fmt::format("ib.roles, line {}", rule->line), true};
    } else if (is_bond(p.hca)) {
      out[p.subject()] = {PortRole::frontend, "a bonded device: the host network", false};
    } else {
      open.push_back(i);
    }
  }

  // For each GPU, the devices nearest to it: the ones NCCL would pair with it.
  std::vector<bool> nearest(ports.size(), false);
  bool placed = false;
  for (int g = 0; g < gpus; ++g) {
    int best = std::numeric_limits<int>::max();
    for (std::size_t i : open)
      if (g < static_cast<int>(ports[i].gpu_distance.size())) best = std::min(best, ports[i].gpu_distance[g]);
    if (best >= kNoPath) continue;
    placed = true;
    for (std::size_t i : open)
      if (g < static_cast<int>(ports[i].gpu_distance.size()) && ports[i].gpu_distance[g] == best) nearest[i] = true;
  }
  if (!placed)
    for (std::size_t i : open) nearest[i] = true;

  // The fabric is one kind of device: a front-end card that happens to sit as near a
  // GPU (a host bridge shared with it, no switch) is not part of it.
  std::vector<std::pair<std::string, int>> kinds;
  for (std::size_t i : open) {
    if (!nearest[i]) continue;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == ports[i].kind; });
    if (it == kinds.end()) kinds.emplace_back(ports[i].kind, 1);
    else ++it->second;
  }
  std::optional<std::string> fabric_kind;
  int most = 0;
  for (const auto& [kind, n] : kinds)
    if (n > most) most = n, fabric_kind = kind;

  const std::string near_why = gpus == 0 || !placed ? "no GPU placed on PCIe: every RDMA device is taken for the fabric"
                                                    : "nearest to a GPU on PCIe";
  for (std::size_t i : open) {
    const RolePort& p = ports[i];
    if (nearest[i] && fabric_kind && p.kind == *fabric_kind) {
      out[p.subject()] = {PortRole::fabric, near_why, false};
    } else if (!p.link) {
      out[p.subject()] = {PortRole::unused,
                          fmt::format("no link partner (phys_state {}), and not the GPU fabric: not cabled",
                                      p.phys.empty() ? "unreadable" : p.phys),
                          false};
    } else if (p.link_layer == "Ethernet") {
      out[p.subject()] = {PortRole::frontend, "Ethernet, not the GPU fabric", false};
    } else {
      out[p.subject()] = {PortRole::storage,
                          fmt::format("{}, not the GPU fabric", p.link_layer.empty() ? "link layer unknown" : p.link_layer),
                          false};
    }
  }
  return out;
}

int pcie_distance(const PciDevice& a, const PciDevice& b) {
  for (std::size_t i = 0; i < a.upstream.size(); ++i) {
    auto it = std::find(b.upstream.begin(), b.upstream.end(), a.upstream[i]);
    if (it != b.upstream.end()) return static_cast<int>(i + (it - b.upstream.begin()) + 2);
  }
  if (a.numa_node && b.numa_node && *a.numa_node >= 0 && *a.numa_node == *b.numa_node) return kSameNuma;
  return kNoPath;
}

std::vector<RolePort> role_ports(const IbInventory& ib, const PciInventory* pci, const IbExpect& expect, int* gpus) {
  std::vector<const PciDevice*> gpu_devs;
  if (pci)
    for (const auto& d : pci->devices)
      if (d.is_nvidia_gpu()) gpu_devs.push_back(&d);
  if (gpus) *gpus = static_cast<int>(gpu_devs.size());
  std::vector<RolePort> out;
  for (const auto& hca : ib.hcas) {
    if (!ib_hca_selected(expect, hca.name)) continue;
    const PciDevice* dev = pci && !hca.pci_bdf.empty() ? pci->find(hca.pci_bdf) : nullptr;
    std::vector<int> distance;
    for (const PciDevice* g : gpu_devs) distance.push_back(dev ? pcie_distance(*dev, *g) : kNoPath);
    for (const auto& p : hca.ports) {
      RolePort rp;
      rp.hca = hca.name;
      rp.port = p.number;
      rp.kind = hca.kind();
      rp.netdevs = hca.netdevs;
      if (p.link_layer) rp.link_layer = *p.link_layer;
      rp.link = p.phys_state && p.phys_state->code == kPhysLinkUp;
      if (p.phys_state) rp.phys = p.phys_state->name;
      rp.gpu_distance = distance;
      out.push_back(std::move(rp));
    }
  }
  return out;
}

PortRoles port_roles(const IbInventory& ib, const PciInventory* pci, const IbExpect& expect) {
  int gpus = 0;
  auto ports = role_ports(ib, pci, expect, &gpus);
  return assign_roles(ports, gpus, expect.roles);
}

RoleOf role_of(const PortRoles& roles, const std::string& subject) {
  auto it = roles.find(subject);
  return it == roles.end() ? RoleOf{} : it->second;
}

}  // namespace gpudiag
