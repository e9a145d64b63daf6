#include "config/config.h"

#include "config/check_names.h"
#include "util/control_bytes.h"
#include "util/duration.h"
#include "util/text_lists.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>
#include <type_traits>
#include <fstream>
#include <initializer_list>
#include <stdexcept>

namespace gpudiag {
namespace {

struct ConfigError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Turns yaml-cpp nodes into typed values, naming file:line and the dotted key on error.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& msg) const {
    std::string where = source_;
    if (at.IsDefined() && at.Mark().line >= 0) where += ":" + std::to_string(at.Mark().line + 1);
    throw ConfigError("gpudiag: " + where + ": " + msg);
  }

  void require_map(const YAML::Node& n, const std::string& key) const {
    if (!n.IsMap()) fail(n, "'" + key + "' must be a mapping of keys to values");
  }

  // Each key must be one we know; the message lists the ones we do.
  void only_keys(const YAML::Node& map, const std::string& prefix, std::initializer_list<const char*> allowed) const {
    for (const auto& kv : map) {
      std::string key = kv.first.Scalar();
      bool known = std::any_of(allowed.begin(), allowed.end(), [&](const char* a) { return key == a; });
      if (!known) {
        std::vector<std::string> names(allowed.begin(), allowed.end());
        fail(kv.first, "unknown key '" + prefix + key + "' (known: " + join(names) + ")");
      }
    }
  }

  template <class T>
  static std::string fmt_num(T v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

  std::string scalar(const YAML::Node& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, "'" + key + "' must be a single value");
    return n.Scalar();
  }

  // A whole number (int) or any number (double) within [lo, hi].
  template <class T>
  T numeric(const YAML::Node& n, const std::string& key, T lo, T hi) const {
    std::string s = scalar(n, key);
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
      fail(n, "'" + key + "' must be " + (std::is_integral_v<T> ? "a whole number" : "a number") + ", not '" + s + "'");
    if (!(v >= lo && v <= hi))
      fail(n, "'" + key + "' must be between " + fmt_num(lo) + " and " + fmt_num(hi));
    return v;
  }

  bool boolean(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
    fail(n, "'" + key + "' must be true or false, not '" + s + "'");
  }

  std::string one_of(const YAML::Node& n, const std::string& key, const std::vector<std::string>& choices) const {
    std::string s = scalar(n, key);
    if (std::find(choices.begin(), choices.end(), s) == choices.end())
      fail(n, "'" + key + "' is '" + s + "' (expected one of: " + join(choices) + ")");
    return s;
  }

  std::vector<std::string> list(const YAML::Node& n, const std::string& key,
                                const std::vector<std::string>* choices = nullptr) const {
    if (!n.IsSequence()) fail(n, "'" + key + "' must be a list, e.g. [a, b]");
    std::vector<std::string> out;
    for (const auto& item : n)
      out.push_back(choices ? one_of(item, key, *choices) : scalar(item, key));
    return out;
  }

  // A duration ("90", "90s", "10m", "1h") in whole seconds, 0 meaning off.
  int seconds(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    auto v = parse_duration(s);
    if (!v || *v > 1e7) fail(n, "'" + key + "' must be a duration such as 90s, 10m or 1h, not '" + s + "'");
    return static_cast<int>(*v + 0.5);
  }

  std::string absolute_path(const YAML::Node& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s.empty() || s[0] != '/') fail(n, "'" + key + "' must be an absolute path");
    return s;
  }

  Policy policy(const YAML::Node& n, const std::string& key) const {
    std::string s = one_of(n, key, {"critical", "warning", "ignore"});
    return s == "critical" ? Policy::critical : s == "warning" ? Policy::warning : Policy::ignore;
  }

 private:
  std::string source_;
};

