#include "healthcheck/checks/check_pcie.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "healthcheck/checks/inventory_cache.h"
#include "nodeinfo/gpus_and_nics.h"
#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

using Kind = PcieDevice::Kind;

std::string model_of(const RootedFs& fs, const PciDevice& dev) {
  if (!dev.vendor) return "";
  const std::string path = "/sys/bus/pci/devices/" + dev.bdf + "/device";
  auto raw = fs.read_file(path, 64);
  auto id = raw ? parse_hex_attr(*raw, path) : Result<std::uint64_t>::failure(raw.error());
  if (!id || *id > 0xffff) return "";
  return fmt::format("{:04x}:{:04x}", *dev.vendor, *id);
}

bool has_link_files(const RootedFs& fs, const std::string& bdf) {
  for (const char* f : {"current_link_speed", "current_link_width", "max_link_speed", "max_link_width"})
    if (fs.lexists("/sys/bus/pci/devices/" + bdf + "/" + f)) return true;
  return false;
}

std::string join_feeds(const std::vector<std::string>& feeds) {
  std::string out;
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    if (i == 2) return out + fmt::format(" and {} more", feeds.size() - 2);
    out += (i ? ", " : "") + feeds[i];
  }
  return out;
}

struct Floor {
  std::optional<int> width;
  std::optional<double> speed;
};

Floor floor_for(Kind k, const PcieSettings& cfg) {
  if (k == Kind::gpu) return {cfg.gpu_width, cfg.gpu_speed};
  if (k == Kind::nic) return {cfg.nic_width, cfg.nic_speed};
  return {};
}

const char* kind_key(Kind k) { return k == Kind::gpu ? "gpu" : "nic"; }

std::string fix_for(const PcieDevice& d) {
  const char* what = d.kind == Kind::gpu ? "the GPU" : d.kind == Kind::nic ? "the NIC" : "the card below it";
  return fmt::format("reseat {}, check the riser, retimer and cable, and look for AER errors in `dmesg`; "
                     "`lspci -vv -s {}` shows LnkSta against LnkCap",
                     what, d.bdf);
}

// One link that trained below what it should: its current values, for recognising the
// same link seen from the bridge at its other end.
struct Downtrained {
  int width;
  double speed;
};

void add_metrics(const PcieDevice& d, CheckResult& out) {
  const std::string device = d.kind == Kind::gpu ? "gpu" : d.kind == Kind::nic ? d.hca : "bridge";
  std::vector<std::pair<std::string, std::string>> labels = {{"bdf", d.bdf}, {"device", device}};
  if (d.link.width)
    out.metrics.push_back({"gpudiag_pcie_link_width", "Current PCIe link width (lanes)", labels,
                           static_cast<double>(*d.link.width)});
  if (d.link.speed)
    out.metrics.push_back({"gpudiag_pcie_link_speed_gts", "Current PCIe link speed in GT/s", labels, *d.link.speed});
}

}  // namespace

