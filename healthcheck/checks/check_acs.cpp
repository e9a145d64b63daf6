#include "healthcheck/checks/check_acs.h"

#include <fmt/format.h>

#include "healthcheck/checks/inventory_cache.h"
#include "nodeinfo/gpus_and_nics.h"
#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/pci_config.h"
#include "nodeinfo/pci_devices.h"

namespace gpudiag {
namespace {

std::string join_below(const std::vector<std::string>& below) {
  std::string out;
  for (std::size_t i = 0; i < below.size(); ++i) {
    if (i == 3) return out + fmt::format(" and {} more", below.size() - 3);
    out += (i ? ", " : "") + below[i];
  }
  return out;
}

}  // namespace

CheckResult evaluate_acs(const std::vector<AcsBridge>& bridges, int gpus, int nics, Policy policy) {
  CheckResult out;
  out.name = "acs";
  std::vector<std::string> truncated;
  int redirecting = 0;
  std::size_t unreadable = 0;  // or malformed: ACS state unknown either way
  for (const auto& b : bridges) {
    if (!b.config) {
      ++unreadable;
      out.add({b.bdf, Status::unknown, fmt::format("cannot read config space of bridge {}: {}", b.bdf, b.config.error()),
               "run as root, and check the device with `lspci -vvv -s " + b.bdf + "`"});
      continue;
    }
    AcsLookup acs = find_acs(*b.config);
    auto type = pcie_port_type(*b.config);
    const std::string kind = type ? port_type_name(*type) : "bridge";
    switch (acs.kind) {
      case AcsLookup::Kind::truncated:
        truncated.push_back(b.bdf);
        break;
      case AcsLookup::Kind::malformed:
        ++unreadable;
        out.add({b.bdf, Status::unknown, fmt::format("config space of {} {} is malformed: {}", kind, b.bdf, acs.detail),
                 "compare with `lspci -vvv -s " + b.bdf + "`; a device that returns garbage may be failing"});
        break;
      case AcsLookup::Kind::absent:
        out.add({b.bdf, Status::ok, fmt::format("{} {} has no ACS capability", kind, b.bdf), ""});
        break;
      case AcsLookup::Kind::found: {
        const std::uint16_t redirect = acs.ctrl & kAcsRedirectBits;
        if (!redirect) {
          out.add({b.bdf, Status::ok,
                   fmt::format("{} {} ACS control {} (no redirect)", kind, b.bdf, acs_bit_names(acs.ctrl)), ""});
          break;
        }
        // Traffic between devices under different root ports crosses the root complex
        // anyway, so redirect on a root port costs nothing that topology did not already.
        if (type == PciePortType::root_port) {
          out.add({b.bdf, Status::ok,
                   fmt::format("root port {} has ACS {} set; it does not affect P2P below it", b.bdf,
                               acs_bit_names(redirect)),
                   ""});
          break;
        }
        ++redirecting;
        out.add({b.bdf, policy_status(policy),
                 fmt::format("ACS {} is enabled on {} {} above {}", acs_bit_names(redirect), kind, b.bdf,
                             join_below(b.below)),
                 fmt::format("P2P traffic is forced through the root complex; disable ACS in the BIOS "
                             "(PCIe ACS control), or until reboot: `setpci -s {} ECAP_ACS+0x6.w=0000`",
                             b.bdf)});
        break;
      }
    }
  }
  if (!truncated.empty()) {
    out.add({truncated.front(), Status::unknown,
             fmt::format("only the first 64 bytes of PCI config space are readable for {} bridge(s) ({}): "
                         "ACS state unknown",
                         truncated.size(), join_below(truncated)),
             "run as root: the kernel shows the extended config space only to root"});
  }
  out.summary = fmt::format("{} bridges above {} GPUs and {} NICs, {}", bridges.size(), gpus, nics,
                            redirecting == 1 ? std::string("1 bridge redirects P2P")
                            : redirecting ? fmt::format("{} bridges redirect P2P", redirecting)
                                          : std::string("none redirects P2P"));
  // "none redirects" would read as a clean bill when nothing could be read (a non-root run).
  if (!redirecting && truncated.size() + unreadable > 0)
    out.summary = fmt::format("{} bridges, ACS unknown for {}", bridges.size(), truncated.size() + unreadable);
  return out;
}

CheckResult run_acs_check(const CheckContext& ctx) {
  const PciInventory& pci = pci_inventory(ctx);
  const IbInventory& ib = ib_inventory(ctx);
  if (!pci.error.empty()) {
    CheckResult out;
    out.name = "acs";
    out.add({"pci", Status::unknown, "cannot list PCI devices: " + pci.error, "is /sys mounted?"});
    out.summary = "PCI devices unreadable";
    return out;
  }

  // Bridges in first-seen order, each with the devices below it.
  std::vector<AcsBridge> bridges;
  std::map<std::string, std::size_t> index;
  auto note_path = [&](const PciDevice& dev, const std::string& label) {
    for (const auto& bdf : dev.upstream) {
      auto [it, added] = index.emplace(bdf, bridges.size());
      if (added) {
        AcsBridge b;
        b.bdf = bdf;
        b.config = ctx.fs.read_prefix("/sys/bus/pci/devices/" + bdf + "/config", 4096);
        bridges.push_back(std::move(b));
      }
      bridges[it->second].below.push_back(label);
    }
  };
  int gpus = 0, nics = 0;
  for (const auto& e : gpus_and_rdma_nics(pci, ib)) {
    ++(e.gpu ? gpus : nics);
    note_path(*e.pci, e.label);
  }
  return evaluate_acs(bridges, gpus, nics, ctx.cfg.acs.policy);
}

}  // namespace gpudiag