// `off`, or a whole number within [lo, hi] with an optional unit suffix ("10%").
std::optional<int> cap_or_off(const Reader& r, const YAML::Node& n, const std::string& key, int lo, int hi,
                              std::string_view suffix) {
  std::string s = r.scalar(n, key);
  if (s == "off") return std::nullopt;
  if (!suffix.empty() && s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0)
    s.resize(s.size() - suffix.size());
  int v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty() || v < lo || v > hi)
    r.fail(n, "'" + key + "' must be off or a whole number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                  std::string(suffix) + ", not '" + r.scalar(n, key) + "'");
  return v;
}

void read_drain(const Reader& r, const YAML::Node& n, DrainSettings& d) {
  r.require_map(n, "drain");
  r.only_keys(n, "drain.", {"max_nodes", "max_share", "jitter"});
  if (n["max_nodes"]) d.max_nodes = cap_or_off(r, n["max_nodes"], "drain.max_nodes", 1, 1000000, "");
  if (n["max_share"]) d.max_share_pct = cap_or_off(r, n["max_share"], "drain.max_share", 1, 100, "%");
  if (n["jitter"]) {
    std::string s = r.scalar(n["jitter"], "drain.jitter");
    auto v = parse_duration(s);
    if (!v || *v > 30) r.fail(n["jitter"], "'drain.jitter' must be a duration from 0 to 30s, e.g. 2s or 0.5s, not '" + s + "'");
    d.jitter_s = *v;
  }
}

void read_health(const Reader& r, const YAML::Node& n, HealthSettings& h) {
  r.require_map(n, "health");
  r.only_keys(n, "health.", {"checks", "timeout", "drain_prefix", "node_name", "scontrol_timeout", "state_dir"});
  if (n["checks"]) h.checks = r.list(n["checks"], "health.checks", &known_checks());
  if (n["timeout"]) h.timeout_s = r.numeric(n["timeout"], "health.timeout", 1.0, 3600.0);
  if (n["drain_prefix"]) {
    h.drain_prefix = r.scalar(n["drain_prefix"], "health.drain_prefix");
    if (h.drain_prefix.empty() || h.drain_prefix.size() > 32)
      r.fail(n["drain_prefix"], "'health.drain_prefix' must be 1 to 32 characters");
  }
  if (n["node_name"]) h.node_name = r.scalar(n["node_name"], "health.node_name");
  if (n["scontrol_timeout"]) h.scontrol_timeout_s = r.numeric(n["scontrol_timeout"], "health.scontrol_timeout", 1.0, 300.0);
  if (n["state_dir"]) h.state_dir = r.absolute_path(n["state_dir"], "health.state_dir");
}

// The kernel's three words for a port's link layer ("Unknown": EFA and other providers
// that report none).
const std::vector<std::string> kLinkLayers = {"InfiniBand", "Ethernet", "Unknown"};

void read_role_expect(const Reader& r, const YAML::Node& n, const std::string& key, RoleExpect& e) {
  r.require_map(n, key);
  r.only_keys(n, key + ".", {"rate_gbps", "link_layer"});
  if (n["rate_gbps"]) e.rate_gbps = r.numeric(n["rate_gbps"], key + ".rate_gbps", 1.0, 100000.0);
  if (n["link_layer"]) e.link_layer = r.one_of(n["link_layer"], key + ".link_layer", kLinkLayers);
}

void read_roles(const Reader& r, const YAML::Node& n, std::vector<RoleRule>& out) {
  if (!n.IsSequence()) r.fail(n, "'ib.roles' must be a list of {hca, netdev, port, role} entries");
  for (const auto& item : n) {
    r.require_map(item, "ib.roles[]");
    r.only_keys(item, "ib.roles[].", {"hca", "netdev", "port", "role"});
    RoleRule rule;
    rule.line = item.Mark().line + 1;
    if (item["hca"]) rule.hca = r.scalar(item["hca"], "ib.roles[].hca");
    if (item["netdev"]) rule.netdev = r.scalar(item["netdev"], "ib.roles[].netdev");
    if (item["port"]) rule.port = r.numeric(item["port"], "ib.roles[].port", 1, 255);
    if (rule.hca.empty() && rule.netdev.empty()) r.fail(item, "an 'ib.roles' entry needs hca or netdev (a pattern)");
    if (!item["role"]) r.fail(item, "an 'ib.roles' entry needs a role (" + join(port_role_names()) + ")");
    const std::string role = r.one_of(item["role"], "ib.roles[].role", port_role_names());
    for (PortRole p : {PortRole::fabric, PortRole::storage, PortRole::frontend, PortRole::unused})
      if (role_name(p) == role) rule.role = p;
    out.push_back(rule);
  }
}

