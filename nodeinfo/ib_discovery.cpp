#include "nodeinfo/ib_discovery.h"

#include <charconv>
#include <cstdio>

#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

constexpr const char* kIbClass = "/sys/class/infiniband";

bool is_port_number(const std::string& s, int& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && out > 0;
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "15b3:1021" from the PCI function's vendor and device files; empty when either is unreadable.
std::string pci_id_of(const RootedFs& fs, const std::string& dev) {
  std::string out;
  for (const char* f : {"/vendor", "/device"}) {
    auto raw = fs.read_file(dev + f, 64);
    auto v = raw ? parse_hex_attr(*raw, dev + f) : Result<std::uint64_t>::failure(raw.error());
    if (!v || *v > 0xffff) return "";
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04x", static_cast<unsigned>(*v));
    out += (out.empty() ? "" : ":") + std::string(buf);
  }
  return out;
}

IbPort read_port(const RootedFs& fs, const std::string& hca, int number) {
  IbPort p;
  p.hca = hca;
  p.number = number;
  const std::string dir = std::string(kIbClass) + "/" + hca + "/ports/" + std::to_string(number) + "/";
  auto read = [&](const char* attr) { return fs.read_file(dir + attr, 256); };

  if (auto raw = read("state")) p.state = parse_port_state(*raw, dir + "state");
  else p.state = Result<PortState>::failure(raw.error());
  if (auto raw = read("phys_state")) p.phys_state = parse_port_state(*raw, dir + "phys_state");
  else p.phys_state = Result<PortState>::failure(raw.error());
  if (auto raw = read("rate")) {
    p.rate_gbps = parse_rate_gbps(*raw, dir + "rate");
    if (p.rate_gbps) p.rate_text = raw->substr(0, raw->find('\n'));
  } else {
    p.rate_gbps = Result<double>::failure(raw.error());
  }
  if (auto raw = read("link_layer")) p.link_layer = parse_link_layer(*raw, dir + "link_layer");
  else p.link_layer = Result<std::string>::failure(raw.error());
  return p;
}

}  // namespace

IbInventory discover_ib(const RootedFs& fs) {
  IbInventory inv;
  auto names = fs.list_dir(kIbClass);
  if (!names) return inv;
  inv.class_present = true;
  for (const auto& name : *names) {
    IbHca hca;
    hca.name = name;
    const std::string base = std::string(kIbClass) + "/" + name;
    if (auto dev = fs.resolve(base + "/device")) hca.pci_bdf = basename_of(*dev);
    if (auto raw = fs.read_file(base + "/hca_type", 256))
      if (auto text = attribute_text(*raw, base + "/hca_type", 64)) hca.model = *text;
    if (auto drv = fs.resolve(base + "/device/driver")) hca.driver = basename_of(*drv);
    hca.pci_id = pci_id_of(fs, base + "/device");
    if (auto nets = fs.list_dir(base + "/device/net")) hca.netdevs = *nets;
    auto ports = fs.list_dir(base + "/ports");
    if (!ports) {
      hca.error = ports.error();
    } else {
      for (const auto& p : *ports) {
        int number = 0;
        if (is_port_number(p, number)) hca.ports.push_back(read_port(fs, name, number));
      }
      if (hca.ports.empty()) hca.error = base + "/ports: no ports listed";
    }
    inv.hcas.push_back(std::move(hca));
  }
  return inv;
}

}  // namespace gpudiag
