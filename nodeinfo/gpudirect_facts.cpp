#include "nodeinfo/gpudirect_facts.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "nodeinfo/gpus_and_nics.h"
#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

// Leading decimal number of s, advancing s past it.
std::optional<int> leading_int(std::string_view& s) {
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || v < 0) return std::nullopt;
  s.remove_prefix(static_cast<std::size_t>(end - s.data()));
  return v;
}

bool is_version_token(std::string_view t) {
  if (t.empty() || !std::isdigit(static_cast<unsigned char>(t[0]))) return false;
  bool dot = false;
  for (char c : t) {
    if (c == '.') dot = true;
    else if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return dot;
}

}  // namespace

std::optional<KernelRelease> parse_kernel_release(std::string_view text) {
  std::string_view s = text;
  KernelRelease r;
  auto major = leading_int(s);
  if (!major || s.empty() || s[0] != '.') return std::nullopt;
  s.remove_prefix(1);
  auto minor = leading_int(s);
  if (!minor) return std::nullopt;
  r.major = *major;
  r.minor = *minor;
  return r;
}

std::optional<NvidiaDriver> parse_nvidia_version(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (line.rfind("NVRM version:", 0) != 0) return std::nullopt;
  NvidiaDriver d;
  // NVIDIA's README (kernel_open.html): the open flavour says "Open Kernel Module".
  d.open_module = line.find(" Open Kernel") != std::string_view::npos;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    std::size_t end = line.find(' ', pos);
    if (end == std::string_view::npos) end = line.size();
    std::string_view token = line.substr(pos, end - pos);
    if (is_version_token(token)) {
      d.version = std::string(token);
      std::string_view v = token;
      d.major = leading_int(v).value_or(0);
      return d;
    }
    pos = end;
  }
  return std::nullopt;
}

Result<std::optional<unsigned long long>> parse_memlock_limit(std::string_view limits_text) {
  using R = Result<std::optional<unsigned long long>>;
  constexpr std::string_view kKey = "Max locked memory";
  std::size_t at = 0;
  while (at < limits_text.size()) {
    std::size_t end = limits_text.find('\n', at);
    if (end == std::string_view::npos) end = limits_text.size();
    std::string_view line = limits_text.substr(at, end - at);
    at = end + 1;
    if (line.rfind(kKey, 0) != 0) continue;
    line.remove_prefix(kKey.size());
    while (!line.empty() && line[0] == ' ') line.remove_prefix(1);
    std::string_view soft = line.substr(0, line.find(' '));
    if (soft == "unlimited") return std::optional<unsigned long long>();
    unsigned long long v = 0;
    auto [p, ec] = std::from_chars(soft.data(), soft.data() + soft.size(), v);
    if (ec != std::errc() || p != soft.data() + soft.size() || soft.empty())
      return R::failure("'Max locked memory' is not a number or 'unlimited': '" + std::string(soft) + "'");
    return std::optional<unsigned long long>(v);
  }
  return R::failure("no 'Max locked memory' line");
}

GpuDirectFacts read_gpudirect_facts(const RootedFs& fs, const PciInventory& pci, const IbInventory& ib) {
  GpuDirectFacts f;
  for (const auto& e : gpus_and_rdma_nics(pci, ib)) ++(e.gpu ? f.gpus : f.rdma_nics);
  f.peermem = fs.exists("/sys/module/nvidia_peermem");
  auto text = [&](const std::string& path, std::size_t max) {
    auto raw = fs.read_file(path, max);
    return raw ? attribute_text(raw->substr(0, raw->find('\n')), path) : raw;
  };
  for (const auto& e : gpus_and_rdma_nics(pci, ib)) {
    if (e.gpu) continue;
    auto hca = std::find_if(ib.hcas.begin(), ib.hcas.end(), [&](const IbHca& h) { return h.name == e.hca; });
    if (hca == ib.hcas.end() || hca->driver != "efa") continue;
    ++f.efa_nics;
    if (auto gdr = text("/sys/class/infiniband/" + hca->name + "/device/gdr", 64)) {
      if (*gdr == "1") ++f.efa_gdr_on;
      else if (*gdr == "0") ++f.efa_gdr_off;
    }
  }
  if (f.efa_nics) f.efa_version = text("/sys/module/efa/version", 256);
  f.kernel_release = text("/proc/sys/kernel/osrelease", 256);
  f.driver_loaded = fs.lexists("/proc/driver/nvidia/version");
  f.driver_version = text("/proc/driver/nvidia/version", 4096);
  if (auto raw = fs.read_file("/proc/self/limits", 8192)) {
    f.memlock = parse_memlock_limit(*raw);
    if (!f.memlock) f.memlock = decltype(f.memlock)::failure("/proc/self/limits: " + f.memlock.error());
  } else {
    f.memlock = decltype(f.memlock)::failure(raw.error());
  }
  return f;
}

}  // namespace gpudiag