void read_ib(const Reader& r, const YAML::Node& n, IbExpect& ib) {
  r.require_map(n, "ib");
  r.only_keys(n, "ib.", {"hcas", "count", "rate_gbps", "link_layer", "exclude", "roles", "storage", "frontend"});
  if (n["hcas"]) ib.hcas = r.list(n["hcas"], "ib.hcas");
  if (n["count"]) ib.count = r.numeric(n["count"], "ib.count", 0, 1024);
  if (n["rate_gbps"]) ib.rate_gbps = r.numeric(n["rate_gbps"], "ib.rate_gbps", 1.0, 100000.0);
  if (n["link_layer"]) ib.link_layer = r.one_of(n["link_layer"], "ib.link_layer", kLinkLayers);
  if (n["exclude"]) ib.exclude = r.list(n["exclude"], "ib.exclude");
  if (n["roles"]) read_roles(r, n["roles"], ib.roles);
  if (n["storage"]) read_role_expect(r, n["storage"], "ib.storage", ib.storage);
  if (n["frontend"]) read_role_expect(r, n["frontend"], "ib.frontend", ib.frontend);
}

// A byte size such as 1G or 256M within [lo, hi].
unsigned long long read_size(const Reader& r, const YAML::Node& n, const std::string& key, unsigned long long lo,
                             unsigned long long hi) {
  auto v = parse_size(r.scalar(n, key));
  if (!v) r.fail(n, "'" + key + "' must be a size such as 1G or 256M");
  if (*v < lo || *v > hi) r.fail(n, "'" + key + "' is out of range");
  return *v;
}

void read_gpu(const Reader& r, const YAML::Node& n, GpuExpect& g) {
  r.require_map(n, "gpu");
  r.only_keys(n, "gpu.", {"count", "model", "probe", "probe_timeout", "libraries", "throttle", "pcie_replay_max"});
  if (n["count"]) g.count = r.numeric(n["count"], "gpu.count", 0, 64);
  if (n["model"]) g.model = r.scalar(n["model"], "gpu.model");
  if (n["probe"]) g.probe = r.absolute_path(n["probe"], "gpu.probe");
  if (n["probe_timeout"]) {
    g.probe_timeout_s = r.seconds(n["probe_timeout"], "gpu.probe_timeout");
    if (g.probe_timeout_s < 1) r.fail(n["probe_timeout"], "'gpu.probe_timeout' must be at least 1s");
  }
  if (n["throttle"]) g.throttle = r.policy(n["throttle"], "gpu.throttle");
  if (n["pcie_replay_max"])
    g.pcie_replay_max = r.numeric(n["pcie_replay_max"], "gpu.pcie_replay_max", 0ull, 4294967295ull);
  if (auto libs = n["libraries"]) {
    r.require_map(libs, "gpu.libraries");
    r.only_keys(libs, "gpu.libraries.", {"nvml", "cuda", "nccl"});
    if (libs["nvml"]) g.libraries.nvml = r.absolute_path(libs["nvml"], "gpu.libraries.nvml");
    if (libs["cuda"]) g.libraries.cuda = r.absolute_path(libs["cuda"], "gpu.libraries.cuda");
    if (libs["nccl"]) g.libraries.nccl = r.absolute_path(libs["nccl"], "gpu.libraries.nccl");
  }
}

