#include "healthcheck/check_ib.h"
#include "healthcheck/inventory_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "healthcheck/ib_selection.h"
#include "util/name_patterns.h"
#include "nodeinfo/verbs_devices.h"

namespace gpudiag {
namespace {

std::string down_hint(const IbPort& p) {
  const int phys = p.phys_state ? p.phys_state->code : -1;
  const int state = p.state ? p.state->code : -1;
  if (phys == 2)
    return "no link partner: check the cable, the transceiver and the switch port";
  if (phys == 3) return fmt::format("the port is disabled: enable it on the switch or with `ibportstate`");
  if (phys == kPhysLinkUp && (state == 2 || state == 3))
    return "the link is up but no subnet manager activated the port: check that the subnet manager "
           "(opensm or the switch's) is running and sees this port";
  return fmt::format("the link is training or recovering from errors: check the cable and run "
                     "`mlxlink -d {}` or `ibstat {}`",
                     p.hca, p.hca);
}

std::string state_text(const Result<PortState>& s) { return s ? s->name : std::string("unreadable"); }

// The fastest up port among the ports of identical HCAs (same model and link layer):
// without ib.rate_gbps, a port slower than that is wrong on its face.
struct SiblingRate {
  double gbps = 0;
  std::string model, rate_text;
};

std::string sibling_key(const IbHca& hca, const IbPort& p) {
  return hca.model.empty() || !p.link_layer ? std::string() : hca.model + "/" + *p.link_layer;
}

void check_port(const IbPort& p, const IbExpect& expect, CheckResult& out, int& bad,
                const SiblingRate* siblings = nullptr) {
  const std::string subj = p.subject();
  const std::string who = fmt::format("{} port {}", p.hca, p.number);
  const std::size_t before = out.findings.size();
  auto unknown = [&](const std::string& err) {
    out.add({subj, Status::unknown, fmt::format("{}: cannot tell its state: {}", who, err),
             "the IB driver should fill this file; check `dmesg` for mlx5 errors and reload the driver"});
  };

  if (!p.state) unknown(p.state.error());
  if (!p.phys_state) unknown(p.phys_state.error());
  if (p.state && p.phys_state && !p.is_up()) {
    out.add({subj, Status::critical,
             fmt::format("{} is {} (phys_state {})", who, state_text(p.state), state_text(p.phys_state)),
             down_hint(p)});
  }
  if (!p.link_layer) {
    unknown(p.link_layer.error());
  } else if (expect.link_layer && *p.link_layer != *expect.link_layer) {
    std::string hint = *expect.link_layer == "InfiniBand"
                           ? fmt::format("set the port to InfiniBand with `mlxconfig -d {} set LINK_TYPE_P{}=1` "
                                         "and reboot",
                                         p.hca, p.number)
                           : fmt::format("set the port to Ethernet with `mlxconfig -d {} set LINK_TYPE_P{}=2` "
                                         "and reboot",
                                         p.hca, p.number);
    out.add({subj, Status::critical,
             fmt::format("{} is {} where {} is expected", who, *p.link_layer, *expect.link_layer), hint});
  }
  // A port that is down reports a meaningless rate; its finding above says enough.
  if (!p.rate_gbps) {
    unknown(p.rate_gbps.error());
  } else if (p.is_up() && expect.rate_gbps && *p.rate_gbps + 1e-9 < *expect.rate_gbps) {
    out.add({subj, Status::critical,
             fmt::format("{} runs at {} where {:g} Gb/sec is expected", who, p.rate_text, *expect.rate_gbps),
             fmt::format("the link trained at a lower speed or width: reseat or replace the cable/transceiver, "
                         "check the switch port, and look at `mlxlink -d {}`",
                         p.hca)});
  } else if (p.is_up() && !expect.rate_gbps && siblings && *p.rate_gbps + 1e-9 < siblings->gbps) {
    out.add({subj, Status::warning,
             fmt::format("{} runs at {} where its identical siblings ({} {}) run at {}", who, p.rate_text,
                         siblings->model, *p.link_layer, siblings->rate_text),
             fmt::format("the link trained at a lower speed or width: reseat or replace the cable/transceiver, "
                         "check the switch port, and look at `mlxlink -d {}`",
                         p.hca)});
  }
  if (out.findings.size() != before) {
    ++bad;
    return;
  }
  out.add({subj, Status::ok,
           fmt::format("{} {} {} {} {}", who, state_text(p.state), state_text(p.phys_state), p.rate_text,
                       *p.link_layer),
           ""});
}

}  // namespace

CheckResult evaluate_ib(const IbInventory& inv, const IbExpect& expect,
                        const std::optional<std::vector<std::string>>& verbs) {
  CheckResult out;
  out.name = "ib";
  const bool expects_any = !expect.hcas.empty() || expect.count.value_or(0) > 0;

  if (!inv.class_present) {
    if (expects_any)
      out.add({"infiniband", Status::critical, "no InfiniBand devices: /sys/class/infiniband is missing",
               "load the RDMA stack (`modprobe mlx5_ib`) and check that the HCAs are seated (`lspci -d 15b3:`)"});
    out.summary = "no InfiniBand devices";
    return out;
  }

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
    if (!present)
      out.add({want, Status::critical, want + " is missing: it is expected but not in /sys/class/infiniband",
               "check that the HCA is seated (`lspci -d 15b3:`), its firmware is healthy and mlx5_core/mlx5_ib "
               "are loaded (`dmesg | grep mlx5`)"});
  }
  if (expect.count && static_cast<int>(checked.size()) < *expect.count) {
    std::string names;
    for (const auto* h : checked) names += (names.empty() ? "" : ",") + h->name;
    out.add({"infiniband", Status::critical,
             fmt::format("{} HCAs found where {} are expected (found: {})", checked.size(), *expect.count,
                         names.empty() ? "none" : names),
             "check `lspci -d 15b3:` and `dmesg | grep mlx5` for an HCA that fell off the bus or failed to "
             "initialise"});
  }