CheckResult evaluate_pcie(const PcieFacts& facts, const PcieSettings& cfg) {
  CheckResult out;
  out.name = "pcie";
  if (!facts.error.empty()) {
    out.add({"pci", Status::unknown, "cannot list PCI devices: " + facts.error, "is /sys mounted?"});
    out.summary = "PCI devices unreadable";
    return out;
  }
  std::map<std::string, const PcieDevice*> by_bdf;
  for (const auto& d : facts.devices) by_bdf.emplace(d.bdf, &d);

  // The best capability among identical devices (same kind and vendor:device), for
  // the no-config rule that one card must not be less capable than its siblings.
  std::map<std::string, std::pair<int, double>> best;
  for (const auto& d : facts.devices) {
    if (d.kind == Kind::bridge || d.model.empty()) continue;
    auto& b = best[d.model];
    if (d.link.max_width) b.first = std::max(b.first, *d.link.max_width);
    if (d.link.max_speed) b.second = std::max(b.second, *d.link.max_speed);
  }

  std::map<std::string, Downtrained> downtrained;
  int endpoints = 0, bridges = 0, bad = 0, unknown = 0;
  for (const auto& d : facts.devices) {
    add_metrics(d, out);
    const bool bridge = d.kind == Kind::bridge;
    ++(bridge ? bridges : endpoints);
    const std::string who = bridge ? fmt::format("{} (above {})", d.label, join_feeds(d.feeds)) : d.label;

    Floor floor;
    if (bridge) {
      // A floor for any kind below lowers what the bridge must reach: a site's x8 slot
      // is x8 at the switch port too.
      for (const auto& f : d.feeds) {
        Floor k = floor_for(f.rfind("GPU ", 0) == 0 ? Kind::gpu : Kind::nic, cfg);
        if (k.width) floor.width = std::min(floor.width.value_or(*k.width), *k.width);
        if (k.speed) floor.speed = std::min(floor.speed.value_or(*k.speed), *k.speed);
      }
    } else {
      floor = floor_for(d.kind, cfg);
    }

    const PcieLink& l = d.link;
    // NVIDIA GPUs lower their link speed when idle (2.5 GT/s in P8) and raise it under
    // load, and a health check runs on an idle node: the speed of a GPU's link, seen
    // from either end, says nothing here. What the link can train to (the lower of the
    // two ends' maximum) is judged instead; the width does not change with load.
    const bool gpu = d.kind == Kind::gpu;
    const bool gpu_link = gpu || (bridge && std::any_of(d.below.begin(), d.below.end(), [&](const std::string& b) {
                                    auto it = by_bdf.find(b);
                                    return it != by_bdf.end() && it->second->kind == Kind::gpu;
                                  }));
    const bool need_max_width = bridge || !floor.width, need_max_speed = bridge || gpu || !floor.speed;
    std::string missing = !l.width ? l.width.error() : !l.speed ? l.speed.error()
                        : need_max_width && !l.max_width ? l.max_width.error()
                        : need_max_speed && !l.max_speed ? l.max_speed.error() : "";
    if (!missing.empty()) {
      ++unknown;
      out.add({d.bdf, Status::unknown, fmt::format("cannot read the PCIe link of {}: {}", who, missing),
               fmt::format("the kernel fills these files; compare with `lspci -vv -s {}` and look for PCIe "
                           "errors in `dmesg`",
                           d.bdf)});
      continue;
    }

    int want_w = need_max_width ? *l.max_width : 0;
    double want_s = need_max_speed ? *l.max_speed : 0;
    if (bridge) {
      // A bridge port trains to what the device at the other end can do: a Gen4 NIC
      // under a Gen5 switch port is not a fault of that port.
      for (const auto* list : {&d.below, &d.above}) {
        for (const auto& n : *list) {
          auto it = by_bdf.find(n);
          if (it == by_bdf.end()) continue;
          if (it->second->link.max_width) want_w = std::min(want_w, *it->second->link.max_width);
          if (it->second->link.max_speed) want_s = std::min(want_s, *it->second->link.max_speed);
        }
      }
      if (floor.width) want_w = std::min(want_w, *floor.width);
      if (floor.speed) want_s = std::min(want_s, *floor.speed);
    } else {
      if (floor.width) want_w = *floor.width;
      if (floor.speed) want_s = *floor.speed;
      // The NIC floors are the GPU fabric's (what --baseline reads): a card of another
      // role and model (a Gen4 front-end NIC beside Gen5 fabric NICs) is held to no more
      // than it can do.
      if (d.kind == Kind::nic && l.max_width && floor.width) want_w = std::min(want_w, *l.max_width);
      if (d.kind == Kind::nic && l.max_speed && floor.speed) want_s = std::min(want_s, *l.max_speed);
    }

    double judged_speed = *l.speed;
    std::optional<double> port_max;  // a GPU's: the maximum of the port above it
    if (gpu) {
      judged_speed = *l.max_speed;
      for (const auto& a : d.above) {
        auto it = by_bdf.find(a);
        if (it != by_bdf.end() && it->second->link.max_speed) port_max = *it->second->link.max_speed;
      }
      if (port_max) judged_speed = std::min(judged_speed, *port_max);
    } else if (gpu_link) {
      want_s = 0;
    }

    const bool narrow = *l.width < want_w, slow_speed = judged_speed + 1e-9 < want_s;
    const std::string now = link_text(*l.width, *l.speed);
    if (gpu && !narrow && slow_speed) {
      ++bad;
      const std::string limit =
          *l.max_speed + 1e-9 < want_s
              ? fmt::format("it is capable of only {:.1f} GT/s", *l.max_speed)
              : fmt::format("the port above it is capable of only {:.1f} GT/s", port_max.value_or(0));
      out.add({d.bdf, policy_status(cfg.policy),
               fmt::format("{} cannot train above {:.1f} GT/s where {:.1f} GT/s is expected{}: {}", who, judged_speed,
                           want_s, floor.speed ? " (pcie.gpu_speed)" : "", limit),
               fix_for(d)});
      continue;
    }
    if (narrow || slow_speed) {
      downtrained[d.bdf] = {*l.width, *l.speed};
      // The port just above a downtrained device reports the same link from its end;
      // the device's own finding already says it.
      const bool same_link = bridge && std::any_of(d.below.begin(), d.below.end(), [&](const std::string& b) {
        auto it = downtrained.find(b);
        return it != downtrained.end() && it->second.width == *l.width && it->second.speed == *l.speed;
      });
      if (same_link) continue;
      ++bad;
      // A GPU's link speed is not judged (see above), so it is not named as expected.
      const std::string want = gpu_link && !gpu ? fmt::format("x{}", want_w) : link_text(want_w, want_s);
      std::string expected;
      if (!bridge && (floor.width || floor.speed))
        expected = fmt::format(", below the {} that pcie.{}_width/{}_speed ask for", want, kind_key(d.kind),
                               kind_key(d.kind));
      else
        expected = fmt::format(", capable of {}", want);
      out.add({d.bdf, policy_status(cfg.policy), fmt::format("{} runs at {}{}", who, now, expected), fix_for(d)});
      continue;
    }

    // No floor: a card less capable than its identical siblings sits in a slot (or
    // behind a riser) that limits it, which current == max cannot show.
    if (!bridge && !d.model.empty()) {
      const auto& b = best.at(d.model);
      const bool narrower = !floor.width && *l.max_width < b.first;
      const bool slower = !floor.speed && *l.max_speed + 1e-9 < b.second;
      if (narrower || slower) {
        ++bad;
        out.add({d.bdf, Status::warning,
                 fmt::format("{} is capable of only {} where its identical siblings ({}) are capable of {}", who,
                             link_text(*l.max_width, *l.max_speed), d.model,
                             link_text(narrower ? b.first : *l.max_width, slower ? b.second : *l.max_speed)),
                 fix_for(d)});
        continue;
      }
    }
    if (gpu && *l.speed + 1e-9 < judged_speed)
      out.add({d.bdf, Status::ok,
               fmt::format("{} runs at {} (an idle GPU lowers its link speed; it can train to {:.1f} GT/s)", who, now,
                           judged_speed),
               ""});
    else
      out.add({d.bdf, Status::ok, fmt::format("{} runs at {}", who, now), ""});
  }

  if (endpoints == 0) {
    out.summary = "no NVIDIA GPU or RDMA NIC";
    return out;
  }
  out.summary = fmt::format("{} GPUs and NICs, {} bridges", endpoints, bridges);
  if (bad) out.summary += fmt::format(": {} {} below {}", bad, bad == 1 ? "link" : "links",
                                      bad == 1 ? "its capability" : "their capability");
  else if (unknown) out.summary += fmt::format(": {} unreadable", unknown);
  else out.summary += ", no link below its capability";
  return out;
}