void read_p2p(const Reader& r, const YAML::Node& n, P2pSettings& p) {
  r.require_map(n, "p2p");
  r.only_keys(n, "p2p.", {"expect", "bandwidth", "min_bandwidth", "copy_bytes"});
  if (n["expect"]) p.expect = r.one_of(n["expect"], "p2p.expect", {"ok", "nvlink", "any"});
  if (n["bandwidth"]) p.bandwidth = r.boolean(n["bandwidth"], "p2p.bandwidth");
  if (n["min_bandwidth"]) p.min_bandwidth_gbps = r.numeric(n["min_bandwidth"], "p2p.min_bandwidth", 0.0, 100000.0);
  if (n["copy_bytes"]) p.copy_bytes = read_size(r, n["copy_bytes"], "p2p.copy_bytes", 1 << 20, 16ull << 30);
}

void read_nccl(const Reader& r, const YAML::Node& n, NcclCheckSettings& c) {
  r.require_map(n, "nccl");
  r.only_keys(n, "nccl.", {"bytes", "iters", "warmup", "min_bandwidth"});
  if (n["bytes"]) c.bytes = read_size(r, n["bytes"], "nccl.bytes", 1 << 20, 64ull << 30);
  if (n["iters"]) c.iters = r.numeric(n["iters"], "nccl.iters", 1, 10000);
  if (n["warmup"]) c.warmup = r.numeric(n["warmup"], "nccl.warmup", 0, 10000);
  if (auto rules = n["min_bandwidth"]) {
    if (!rules.IsSequence()) r.fail(rules, "'nccl.min_bandwidth' must be a list of {model, gpus, busbw} entries");
    for (const auto& item : rules) {
      r.require_map(item, "nccl.min_bandwidth[]");
      r.only_keys(item, "nccl.min_bandwidth[].", {"model", "gpus", "busbw", "algbw"});
      BandwidthRule rule;
      rule.line = item.Mark().line + 1;
      if (item["model"]) rule.model = r.scalar(item["model"], "nccl.min_bandwidth[].model");
      if (item["gpus"]) rule.gpus = r.numeric(item["gpus"], "nccl.min_bandwidth[].gpus", 1, 64);
      if (item["busbw"]) rule.busbw_gbps = r.numeric(item["busbw"], "nccl.min_bandwidth[].busbw", 0.0, 100000.0);
      if (item["algbw"]) rule.algbw_gbps = r.numeric(item["algbw"], "nccl.min_bandwidth[].algbw", 0.0, 100000.0);
      if (!rule.busbw_gbps && !rule.algbw_gbps) r.fail(item, "a 'nccl.min_bandwidth' entry needs busbw or algbw (GB/s)");
      c.min_bandwidth.push_back(rule);
    }
  }
}

void read_failfast(const Reader& r, const YAML::Node& n, FailFastSettings& f) {
  r.require_map(n, "plugin.failfast");
  r.only_keys(n, "plugin.failfast.", {"enabled", "async_error_handling", "dump_on_timeout", "flight_recorder_entries",
                                      "heartbeat_timeout", "rdzv_join_timeout", "nccl_ib_timeout", "nccl_ib_retry_cnt",
                                      "deepspeed_timeout"});
  if (n["enabled"]) f.enabled = r.boolean(n["enabled"], "plugin.failfast.enabled");
  if (n["async_error_handling"])
    f.async_error_handling = r.numeric(n["async_error_handling"], "plugin.failfast.async_error_handling", 0, 3);
  if (n["dump_on_timeout"]) f.dump_on_timeout = r.boolean(n["dump_on_timeout"], "plugin.failfast.dump_on_timeout");
  if (n["flight_recorder_entries"])
    f.flight_recorder_entries =
        r.numeric(n["flight_recorder_entries"], "plugin.failfast.flight_recorder_entries", 0, 10000000);
  if (n["heartbeat_timeout"])
    f.heartbeat_timeout_s = r.seconds(n["heartbeat_timeout"], "plugin.failfast.heartbeat_timeout");
  if (n["rdzv_join_timeout"])
    f.rdzv_join_timeout_s = r.seconds(n["rdzv_join_timeout"], "plugin.failfast.rdzv_join_timeout");
  if (n["nccl_ib_timeout"]) f.nccl_ib_timeout = r.numeric(n["nccl_ib_timeout"], "plugin.failfast.nccl_ib_timeout", 1, 31);
  if (n["nccl_ib_retry_cnt"])
    f.nccl_ib_retry_cnt = r.numeric(n["nccl_ib_retry_cnt"], "plugin.failfast.nccl_ib_retry_cnt", 1, 7);
  if (n["deepspeed_timeout"])
    f.deepspeed_timeout_min = r.numeric(n["deepspeed_timeout"], "plugin.failfast.deepspeed_timeout", 1, 100000);
}

