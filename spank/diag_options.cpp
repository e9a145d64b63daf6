#include "spank/diag_options.h"

#include <array>
#include <cctype>

#include "nodeinfo/duration.h"

namespace gpudiag {
namespace {

constexpr const char* kKnown =
    "nccl=LEVEL, subsys=A+B, dir=PATH, noprefix, prefix, hang=DURATION, hang-action=kill|report, preflight, nopreflight";

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Result<DiagOptions> fail(const std::string& why) { return Result<DiagOptions>::failure("gpudiag: --diag: " + why); }

bool printable(std::string_view s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

Result<DiagOptions> parse_diag_list(std::string_view list, DiagOptions opt) {
  opt.enabled = true;
  if (!printable(list)) return fail("the list holds control characters");
  std::size_t start = 0;
  while (start <= list.size()) {
    auto comma = list.find(',', start);
    std::string_view item = list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    start = comma == std::string_view::npos ? list.size() + 1 : comma + 1;
    if (item.empty()) continue;
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    const bool has_value = eq != std::string_view::npos;

    if (key == "noprefix" || key == "prefix") {
      if (has_value) return fail("'" + std::string(key) + "' takes no value");
      opt.prefix = key == "prefix";
    } else if (key == "nccl") {
      static const std::array<const char*, 5> kLevels = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
      std::string level = upper(value);
      bool ok = false;
      for (const char* l : kLevels) ok |= level == l;
      if (!ok) return fail("nccl='" + std::string(value) + "' is not a level (VERSION, WARN, INFO, ABORT, TRACE)");
      opt.nccl_level = level;
    } else if (key == "subsys") {
      if (value.empty()) return fail("subsys needs a value, e.g. subsys=INIT+NET");
      std::string s(value);
      for (char& c : s) {
        if (c == '+') c = ',';
        else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '^' && c != '_')
          return fail("subsys='" + std::string(value) + "': use NCCL subsystem names joined by '+'");
      }
      opt.nccl_subsys = upper(s);
    } else if (key == "dir") {
      if (value.empty() || value[0] != '/') return fail("dir needs an absolute path, e.g. dir=/scratch/me/diag");
      opt.dir = std::string(value);
    } else if (key == "hang") {
      auto d = value == "off" ? std::optional<double>(0) : parse_duration(value);
      if (!has_value || !d) return fail("hang='" + std::string(value) + "' is not a duration (e.g. hang=90s, 10m, 1h; 0 for off)");
      if (*d != 0 && *d < 1) return fail("hang=" + std::string(value) + " is too short: use at least 1s");
      opt.hang_s = *d;
    } else if (key == "hang-action") {
      if (value != "kill" && value != "report") return fail("hang-action='" + std::string(value) + "' must be kill or report");
      opt.hang_action = std::string(value);
    } else if (key == "preflight" || key == "nopreflight") {
      if (has_value) return fail("'" + std::string(key) + "' takes no value");
      opt.preflight = key == "preflight";
    } else {
      return fail("unknown item '" + std::string(item) + "' (known: " + kKnown + ")");
    }
  }
  return opt;
}

}  // namespace gpudiag