PcieFacts read_pcie_facts(const RootedFs& fs, const PciInventory& pci, const IbInventory& ib) {
  PcieFacts facts;
  if (!pci.error.empty()) {
    facts.error = pci.error;
    return facts;
  }

  std::map<std::string, std::size_t> index;  // BDF -> position in facts.devices
  auto add = [&](Kind kind, const PciDevice& dev, const std::string& label, const std::string& hca) {
    auto [it, added] = index.emplace(dev.bdf, facts.devices.size());
    if (added) {
      PcieDevice d;
      d.kind = kind;
      d.bdf = dev.bdf;
      d.label = label;
      d.hca = hca;
      if (kind != Kind::bridge) d.model = model_of(fs, dev);  // bridges have no siblings rule
      d.link = read_pcie_link(fs, dev.bdf);
      facts.devices.push_back(std::move(d));
    }
    return it->second;
  };
  auto note = [](std::vector<std::string>& list, const std::string& v) {
    if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
  };

  // A bonded HCA shares its PCI function with a port HCA: one device, one link.
  // An SR-IOV virtual function has no link of its own (the kernel shows "Unknown" and
  // 0 lanes); its physical function's link is the one that carries its traffic.
  auto endpoints = gpus_and_rdma_nics(pci, ib);
  endpoints.erase(std::remove_if(endpoints.begin(), endpoints.end(),
                                 [&](const GpuOrNic& e) {
                                   return fs.lexists("/sys/bus/pci/devices/" + e.pci->bdf + "/physfn");
                                 }),
                  endpoints.end());
  for (const auto& e : endpoints) add(e.gpu ? Kind::gpu : Kind::nic, *e.pci, e.label, e.hca);
  for (const auto& e : endpoints) {
    std::string below = e.pci->bdf;
    for (const auto& bdf : e.pci->upstream) {
      // A conventional PCI bridge (a VM's pci-bridge) has no PCIe link and no link files.
      if (!index.count(bdf) && !has_link_files(fs, bdf)) continue;
      const PciDevice* found = pci.find(bdf);
      const std::size_t i = add(Kind::bridge, found ? *found : read_pci_device(fs, bdf), "bridge " + bdf, "");
      auto& b = facts.devices[i];
      note(b.feeds, e.label);
      note(b.below, below);
      note(facts.devices[index.at(below)].above, bdf);
      below = bdf;
    }
  }
  return facts;
}

CheckResult run_pcie_check(const CheckContext& ctx) {
  return evaluate_pcie(read_pcie_facts(ctx.fs, pci_inventory(ctx), ib_inventory(ctx)), ctx.cfg.pcie);
}

}  // namespace gpudiag