void read_hang(const Reader& r, const YAML::Node& n, HangSettings& h) {
  r.require_map(n, "plugin.hang");
  r.only_keys(n, "plugin.hang.", {"duration", "action", "cpu", "kill_grace"});
  if (n["duration"]) h.duration_s = r.seconds(n["duration"], "plugin.hang.duration");
  if (n["action"]) h.action = r.one_of(n["action"], "plugin.hang.action", {"kill", "report"});
  if (n["cpu"]) h.cpu = r.boolean(n["cpu"], "plugin.hang.cpu");
  if (n["kill_grace"]) h.kill_grace_s = r.seconds(n["kill_grace"], "plugin.hang.kill_grace");
}

void read_preflight(const Reader& r, const YAML::Node& n, PreflightSettings& p) {
  r.require_map(n, "plugin.preflight");
  r.only_keys(n, "plugin.preflight.", {"enabled", "shm_path", "shm_min", "memlock", "fs_root"});
  if (n["enabled"]) p.enabled = r.boolean(n["enabled"], "plugin.preflight.enabled");
  if (n["shm_path"]) p.shm_path = r.absolute_path(n["shm_path"], "plugin.preflight.shm_path");
  if (n["shm_min"]) {
    auto bytes = parse_size(r.scalar(n["shm_min"], "plugin.preflight.shm_min"));
    if (!bytes) r.fail(n["shm_min"], "'plugin.preflight.shm_min' must be a size such as 1G or 512M");
    p.shm_min_bytes = *bytes;
  }
  if (n["memlock"]) p.memlock = r.boolean(n["memlock"], "plugin.preflight.memlock");
  if (n["fs_root"]) p.fs_root = r.absolute_path(n["fs_root"], "plugin.preflight.fs_root");
}

