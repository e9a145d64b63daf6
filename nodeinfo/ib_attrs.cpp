#include "nodeinfo/ib_attrs.h"

#include <charconv>
#include <cstdlib>

#include "nodeinfo/sysfs_text.h"

namespace gpudiag {

Result<PortState> parse_port_state(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 64);
  if (!text) return Result<PortState>::failure(text.error());
  const std::string& s = *text;
  PortState st;
  auto colon = s.find(':');
  auto [end, ec] = std::from_chars(s.data(), s.data() + (colon == std::string::npos ? 0 : colon), st.code);
  if (colon == std::string::npos || ec != std::errc() || end != s.data() + colon || st.code < 0 || st.code > 15)
    return Result<PortState>::failure(std::string(where) + ": expected '<number>: <name>', found '" + s + "'");
  st.name = s.substr(colon + 1);
  while (!st.name.empty() && st.name.front() == ' ') st.name.erase(0, 1);
  if (st.name.empty()) st.name = "code " + std::to_string(st.code);
  return st;
}

Result<double> parse_rate_gbps(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 64);
  if (!text) return Result<double>::failure(text.error());
  const std::string& s = *text;
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  std::string_view rest(end, s.data() + s.size() - end);
  if (ec != std::errc() || v < 0 || rest.substr(0, 7) != " Gb/sec")
    return Result<double>::failure(std::string(where) + ": expected '<number> Gb/sec ...', found '" + s + "'");
  return v;
}

Result<std::string> parse_link_layer(std::string_view raw, std::string_view where) {
  auto text = attribute_text(raw, where, 64);
  if (!text) return text;
  if (*text != "InfiniBand" && *text != "Ethernet" && *text != "Unknown")
    return Result<std::string>::failure(std::string(where) + ": expected InfiniBand, Ethernet or Unknown, found '" +
                                        *text + "'");
  return text;
}

}  // namespace gpudiag
