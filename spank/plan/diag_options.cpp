#include "spank/plan/diag_options.h"

#include <array>
#include <cctype>

#include "util/control_bytes.h"
#include "util/duration.h"
#include "util/text_lists.h"

namespace gpudiag {
namespace {

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// An item's parser: sets its field of `opt`, or returns why it cannot.
using ItemParser = std::optional<std::string> (*)(std::string_view key, std::string_view value, bool has_value,
                                                  DiagOptions& opt);

std::optional<std::string> no_value(std::string_view key, bool has_value) {
  if (has_value) return "'" + std::string(key) + "' takes no value";
  return std::nullopt;
}

std::optional<std::string> parse_prefix(std::string_view key, std::string_view, bool has_value, DiagOptions& opt) {
  if (auto e = no_value(key, has_value)) return e;
  opt.prefix = key == "prefix";
  return std::nullopt;
}

std::optional<std::string> parse_nccl(std::string_view, std::string_view value, bool, DiagOptions& opt) {
  static const std::array<const char*, 5> kLevels = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
  std::string level = upper(value);
  bool ok = false;
  for (const char* l : kLevels) ok |= level == l;
  if (!ok) return "nccl='" + std::string(value) + "' is not a level (VERSION, WARN, INFO, ABORT, TRACE)";
  opt.nccl_level = level;
  return std::nullopt;
}

std::optional<std::string> parse_subsys(std::string_view, std::string_view value, bool, DiagOptions& opt) {
  if (value.empty()) return std::string("subsys needs a value, e.g. subsys=INIT+NET");
  std::string s(value);
  for (char& c : s) {
    if (c == '+') c = ',';
    else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '^' && c != '_')
      return "subsys='" + std::string(value) + "': use NCCL subsystem names joined by '+'";
  }
  opt.nccl_subsys = upper(s);
  return std::nullopt;
}

std::optional<std::string> parse_dir(std::string_view, std::string_view value, bool, DiagOptions& opt) {
  if (value.empty() || value[0] != '/') return std::string("dir needs an absolute path, e.g. dir=/scratch/me/diag");
  opt.dir = std::string(value);
  return std::nullopt;
}

std::optional<std::string> parse_hang(std::string_view, std::string_view value, bool has_value, DiagOptions& opt) {
  auto d = value == "off" ? std::optional<double>(0) : parse_duration(value);
  if (!has_value || !d) return "hang='" + std::string(value) + "' is not a duration (e.g. hang=90s, 10m, 1h; 0 for off)";
  if (*d != 0 && *d < 1) return "hang=" + std::string(value) + " is too short: use at least 1s";
  opt.hang_s = *d;
  return std::nullopt;
}

std::optional<std::string> parse_hang_action(std::string_view, std::string_view value, bool, DiagOptions& opt) {
  if (value != "kill" && value != "report") return "hang-action='" + std::string(value) + "' must be kill or report";
  opt.hang_action = std::string(value);
  return std::nullopt;
}

std::optional<std::string> parse_preflight(std::string_view key, std::string_view, bool has_value, DiagOptions& opt) {
  if (auto e = no_value(key, has_value)) return e;
  opt.preflight = key == "preflight";
  return std::nullopt;
}

std::optional<std::string> parse_fabric(std::string_view key, std::string_view, bool has_value, DiagOptions& opt) {
  if (auto e = no_value(key, has_value)) return e;
  opt.fabric = true;
  return std::nullopt;
}

struct DiagItem {
  const char* key;
  const char* syntax;  // as the help and the "known:" list show it
  ItemParser parse;
};

// The one list of items: the parser dispatches on it, and the help and the error for
// an unknown item are made from it, so none of them can miss an item.
constexpr std::array<DiagItem, 10> kItems = {{
    {"nccl", "nccl=LEVEL", parse_nccl},
    {"subsys", "subsys=A+B", parse_subsys},
    {"dir", "dir=PATH", parse_dir},
    {"noprefix", "noprefix", parse_prefix},
    {"prefix", "prefix", parse_prefix},
    {"hang", "hang=DURATION", parse_hang},
    {"hang-action", "hang-action=kill|report", parse_hang_action},
    {"preflight", "preflight", parse_preflight},
    {"nopreflight", "nopreflight", parse_preflight},
    {"fabric", "fabric", parse_fabric},
}};

Result<DiagOptions> fail(const std::string& why) { return Result<DiagOptions>::failure("gpudiag: --diag: " + why); }

}  // namespace

std::string diag_items_list() {
  std::string out;
  for (const auto& item : kItems) {
    out += (out.empty() ? "" : ", ") + std::string(item.syntax);
  }
  return out;
}

std::string diag_option_help() {
  return "gpudiag diagnostics: NCCL logs per host and more. LIST: comma items " + diag_items_list() + " (see gpudiag(8))";
}

Result<DiagOptions> parse_diag_list(std::string_view list, DiagOptions opt) {
  opt.enabled = true;
  if (list.size() > kMaxDiagListBytes)
    return fail("the list is " + std::to_string(list.size()) + " bytes long, more than the " +
                std::to_string(kMaxDiagListBytes) + " that slurmstepd can read on the nodes: shorten it");
  if (!is_one_printable_line(list)) return fail("the list holds control characters");
  for (const std::string& item_text : split_list(list)) {
    std::string_view item = item_text;
    auto eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    const DiagItem* known = nullptr;
    for (const auto& k : kItems)
      if (key == k.key) known = &k;
    if (!known) return fail("unknown item '" + std::string(item) + "' (known: " + diag_items_list() + ")");
    if (auto why = known->parse(key, value, eq != std::string_view::npos, opt)) return fail(*why);
  }
  return opt;
}

}  // namespace gpudiag