void read_plugin(const Reader& r, const YAML::Node& n, PluginSettings& p) {
  r.require_map(n, "plugin");
  r.only_keys(n, "plugin.", {"torch_env", "torchrun_env", "master_port_range", "nproc_per_node", "nccl_env",
                                  "prefix", "prefix_format", "failfast", "hang", "preflight", "master_addr",
                                  "diag_dir_trusted_groups"});
  if (n["torch_env"]) p.torch_env = r.boolean(n["torch_env"], "plugin.torch_env");
  if (n["torchrun_env"]) p.torchrun_env = r.boolean(n["torchrun_env"], "plugin.torchrun_env");
  if (auto range = n["master_port_range"]) {
    if (!range.IsSequence() || range.size() != 2)
      r.fail(range, "'plugin.master_port_range' must be [first, last], e.g. [61000, 65535]");
    p.master_port_first = r.numeric(range[0], "plugin.master_port_range", 1024, 65535);
    p.master_port_last = r.numeric(range[1], "plugin.master_port_range", 1024, 65535);
    if (p.master_port_first > p.master_port_last) r.fail(range, "'plugin.master_port_range' is empty: first > last");
  }
  if (n["nproc_per_node"]) p.nproc_per_node = r.numeric(n["nproc_per_node"], "plugin.nproc_per_node", 0, 1024);
  if (n["prefix"]) p.prefix = r.one_of(n["prefix"], "plugin.prefix", {"auto", "always", "never"});
  if (n["master_addr"])
    p.master_addr = r.one_of(n["master_addr"], "plugin.master_addr", {"auto", "name", "address", "hostname"});
  if (auto f = n["prefix_format"]) {
    std::string format = r.scalar(f, "plugin.prefix_format");
    if (format.size() > 128) r.fail(f, "'plugin.prefix_format' is longer than 128 characters");
    if (!is_one_printable_line(format)) r.fail(f, "'plugin.prefix_format' holds control characters");
    p.prefix_format = format;
  }
  if (auto g = n["diag_dir_trusted_groups"]) {
    if (!g.IsSequence())
      r.fail(g, "'plugin.diag_dir_trusted_groups' must be a list of group names, e.g. [proj-ml]");
    for (const auto& item : g) {
      std::string name = r.scalar(item, "plugin.diag_dir_trusted_groups");
      if (name.empty() || !is_one_printable_line(name) || name.find_first_of(" :,") != std::string::npos)
        r.fail(item, "'plugin.diag_dir_trusted_groups' holds '" + escape_control(name) + "', which is not a group name");
      p.diag_dir_trusted_groups.push_back(name);
    }
  }
  if (auto f = n["failfast"]) read_failfast(r, f, p.failfast);
  if (auto h = n["hang"]) read_hang(r, h, p.hang);
  if (auto pf = n["preflight"]) read_preflight(r, pf, p.preflight);
  if (auto env = n["nccl_env"]) {
    r.require_map(env, "plugin.nccl_env");
    for (const auto& kv : env) {
      std::string name = kv.first.Scalar();
      if (name.rfind("NCCL_", 0) != 0) r.fail(kv.first, "'plugin.nccl_env." + name + "': only NCCL_* variables belong here");
      std::string value = r.scalar(kv.second, "plugin.nccl_env." + name);
      if (!is_one_printable_line(value)) r.fail(kv.second, "'plugin.nccl_env." + name + "' holds control characters");
      p.nccl_env.emplace_back(name, value);
    }
  }
}

void read_xid(const Reader& r, const YAML::Node& n, XidSettings& x) {
  r.require_map(n, "xid");
  r.only_keys(n, "xid.", {"critical", "ignore"});
  for (const char* key : {"critical", "ignore"}) {
    if (!n[key]) continue;
    const std::string name = std::string("xid.") + key;
    if (!n[key].IsSequence()) r.fail(n[key], "'" + name + "' must be a list of Xid numbers, e.g. [13, 43]");
    auto& out = std::string(key) == "critical" ? x.critical : x.ignore;
    for (const auto& item : n[key]) out.push_back(r.numeric(item, name, 0, 9999));
  }
  for (int v : x.critical)
    if (std::find(x.ignore.begin(), x.ignore.end(), v) != x.ignore.end())
      r.fail(n, "Xid " + std::to_string(v) + " is in both 'xid.critical' and 'xid.ignore'");
}

void read_ibcounters(const Reader& r, const YAML::Node& n, IbCounterSettings& c) {
  r.require_map(n, "ibcounters");
  r.only_keys(n, "ibcounters.", {"max_growth", "flap_critical"});
  if (n["flap_critical"])
    c.flap_critical = r.numeric(n["flap_critical"], "ibcounters.flap_critical", 0ull, 1000000000ull);
  if (auto g = n["max_growth"]) {
    r.require_map(g, "ibcounters.max_growth");
    std::vector<std::string> names;
    for (const auto& [name, _] : default_ib_counter_growth()) names.push_back(name);
    for (const auto& kv : g) {
      const std::string name = kv.first.Scalar();
      auto it = std::find_if(c.max_growth.begin(), c.max_growth.end(), [&](const auto& e) { return e.first == name; });
      if (it == c.max_growth.end())
        r.fail(kv.first, "unknown counter 'ibcounters.max_growth." + name + "' (known: " + join(names) + ")");
      it->second = r.numeric(kv.second, "ibcounters.max_growth." + name, 0ull, 1000000000000ull);
    }
  }
}