  std::map<std::string, SiblingRate> fastest;
  for (const auto* hca : checked) {
    for (const auto& p : hca->ports) {
      const std::string key = sibling_key(*hca, p);
      if (key.empty() || !p.is_up() || !p.rate_gbps) continue;
      auto& best = fastest[key];
      if (*p.rate_gbps > best.gbps) best = {*p.rate_gbps, hca->model, p.rate_text};
    }
  }

  int ports = 0, bad = 0;
  for (const auto* hca : checked) {
    if (verbs && std::find(verbs->begin(), verbs->end(), hca->name) == verbs->end())
      out.add({hca->name, Status::critical,
               hca->name + " is in sysfs but libibverbs cannot open it: NCCL will not use it for RDMA",
               "load ib_uverbs (`modprobe ib_uverbs`) and check that /dev/infiniband/uverbs* exist and are "
               "readable by users"});
    if (!hca->error.empty()) {
      out.add({hca->name, Status::unknown, fmt::format("{}: cannot list its ports: {}", hca->name, hca->error),
               "check `dmesg | grep mlx5` and reload the driver"});
      continue;
    }
    for (const auto& p : hca->ports) {
      ++ports;
      auto best = fastest.find(sibling_key(*hca, p));
      check_port(p, expect, out, bad, best == fastest.end() ? nullptr : &best->second);
    }
  }
  out.summary = bad ? fmt::format("{} HCAs, {} of {} ports bad", checked.size(), bad, ports)
                    : fmt::format("{} HCAs, {} ports up", checked.size(), ports);
  return out;
}

namespace {

// Rate and state of every checked port, for --format prometheus.
void add_ib_metrics(CheckResult& out, const IbInventory& inv, const IbExpect& expect) {
  for (const auto& hca : inv.hcas) {
    if (!ib_hca_selected(expect, hca.name)) continue;
    for (const auto& p : hca.ports) {
      const std::vector<std::pair<std::string, std::string>> labels = {{"hca", p.hca},
                                                                       {"port", std::to_string(p.number)}};
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
  CheckResult out = evaluate_ib(inv, ctx.cfg.ib, verbs);
  add_ib_metrics(out, inv, ctx.cfg.ib);
  return out;
}

}  // namespace gpudiag
