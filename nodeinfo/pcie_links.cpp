#include "nodeinfo/pcie_links.h"

#include <charconv>
#include <cstdio>

#include "nodeinfo/sysfs_text.h"

namespace gpudiag {

Result<double> parse_link_speed_gts(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 64);
  if (!text) return Result<double>::failure(text.error());
  std::string_view s = *text;
  if (s.rfind("Unknown", 0) == 0)
    return Result<double>::failure(std::string(where) + ": the kernel reports the speed as '" + *text + "'");
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  std::string_view rest = s.substr(static_cast<std::size_t>(end - s.data()));
  // Older kernels print "8 GT/s", newer ones "8.0 GT/s PCIe"; nothing else follows.
  const bool unit = rest == " GT/s" || rest == " GT/s PCIe";
  if (ec != std::errc() || !unit || !(v > 0 && v <= 1024))
    return Result<double>::failure(std::string(where) + ": not a link speed such as '16.0 GT/s PCIe': '" + *text + "'");
  return v;
}

Result<int> parse_link_width(std::string_view raw, std::string_view where) {
  auto v = parse_int_attr(raw, where);
  if (!v) return Result<int>::failure(v.error());
  switch (*v) {
    case 1: case 2: case 4: case 8: case 12: case 16: case 32:
      return static_cast<int>(*v);
    default:
      return Result<int>::failure(std::string(where) + ": " + std::to_string(*v) + " is not a PCIe link width" +
                                  (*v == 0 ? " (the link is down)" : ""));
  }
}

std::string PcieLink::error() const {
  if (!speed) return speed.error();
  if (!width) return width.error();
  if (!max_speed) return max_speed.error();
  if (!max_width) return max_width.error();
  return "";
}

PcieLink read_pcie_link(const RootedFs& fs, const std::string& bdf) {
  const std::string dir = "/sys/bus/pci/devices/" + bdf + "/";
  auto speed = [&](const char* name) {
    auto raw = fs.read_file(dir + name, 256);
    return raw ? parse_link_speed_gts(*raw, dir + name) : Result<double>::failure(raw.error());
  };
  auto width = [&](const char* name) {
    auto raw = fs.read_file(dir + name, 256);
    return raw ? parse_link_width(*raw, dir + name) : Result<int>::failure(raw.error());
  };
  PcieLink l;
  l.speed = speed("current_link_speed");
  l.width = width("current_link_width");
  l.max_speed = speed("max_link_speed");
  l.max_width = width("max_link_width");
  return l;
}

std::string link_text(int width, double speed_gts) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "x%d at %.1f GT/s", width, speed_gts);
  return buf;
}

}  // namespace gpudiag