void read_pcie(const Reader& r, const YAML::Node& n, PcieSettings& p) {
  r.require_map(n, "pcie");
  r.only_keys(n, "pcie.", {"policy", "gpu_width", "gpu_speed", "nic_width", "nic_speed"});
  if (n["policy"]) p.policy = r.policy(n["policy"], "pcie.policy");
  if (n["gpu_width"]) p.gpu_width = r.numeric(n["gpu_width"], "pcie.gpu_width", 1, 32);
  if (n["nic_width"]) p.nic_width = r.numeric(n["nic_width"], "pcie.nic_width", 1, 32);
  if (n["gpu_speed"]) p.gpu_speed = r.numeric(n["gpu_speed"], "pcie.gpu_speed", 2.5, 128.0);
  if (n["nic_speed"]) p.nic_speed = r.numeric(n["nic_speed"], "pcie.nic_speed", 2.5, 128.0);
}

void read_gdr(const Reader& r, const YAML::Node& n, GdrSettings& g) {
  r.require_map(n, "gdr");
  r.only_keys(n, "gdr.", {"required"});
  if (n["required"]) g.required = r.one_of(n["required"], "gdr.required", {"auto", "true", "false"});
}

void read_fabric(const Reader& r, const YAML::Node& n, FabricSettings& f) {
  r.require_map(n, "fabric");
  r.only_keys(n, "fabric.", {"action", "seconds", "slow_fraction", "min_gbps", "timeout"});
  if (n["action"]) f.action = r.one_of(n["action"], "fabric.action", {"fail", "warn"});
  if (n["seconds"]) f.seconds = r.numeric(n["seconds"], "fabric.seconds", 0.05, 10.0);
  if (n["slow_fraction"]) f.slow_fraction = r.numeric(n["slow_fraction"], "fabric.slow_fraction", 0.0, 1.0);
  if (n["min_gbps"]) f.min_gbps = r.numeric(n["min_gbps"], "fabric.min_gbps", 0.0, 100000.0);
  if (n["timeout"]) f.timeout_s = r.numeric(n["timeout"], "fabric.timeout", 5.0, 50.0);
}

}  // namespace

const std::vector<std::pair<std::string, unsigned long long>>& default_ib_counter_growth() {
  // Per run (minutes apart): a healthy link adds none of these; a few symbol errors
  // are within the spec's bit error rate, recoveries and downs are not.
  static const std::vector<std::pair<std::string, unsigned long long>> kDefaults = {
      {"symbol_error", 10},
      {"link_error_recovery", 1},
      {"link_downed", 0},
      {"port_rcv_errors", 10},
      {"port_rcv_remote_physical_errors", 10},
      {"local_link_integrity_errors", 1},
      {"excessive_buffer_overrun_errors", 1},
      {"port_xmit_discards", 100},
  };
  return kDefaults;
}

unsigned long long IbCounterSettings::max_growth_for(const std::string& counter) const {
  for (const auto& [name, v] : max_growth)
    if (name == counter) return v;
  return 0;
}

const std::vector<std::string>& port_role_names() {
  static const std::vector<std::string> kNames = {"fabric", "storage", "frontend", "unused"};
  return kNames;
}

std::string role_name(PortRole r) { return port_role_names().at(static_cast<std::size_t>(r)); }

RoleExpect IbExpect::expect_for(PortRole r) const {
  switch (r) {
    case PortRole::fabric: return {rate_gbps, link_layer};
    case PortRole::storage: return storage;
    case PortRole::frontend: return frontend;
    case PortRole::unused: return {};
  }
  return {};
}

