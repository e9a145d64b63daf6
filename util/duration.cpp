#include "util/duration.h"

#include <charconv>
#include <cmath>
#include <string>

namespace gpudiag {
namespace {

// The number at the front and what follows it.
bool split_number(std::string_view text, double& value, std::string_view& unit) {
  if (text.empty() || text.front() == '-' || text.front() == '+') return false;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0) return false;
  unit = text.substr(static_cast<std::size_t>(end - text.data()));
  return true;
}

}  // namespace

std::optional<double> parse_duration(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!split_number(text, v, unit)) return std::nullopt;
  if (unit.empty() || unit == "s") return v;
  if (unit == "m" || unit == "min") return v * 60;
  if (unit == "h") return v * 3600;
  return std::nullopt;
}

std::optional<unsigned long long> parse_size(std::string_view text) {
  double v = 0;
  std::string_view unit;
  if (!split_number(text, v, unit)) return std::nullopt;
  double mult = 1;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "K" || unit == "KiB" || unit == "k") mult = 1024.0;
  else if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB") mult = 1024.0 * 1024 * 1024 * 1024;
  else return std::nullopt;
  double bytes = v * mult;
  if (bytes > 1.8e19) return std::nullopt;
  return static_cast<unsigned long long>(bytes);
}

std::string size_text(unsigned long long bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (u < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++u;
  }
  return std::to_string(bytes) + " " + units[u];
}

}  // namespace gpudiag
