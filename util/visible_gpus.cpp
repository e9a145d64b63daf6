#include "util/visible_gpus.h"

#include <algorithm>
#include <array>
#include <vector>

#include "util/task_path.h"

namespace gpudiag {
namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f'); }

// An index as CUDA reads it: blanks and one '+' skipped, then the leading digits (what follows
// them is ignored: "0a" is GPU 0). Its key is the number's digits without leading zeros.
std::optional<std::string_view> index_key(std::string_view e) {
  std::size_t i = 0;
  while (i < e.size() && (e[i] == ' ' || e[i] == '\t')) ++i;
  if (i < e.size() && e[i] == '+') ++i;
  const std::size_t first = i;
  while (i < e.size() && e[i] >= '0' && e[i] <= '9') ++i;
  if (i == first) return std::nullopt;
  std::string_view digits = e.substr(first, i - first);
  while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
  return digits;
}

// A GPU- or MIG- UUID, or a prefix of one: hex digits and dashes after the prefix.
bool is_uuid(std::string_view e) {
  if (e.size() <= 4 || (e.substr(0, 4) != "GPU-" && e.substr(0, 4) != "MIG-")) return false;
  return std::all_of(e.begin() + 4, e.end(), [](char c) { return is_hex(c) || c == '-'; });
}

// UUIDs compare without case; sorted, one that is a prefix of another sits next to it.
bool uuid_less(std::string_view a, std::string_view b) {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return lower(x) < lower(y); });
}
bool uuid_prefix_of(std::string_view a, std::string_view b) {
  return a.size() <= b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

// The entries' keys, in place (string_views into the value): a task's start counts its GPUs
// (prepared_task.cpp), where nothing should allocate, so up to kInPlace entries live on the
// stack; a longer list (a user's own, up to 8 KiB) goes to the heap.
constexpr std::size_t kInPlace = 64;

struct Keys {
  std::array<std::string_view, kInPlace> small{};
  std::vector<std::string_view> big;
  std::size_t n = 0;
  void push(std::string_view k) {
    if (n < kInPlace) {
      small[n++] = k;
      return;
    }
    if (big.empty()) big.assign(small.begin(), small.end());
    big.push_back(k);
    ++n;
  }
  std::string_view* begin() { return big.empty() ? small.data() : big.data(); }
  std::string_view* end() { return begin() + n; }
};

}  // namespace

GPUDIAG_TASK_PATH std::optional<int> count_visible_gpus(std::optional<std::string_view> cuda_visible_devices) {
  if (!cuda_visible_devices) return std::nullopt;
  std::string_view rest = *cuda_visible_devices;
  Keys indices, uuids;
  for (;;) {
    const auto comma = rest.find(',');
    const std::string_view entry = rest.substr(0, comma);
    if (auto k = index_key(entry)) indices.push(*k);
    else if (is_uuid(entry)) uuids.push(entry);
    else break;  // CUDA stops at the first entry it cannot read
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  // A GPU named twice makes cuInit fail: no GPU at all. Sorted, a repeat (or, for UUIDs, a
  // prefix of another) sits next to its twin: n log n for a long list, not n squared.
  std::sort(indices.begin(), indices.end());
  if (std::adjacent_find(indices.begin(), indices.end()) != indices.end()) return 0;
  std::sort(uuids.begin(), uuids.end(), uuid_less);
  for (auto* u = uuids.begin(); u != uuids.end() && u + 1 != uuids.end(); ++u)
    if (uuid_prefix_of(u[0], u[1])) return 0;
  return static_cast<int>(indices.n + uuids.n);
}

}  // namespace gpudiag