std::string policy_name(Policy p) {
  switch (p) {
    case Policy::critical: return "critical";
    case Policy::warning: return "warning";
    case Policy::ignore: return "ignore";
  }
  return "?";
}

Result<Config> parse_config(std::string_view yaml_text, const std::string& source) {
  Config cfg;
  cfg.source = source;
  Reader r(source);
  try {
    YAML::Node root = YAML::Load(std::string(yaml_text));
    if (root.IsNull()) return cfg;  // an empty file: all defaults
    r.require_map(root, "the top level");
    r.only_keys(root, "", {"health", "drain", "ib", "acs", "iommu", "gpu", "p2p", "nccl", "plugin", "xid", "ibcounters", "pcie", "gdr", "fabric"});
    if (root["health"]) read_health(r, root["health"], cfg.health);
    if (root["drain"]) read_drain(r, root["drain"], cfg.drain);
    if (root["ib"]) read_ib(r, root["ib"], cfg.ib);
    if (auto n = root["acs"]) {
      r.require_map(n, "acs");
      r.only_keys(n, "acs.", {"policy"});
      if (n["policy"]) cfg.acs.policy = r.policy(n["policy"], "acs.policy");
    }
    if (auto n = root["iommu"]) {
      r.require_map(n, "iommu");
      r.only_keys(n, "iommu.", {"allow", "policy"});
      static const std::vector<std::string> kModes = {"off", "passthrough", "translated"};
      if (n["allow"]) cfg.iommu.allow = r.list(n["allow"], "iommu.allow", &kModes);
      if (n["policy"]) cfg.iommu.policy = r.policy(n["policy"], "iommu.policy");
    }
    if (root["plugin"]) read_plugin(r, root["plugin"], cfg.plugin);
    if (root["gpu"]) read_gpu(r, root["gpu"], cfg.gpu);
    if (root["p2p"]) read_p2p(r, root["p2p"], cfg.p2p);
    if (root["nccl"]) read_nccl(r, root["nccl"], cfg.nccl);
    if (root["xid"]) read_xid(r, root["xid"], cfg.xid);
    if (root["ibcounters"]) read_ibcounters(r, root["ibcounters"], cfg.ibcounters);
    if (root["pcie"]) read_pcie(r, root["pcie"], cfg.pcie);
    if (root["gdr"]) read_gdr(r, root["gdr"], cfg.gdr);
    if (root["fabric"]) read_fabric(r, root["fabric"], cfg.fabric);
  } catch (const ConfigError& e) {
    return Result<Config>::failure(e.what());
  } catch (const YAML::Exception& e) {
    std::string where = source;
    if (e.mark.line >= 0) where += ":" + std::to_string(e.mark.line + 1);
    return Result<Config>::failure("gpudiag: " + where + ": not valid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return Result<Config>::failure("gpudiag: " + source + ": " + e.what());
  }
  return cfg;
}

Result<Config> load_config_file(const std::string& path) {
  // Say which of missing, unreadable (a root-only file read by srun as the user) or
  // not a file it is: each has a different fix. O_NONBLOCK: a FIFO must not hang srun.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Result<Config>::failure("gpudiag: cannot read config " + path + ": " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Result<Config>::failure("gpudiag: cannot read config " + path + ": not a regular file");
  }
  // A config is a few KiB; refuse something that is obviously not one.
  constexpr std::size_t kMaxConfig = 1 << 20;
  std::string buf;
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Result<Config>::failure("gpudiag: cannot read config " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
    if (buf.size() > kMaxConfig) {
      ::close(fd);
      return Result<Config>::failure("gpudiag: " + path + ": larger than 1 MiB, not a config");
    }
  }
  ::close(fd);
  return parse_config(buf, path);
}

}  // namespace gpudiag
