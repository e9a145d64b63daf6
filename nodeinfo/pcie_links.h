#pragma once
// The PCIe link of one device as the kernel reports it in sysfs (no root needed):
// /sys/bus/pci/devices/BDF/{current,max}_link_{speed,width}.
#include <string>
#include <string_view>

#include "util/result.h"
#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

// "16.0 GT/s PCIe", "8 GT/s", "2.5 GT/s PCIe" -> GT/s. "Unknown" (the kernel's word for
// a speed it cannot decode, or a link that is down) and garbage are errors.
Result<double> parse_link_speed_gts(std::string_view raw, std::string_view where);
// "16" -> 16. Only the widths PCIe defines (1, 2, 4, 8, 12, 16, 32); 0 (no link) and
// garbage are errors.
Result<int> parse_link_width(std::string_view raw, std::string_view where);

struct PcieLink {
  Result<double> speed = Result<double>::failure("not read");      // current, GT/s
  Result<int> width = Result<int>::failure("not read");            // current lanes
  Result<double> max_speed = Result<double>::failure("not read");
  Result<int> max_width = Result<int>::failure("not read");
  bool readable() const { return speed && width && max_speed && max_width; }
  // The first of the four that could not be read, for messages.
  std::string error() const;
};

PcieLink read_pcie_link(const RootedFs& fs, const std::string& bdf);

// "x16 at 32.0 GT/s".
std::string link_text(int width, double speed_gts);

}  // namespace gpudiag
