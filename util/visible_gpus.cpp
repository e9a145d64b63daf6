#include "util/visible_gpus.h"

#include <algorithm>
#include <string>
#include <vector>

namespace gpudiag {
namespace {

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// An index as CUDA reads it: blanks and one '+' skipped, then the leading digits (what follows
// them is ignored: "0a" is GPU 0). Its key is the number without leading zeros ("00" is 0).
std::optional<std::string> index_key(std::string_view e) {
  std::size_t i = 0;
  while (i < e.size() && (e[i] == ' ' || e[i] == '\t')) ++i;
  if (i < e.size() && e[i] == '+') ++i;
  const std::size_t first = i;
  while (i < e.size() && e[i] >= '0' && e[i] <= '9') ++i;
  if (i == first) return std::nullopt;
  std::string_view digits = e.substr(first, i - first);
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return std::string(digits);
}

// A GPU- or MIG- UUID, or a prefix of one: hex digits and dashes after the prefix. Its key
// is the kind and the rest in lower case, so that a prefix of another's key names the same GPU.
std::optional<std::string> uuid_key(std::string_view e) {
  if (e.size() <= 4 || (e.substr(0, 4) != "GPU-" && e.substr(0, 4) != "MIG-")) return std::nullopt;
  std::string key(e.substr(0, 4));
  for (char c : e.substr(4)) {
    if (!is_hex(c) && c != '-') return std::nullopt;
    key += static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
  }
  return key;
}

}  // namespace

std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices) {
  if (!cuda_visible_devices) return std::nullopt;
  std::string_view rest = *cuda_visible_devices;
  std::vector<std::string> indices, uuids;
  for (;;) {
    const auto comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    if (auto k = index_key(entry)) indices.push_back(std::move(*k));
    else if (auto u = uuid_key(entry)) uuids.push_back(std::move(*u));
    else break;  // CUDA stops at the first entry it cannot read
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  // A GPU named twice makes cuInit fail: no GPU at all. Sorted, a repeat (or, for UUIDs, a
  // prefix of another) sits next to its twin, so a long list costs n log n, not n squared.
  std::sort(indices.begin(), indices.end());
  if (std::adjacent_find(indices.begin(), indices.end()) != indices.end()) return 0;
  std::sort(uuids.begin(), uuids.end());
  for (std::size_t i = 1; i < uuids.size(); ++i)
    if (uuids[i].compare(0, uuids[i - 1].size(), uuids[i - 1]) == 0) return 0;
  return static_cast<int>(indices.size() + uuids.size());
}

}  // namespace gpudiag
