#include "nodeinfo/pci_devices.h"

#include <cctype>

#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

constexpr const char* kPciDevices = "/sys/bus/pci/devices";

bool hex_digits(std::string_view s) {
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

bool PciDevice::is_nvidia_gpu() const {
  if (!vendor || !class_code || *vendor != kVendorNvidia) return false;
  std::uint32_t base_sub = *class_code >> 8;
  return base_sub == 0x0300 || base_sub == 0x0302;
}

bool is_bdf(std::string_view s) {
  // dddd:bb:dd.f
  return s.size() == 12 && s[4] == ':' && s[7] == ':' && s[10] == '.' && hex_digits(s.substr(0, 4)) &&
         hex_digits(s.substr(5, 2)) && hex_digits(s.substr(8, 2)) && s[11] >= '0' && s[11] <= '7';
}

std::vector<std::string> bridges_from_path(std::string_view kernel_path) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= kernel_path.size()) {
    auto slash = kernel_path.find('/', start);
    auto part = kernel_path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (is_bdf(part)) parts.emplace_back(part);
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  std::vector<std::string> bridges;
  if (parts.size() < 2) return bridges;
  for (auto it = parts.rbegin() + 1; it != parts.rend(); ++it) bridges.push_back(*it);
  return bridges;
}

const PciDevice* PciInventory::find(std::string_view bdf) const {
  for (const auto& d : devices)
    if (d.bdf == bdf) return &d;
  return nullptr;
}

PciDevice read_pci_device(const RootedFs& fs, const std::string& bdf) {
  PciDevice d;
  d.bdf = bdf;
  const std::string dir = std::string(kPciDevices) + "/" + bdf;
  if (auto real = fs.resolve(dir)) {
    d.kernel_path = *real;
    d.upstream = bridges_from_path(*real);
  } else {
    d.errors.push_back(real.error());
    return d;
  }
  auto hex_file = [&](const char* name) -> std::optional<std::uint64_t> {
    auto raw = fs.read_file(dir + "/" + name, 64);
    auto v = raw ? parse_hex_attr(*raw, dir + "/" + name) : Result<std::uint64_t>::failure(raw.error());
    if (!v) {
      d.errors.push_back(v.error());
      return std::nullopt;
    }
    return *v;
  };
  if (auto v = hex_file("vendor")) {
    if (*v > 0xffff) d.errors.push_back(dir + "/vendor: value out of range");
    else d.vendor = static_cast<std::uint16_t>(*v);
  }
  if (auto v = hex_file("class")) {
    if (*v > 0xffffff) d.errors.push_back(dir + "/class: value out of range");
    else d.class_code = static_cast<std::uint32_t>(*v);
  }
  // numa_node is optional: single-socket machines and some VMs do not have it.
  if (fs.lexists(dir + "/numa_node")) {
    auto raw = fs.read_file(dir + "/numa_node", 64);
    auto v = raw ? parse_int_attr(*raw, dir + "/numa_node") : Result<long>::failure(raw.error());
    if (v && *v >= -1 && *v < 4096) d.numa_node = static_cast<int>(*v);
    else d.errors.push_back(v ? dir + "/numa_node: value out of range" : v.error());
  }
  return d;
}

PciInventory discover_pci(const RootedFs& fs) {
  PciInventory inv;
  auto names = fs.list_dir(kPciDevices);
  if (!names) {
    inv.error = names.error();
    return inv;
  }
  for (const auto& name : *names) {
    if (!is_bdf(name)) continue;
    inv.devices.push_back(read_pci_device(fs, name));
  }
  return inv;
}

}  // namespace gpudiag
