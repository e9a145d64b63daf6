#include "healthcheck/checks/check_ib.h"
#include "healthcheck/checks/inventory_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "healthcheck/checks/ib_selection.h"
#include "healthcheck/checks/rdma_provider.h"
#include "util/name_patterns.h"
#include "nodeinfo/verbs_devices.h"

namespace gpudiag {
namespace {

std::string down_hint(const IbPort& p, RdmaProvider prov) {
  const int phys = p.phys_state ? p.phys_state->code : -1;
  const int state = p.state ? p.state->code : -1;
  if (prov == RdmaProvider::efa) return fix_link_down(prov, p.hca);
  if (phys == 2)
    return "no link partner: check the cable, the transceiver and the switch port";
  if (phys == 3) return fmt::format("the port is disabled: enable it on the switch or with `ibportstate`");
  if (phys == kPhysLinkUp && (state == 2 || state == 3))
    return "the link is up but no subnet manager activated the port: check that the subnet manager "
           "(opensm or the switch's) is running and sees this port";
  return fix_link_down(prov, p.hca);
}

std::string state_text(const Result<PortState>& s) { return s ? s->name : std::string("unreadable"); }

// The fastest up port among the ports of identical devices (same kind, link layer and
// role): without an expected rate, a port slower than that is wrong on its face. A
// storage port at NDR200 is no sibling of a compute port at NDR400 on the same card model.
struct SiblingRate {
  double gbps = 0;
  std::string model, rate_text;
};

std::string sibling_key(const IbHca& hca, const IbPort& p, PortRole role) {
  return hca.kind().empty() || !p.link_layer ? std::string()
                                             : role_name(role) + "/" + hca.kind() + "/" + *p.link_layer;
}

// "mlx5_3 port 1" for the GPU fabric (what a port is unless said otherwise), "mlx5_1 port 1
// (storage)" for the others: the role is in every line that NHC and drain reasons show.
std::string who_of(const IbPort& p, PortRole role) {
  return role == PortRole::fabric ? fmt::format("{} port {}", p.hca, p.number)
                                  : fmt::format("{} port {} ({})", p.hca, p.number, role_name(role));
}

struct PortJudge {
  const IbHca& hca;
  RdmaProvider prov;
  RoleOf role;
  RoleExpect expect;
  std::optional<std::string> usual_layer;  // what most ports of this role have, for the no-config rule
  const SiblingRate* siblings = nullptr;
};

void check_port(const IbPort& p, const PortJudge& j, CheckResult& out, int& bad) {
  const std::string subj = p.subject();
  const std::string who = who_of(p, j.role.role);
  const std::size_t before = out.findings.size();
  auto unknown = [&](const std::string& err) {
    out.add({subj, Status::unknown, fmt::format("{}: cannot tell its state: {}", who, err), fix_unreadable(j.prov, p.hca)});
  };

  if (!p.state) unknown(p.state.error());
  if (!p.phys_state) unknown(p.phys_state.error());
  if (p.state && p.phys_state && !p.is_up()) {
    out.add({subj, Status::critical,
             fmt::format("{} is {} (phys_state {})", who, state_text(p.state), state_text(p.phys_state)),
             down_hint(p, j.prov)});
  }
  if (!p.link_layer) {
    unknown(p.link_layer.error());
  } else if (j.expect.link_layer && *p.link_layer != *j.expect.link_layer) {
    out.add({subj, Status::critical,
             fmt::format("{} is {} where {} is expected", who, *p.link_layer, *j.expect.link_layer),
             fix_link_layer(j.prov, p.hca, p.number, *j.expect.link_layer)});
  } else if (!j.expect.link_layer && j.usual_layer && *p.link_layer != *j.usual_layer) {
    out.add({subj, Status::warning,
             fmt::format("{} is {} where the other {} ports are {}", who, *p.link_layer, role_name(j.role.role),
                         *j.usual_layer),
             fix_link_layer(j.prov, p.hca, p.number, *j.usual_layer)});
  }
  // A port that is down reports a meaningless rate; its finding above says enough.
  if (!p.rate_gbps) {
    unknown(p.rate_gbps.error());
  } else if (p.is_up() && j.expect.rate_gbps && *p.rate_gbps + 1e-9 < *j.expect.rate_gbps) {
    out.add({subj, Status::critical,
             fmt::format("{} runs at {} where {:g} Gb/sec is expected", who, p.rate_text, *j.expect.rate_gbps),
             fix_slow(j.prov, p.hca)});
  } else if (p.is_up() && !j.expect.rate_gbps && j.siblings && *p.rate_gbps + 1e-9 < j.siblings->gbps) {
    out.add({subj, Status::warning,
             fmt::format("{} runs at {} where its identical siblings ({} {}) run at {}", who, p.rate_text,
                         j.siblings->model, *p.link_layer, j.siblings->rate_text),
             fix_slow(j.prov, p.hca)});
  }
  if (out.findings.size() != before) {
    ++bad;
    return;
  }
  out.add({subj, Status::ok,
           fmt::format("{} {} {} {} {} ({}{})", who, state_text(p.state), state_text(p.phys_state), p.rate_text,
                       *p.link_layer, j.role.role == PortRole::fabric ? "fabric: " : "", j.role.why),
           ""});
}

}  // namespace

CheckResult evaluate_ib(const IbInventory& inv, const IbExpect& expect,
                        const std::optional<std::vector<std::string>>& verbs, const PortRoles* given_roles) {
  CheckResult out;
  out.name = "ib";
  const bool expects_any = !expect.hcas.empty() || expect.count.value_or(0) > 0;

  if (!inv.class_present) {
    if (expects_any)
      out.add({"infiniband", Status::critical, "no RDMA devices: /sys/class/infiniband is missing",
               "load the RDMA stack (`modprobe mlx5_ib`, or `modprobe efa` on AWS) and check that the devices are on "
               "PCI (`lspci -d 15b3:`, `lspci -d 1d0f:`)"});
    out.summary = "no InfiniBand devices";
    return out;
  }
  const PortRoles roles = given_roles ? *given_roles : port_roles(inv, nullptr, expect);

  std::vector<const IbHca*> checked;
  for (const auto& hca : inv.hcas) {
    if (matches_any(expect.exclude, hca.name)) {
      out.add({hca.name, Status::ok, hca.name + " is excluded by ib.exclude", ""});
      continue;
    }
    if (!expect.hcas.empty() && !matches_any(expect.hcas, hca.name)) {
      out.add({hca.name, Status::ok, hca.name + " is not among ib.hcas, not checked", ""});
      continue;
    }
    checked.push_back(&hca);
  }

  for (const auto& want : expect.hcas) {
    if (has_glob(want)) continue;
    bool present = std::any_of(inv.hcas.begin(), inv.hcas.end(), [&](const IbHca& h) { return h.name == want; });
    if (!present) {
      IbHca named;
      named.name = want;
      out.add({want, Status::critical, want + " is missing: it is expected but not in /sys/class/infiniband",
               fix_missing(rdma_provider(named))});
    }
  }
  if (expect.count && static_cast<int>(checked.size()) < *expect.count) {
    std::string names;
    for (const auto* h : checked) names += (names.empty() ? "" : ",") + h->name;
    const RdmaProvider prov = checked.empty() ? RdmaProvider::other : rdma_provider(*checked.front());
    out.add({"infiniband", Status::critical,
             fmt::format("{} HCAs found where {} are expected (found: {})", checked.size(), *expect.count,
                         names.empty() ? "none" : names),
             prov == RdmaProvider::mlx5
                 ? "check `lspci -d 15b3:` and `dmesg | grep mlx5` for an HCA that fell off the bus or failed to "
                   "initialise"
                 : fix_missing(prov)});
  }

  std::map<std::string, SiblingRate> fastest;
  std::map<PortRole, std::map<std::string, int>> layers;  // per role: link layer -> ports
  for (const auto* hca : checked) {
    for (const auto& p : hca->ports) {
      const PortRole role = role_of(roles, p.subject()).role;
      if (role == PortRole::unused) continue;
      if (p.link_layer) ++layers[role][*p.link_layer];
      const std::string key = sibling_key(*hca, p, role);
      if (key.empty() || !p.is_up() || !p.rate_gbps) continue;
      auto& best = fastest[key];
      if (*p.rate_gbps > best.gbps) best = {*p.rate_gbps, hca->kind(), p.rate_text};
    }
  }
  // The link layer most ports of a role have, when a clear majority does.
  auto usual_layer = [&](PortRole role) -> std::optional<std::string> {
    auto it = layers.find(role);
    if (it == layers.end()) return std::nullopt;
    int total = 0, most = 0;
    std::string layer;
    for (const auto& [l, n] : it->second) {
      total += n;
      if (n > most) most = n, layer = l;
    }
    if (most * 2 <= total) return std::nullopt;
    return layer;
  };

  int ports = 0, bad = 0, unused = 0;
  nlohmann::json port_details = nlohmann::json::array();
  for (const auto* hca : checked) {
    const RdmaProvider prov = rdma_provider(*hca);
    if (verbs && std::find(verbs->begin(), verbs->end(), hca->name) == verbs->end())
      out.add({hca->name, Status::critical,
               hca->name + " is in sysfs but libibverbs cannot open it: NCCL will not use it for RDMA",
               "load ib_uverbs (`modprobe ib_uverbs`) and check that /dev/infiniband/uverbs* exist and are "
               "readable by users"});
    if (!hca->error.empty()) {
      out.add({hca->name, Status::unknown, fmt::format("{}: cannot list its ports: {}", hca->name, hca->error),
               prov == RdmaProvider::mlx5 ? "check `dmesg | grep mlx5` and reload the driver"
                                          : fix_unreadable(prov, hca->name)});
      continue;
    }
    for (const auto& p : hca->ports) {
      const RoleOf role = role_of(roles, p.subject());
      port_details.push_back({{"subject", p.subject()},
                              {"role", role_name(role.role)},
                              {"why", role.why},
                              {"provider", provider_name(prov)},
                              {"driver", hca->driver}});
      if (role.role == PortRole::unused) {
        ++unused;
        out.add({p.subject(), Status::ok,
                 fmt::format("{} is {} (phys_state {}): not checked, {}", who_of(p, role.role), state_text(p.state),
                             state_text(p.phys_state), role.why),
                 ""});
        continue;
      }
      ++ports;
      auto best = fastest.find(sibling_key(*hca, p, role.role));
      PortJudge j{*hca, prov, role, expect.expect_for(role.role), usual_layer(role.role),
                  best == fastest.end() ? nullptr : &best->second};
      check_port(p, j, out, bad);
    }
  }
  out.details = {{"ports", port_details}};
  out.summary = bad ? fmt::format("{} HCAs, {} of {} ports bad", checked.size(), bad, ports)
                    : fmt::format("{} HCAs, {} ports up", checked.size(), ports);
  if (unused) out.summary += fmt::format(", {} unused", unused);
  return out;
}

namespace {

// Rate and state of every checked port, for --format prometheus; and each port's role
// as an info metric (value 1), so that queries can join on it without relabelling the
// port metrics dashboards already use.
void add_ib_metrics(CheckResult& out, const IbInventory& inv, const IbExpect& expect, const PortRoles& roles) {
  for (const auto& hca : inv.hcas) {
    if (!ib_hca_selected(expect, hca.name)) continue;
    for (const auto& p : hca.ports) {
      const std::vector<std::pair<std::string, std::string>> labels = {{"hca", p.hca},
                                                                       {"port", std::to_string(p.number)}};
      out.metrics.push_back({"gpudiag_ib_port_role",
                             "What an RDMA port is for (fabric, storage, frontend, unused) and its provider; always 1.",
                             {{"hca", p.hca},
                              {"port", std::to_string(p.number)},
                              {"role", role_name(role_of(roles, p.subject()).role)},
                              {"provider", provider_name(rdma_provider(hca))}},
                             1});
      if (p.rate_gbps)
        out.metrics.push_back({"gpudiag_ib_port_rate_gbps", "InfiniBand port rate in Gb/s, as the kernel reports it.",
                               labels, *p.rate_gbps});
      if (p.state)
        out.metrics.push_back({"gpudiag_ib_port_state", "InfiniBand port state (4 is ACTIVE).", labels,
                               static_cast<double>(p.state->code)});
      if (p.phys_state)
        out.metrics.push_back({"gpudiag_ib_port_phys_state", "InfiniBand port physical state (5 is LinkUp).", labels,
                               static_cast<double>(p.phys_state->code)});
    }
  }
}

}  // namespace

CheckResult run_ib_check(const CheckContext& ctx) {
  const IbInventory& inv = ib_inventory(ctx);
  std::optional<std::vector<std::string>> verbs;
  if (ctx.fs.is_host_root() && !inv.hcas.empty()) verbs = verbs_device_names();
  const PciInventory& pci = pci_inventory(ctx);
  const PortRoles roles = port_roles(inv, pci.error.empty() ? &pci : nullptr, ctx.cfg.ib);
  CheckResult out = evaluate_ib(inv, ctx.cfg.ib, verbs, &roles);
  add_ib_metrics(out, inv, ctx.cfg.ib, roles);
  return out;
}

}  // namespace gpudiag
