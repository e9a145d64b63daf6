#include "config/config.h"

#include "config/check_names.h"
#include "config/config_tree.h"
#include "util/control_bytes.h"
#include "util/duration.h"
#include "util/text_lists.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <type_traits>
#include <functional>
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

  [[noreturn]] void fail(const ConfigNode& at, const std::string& msg) const {
    std::string where = source_;
    if (at.IsDefined() && at.line() >= 0) where += ":" + std::to_string(at.line() + 1);
    throw ConfigError("gpudiag: " + where + ": " + msg);
  }

  void require_map(const ConfigNode& n, const std::string& key) const {
    if (!n.IsMap()) fail(n, "'" + key + "' must be a mapping of keys to values");
  }

  // As an ostream prints it (%g for numbers), without the locale machinery a first
  // ostringstream sets up: the key tables call this at every plugin start (issue 34).
  template <class T>
  static std::string fmt_num(T v) {
    if constexpr (std::is_integral_v<T>) {
      return std::to_string(v);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
      return buf;
    }
  }

  std::string scalar(const ConfigNode& n, const std::string& key) const {
    if (!n.IsScalar()) fail(n, "'" + key + "' must be a single value");
    return n.Scalar();
  }

  // A whole number (int) or any number (double) within [lo, hi].
  template <class T>
  T numeric(const ConfigNode& n, const std::string& key, T lo, T hi) const {
    std::string s = scalar(n, key);
    T v{};
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty())
      fail(n, "'" + key + "' must be " + (std::is_integral_v<T> ? "a whole number" : "a number") + ", not '" + s + "'");
    if (!(v >= lo && v <= hi))
      fail(n, "'" + key + "' must be between " + fmt_num(lo) + " and " + fmt_num(hi));
    return v;
  }

  bool boolean(const ConfigNode& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
    fail(n, "'" + key + "' must be true or false, not '" + s + "'");
  }

  std::string one_of(const ConfigNode& n, const std::string& key, const std::vector<std::string>& choices) const {
    std::string s = scalar(n, key);
    if (std::find(choices.begin(), choices.end(), s) == choices.end())
      fail(n, "'" + key + "' is '" + s + "' (expected one of: " + join(choices) + ")");
    return s;
  }

  std::vector<std::string> list(const ConfigNode& n, const std::string& key,
                                const std::vector<std::string>* choices = nullptr) const {
    if (!n.IsSequence()) fail(n, "'" + key + "' must be a list, e.g. [a, b]");
    std::vector<std::string> out;
    for (const auto& item : n.items())
      out.push_back(choices ? one_of(item, key, *choices) : scalar(item, key));
    return out;
  }

  // A duration ("90", "90s", "10m", "1h") in whole seconds, 0 meaning off.
  int seconds(const ConfigNode& n, const std::string& key) const {
    std::string s = scalar(n, key);
    auto v = parse_duration(s);
    if (!v || *v > 1e7) fail(n, "'" + key + "' must be a duration such as 90s, 10m or 1h, not '" + s + "'");
    return static_cast<int>(*v + 0.5);
  }

  std::string absolute_path(const ConfigNode& n, const std::string& key) const {
    std::string s = scalar(n, key);
    if (s.empty() || s[0] != '/') fail(n, "'" + key + "' must be an absolute path");
    return s;
  }

  Policy policy(const ConfigNode& n, const std::string& key) const {
    std::string s = one_of(n, key, {"critical", "warning", "ignore"});
    return s == "critical" ? Policy::critical : s == "warning" ? Policy::warning : Policy::ignore;
  }

 private:
  std::string source_;
};

// Each key is declared once, here, with what it takes and what it is for; the same
// declaration reads it, lets it past the unknown-key check and lists it in
// config_keys() (gpudiag-health --config-keys). A key cannot be read without being
// allowed, nor allowed without being read.
struct KeyDoc {
  std::string name, type, help;
  const std::vector<KeyDoc>* children = nullptr;  // the keys of a mapping (or of each entry of a list)
  bool list_of_mappings = false;
};

template <class S>
using ReadFn = std::function<void(const Reader&, const ConfigNode& value, const std::string& key, S&)>;

template <class S>
struct Key {
  KeyDoc doc;
  ReadFn<S> read;
  bool after_check = false;  // read once the section's check passed, whose message comes first
};

template <class S>
struct Section {
  Section(std::vector<Key<S>> k, std::function<void(const Reader&, const ConfigNode&, S&)> c = {})
      : keys(std::move(k)), check(std::move(c)) {
    for (const auto& key : keys) docs.push_back(key.doc);
  }
  std::vector<Key<S>> keys;  // in file order: the unknown-key message lists them so
  // Rules between keys, once each was read.
  std::function<void(const Reader&, const ConfigNode&, S&)> check;
  std::vector<KeyDoc> docs;
};

// `label` names the mapping in messages ("plugin.hang"); `prefix` goes before each key.
template <class S>
void read_section(const Reader& r, const ConfigNode& n, const std::string& label, const std::string& prefix,
                  const Section<S>& sec, S& out) {
  r.require_map(n, label);
  for (const auto& kv : n.entries()) {
    const std::string key = kv.first.Scalar();
    const bool known = std::any_of(sec.docs.begin(), sec.docs.end(), [&](const KeyDoc& d) { return d.name == key; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& d : sec.docs) names.push_back(d.name);
      r.fail(kv.first, "unknown key '" + prefix + key + "' (known: " + join(names) + ")");
    }
  }
  for (const auto& key : sec.keys)
    if (auto v = n[key.doc.name]; v && !key.after_check) key.read(r, v, prefix + key.doc.name, out);
  if (sec.check) sec.check(r, n, out);
  for (const auto& key : sec.keys)
    if (auto v = n[key.doc.name]; v && key.after_check) key.read(r, v, prefix + key.doc.name, out);
}

// The value type of a member that may be absent (std::optional<int> -> int).
template <class M>
struct Plain { using type = M; };
template <class M>
struct Plain<std::optional<M>> { using type = M; };

template <class T>
std::string range_text(T lo, T hi) {
  return Reader::fmt_num(lo) + " to " + Reader::fmt_num(hi);
}

template <class S>
Key<S> custom(const char* name, std::string type, const char* help, ReadFn<S> read) {
  return {{name, std::move(type), help}, std::move(read)};
}

template <class S>
Key<S> after_check(Key<S> k) {
  k.after_check = true;
  return k;
}

// A whole number (int members) or any number (double members) within [lo, hi].
template <class S, class M, class T = typename Plain<M>::type>
Key<S> number(const char* name, M S::*m, T lo, T hi, const char* help) {
  return custom<S>(name, std::string(std::is_integral_v<T> ? "whole number, " : "number, ") + range_text(lo, hi), help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
                     s.*m = r.numeric(n, key, lo, hi);
                   });
}

template <class S>
Key<S> flag(const char* name, bool S::*m, const char* help) {
  return custom<S>(name, "true or false", help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) { s.*m = r.boolean(n, key); });
}

template <class S, class M>
Key<S> choice(const char* name, M S::*m, std::vector<std::string> choices, const char* help) {
  std::string type = "one of: " + join(choices);
  return custom<S>(name, std::move(type), help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
                     s.*m = r.one_of(n, key, choices);
                   });
}

template <class S>
Key<S> policy(const char* name, Policy S::*m, const char* help) {
  return custom<S>(name, "one of: critical, warning, ignore", help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) { s.*m = r.policy(n, key); });
}

template <class S>
Key<S> path(const char* name, std::string S::*m, const char* help) {
  return custom<S>(name, "absolute path", help, [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
    s.*m = r.absolute_path(n, key);
  });
}

template <class S>
Key<S> text(const char* name, std::string S::*m, const char* help) {
  return custom<S>(name, "text", help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) { s.*m = r.scalar(n, key); });
}

template <class S, class M>
Key<S> duration(const char* name, M S::*m, const char* help) {
  return custom<S>(name, "duration such as 90s, 10m or 1h (0: off)", help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) { s.*m = r.seconds(n, key); });
}

template <class S>
Key<S> patterns(const char* name, std::vector<std::string> S::*m, const char* help) {
  return custom<S>(name, "list of names or fnmatch patterns", help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) { s.*m = r.list(n, key); });
}

// 1G, 256M: how the docs write a size range.
std::string size_text(unsigned long long v) {
  static const std::pair<const char*, unsigned long long> kUnits[] = {{"G", 1ull << 30}, {"M", 1ull << 20}};
  for (const auto& [unit, bytes] : kUnits)
    if (v >= bytes && v % bytes == 0) return std::to_string(v / bytes) + unit;
  return std::to_string(v);
}

// A byte size such as 1G or 256M within [lo, hi].
unsigned long long read_size(const Reader& r, const ConfigNode& n, const std::string& key, unsigned long long lo,
                             unsigned long long hi) {
  auto v = parse_size(r.scalar(n, key));
  if (!v) r.fail(n, "'" + key + "' must be a size such as 1G or 256M");
  if (*v < lo || *v > hi) r.fail(n, "'" + key + "' is out of range");
  return *v;
}

template <class S>
Key<S> size(const char* name, unsigned long long S::*m, unsigned long long lo, unsigned long long hi,
            const char* help) {
  return custom<S>(name, "size such as 256M or 1G, " + size_text(lo) + " to " + size_text(hi), help,
                   [=](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
                     s.*m = read_size(r, n, key, lo, hi);
                   });
}

// A mapping of its own keys.
template <class S, class C>
Key<S> mapping(const char* name, C S::*m, const Section<C>& sec, const char* help) {
  Key<S> k = custom<S>(name, "mapping", help, [=, &sec](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
    read_section(r, n, key, key + ".", sec, s.*m);
  });
  k.doc.children = &sec.docs;
  return k;
}

// A list of mappings, each entry one rule (which keeps its line for messages).
template <class S, class E>
Key<S> rules(const char* name, std::vector<E> S::*m, const Section<E>& sec, std::string not_a_list, const char* help) {
  Key<S> k = custom<S>(name, "list of mappings", help,
                       [=, &sec](const Reader& r, const ConfigNode& n, const std::string& key, S& s) {
                         if (!n.IsSequence()) r.fail(n, "'" + key + "' must be " + not_a_list);
                         for (const auto& item : n.items()) {
                           E e;
                           e.line = item.line() + 1;
                           read_section(r, item, key + "[]", key + "[].", sec, e);
                           (s.*m).push_back(e);
                         }
                       });
  k.doc.children = &sec.docs;
  k.doc.list_of_mappings = true;
  return k;
}

// `off`, or a whole number within [lo, hi] with an optional unit suffix ("10%").
std::optional<int> cap_or_off(const Reader& r, const ConfigNode& n, const std::string& key, int lo, int hi,
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

using D = DrainSettings;
const Section<D>& drain_keys() {
  static const Section<D> kKeys({
      custom<D>("max_nodes", "off or a whole number, 1 to 1000000",
                "nodes gpudiag may have drained in the whole cluster at once, this one included",
                [](const Reader& r, const ConfigNode& n, const std::string& key, D& d) {
                  d.max_nodes = cap_or_off(r, n, key, 1, 1000000, "");
                }),
      custom<D>("max_share", "off or a per cent, 1% to 100%",
                "the share of each partition this node is in that gpudiag may have drained (rounded up)",
                [](const Reader& r, const ConfigNode& n, const std::string& key, D& d) {
                  d.max_share_pct = cap_or_off(r, n, key, 1, 100, "%");
                }),
      custom<D>("jitter", "duration, 0 to 30s", "a random wait before counting, so that nodes reach slurmctld apart",
                [](const Reader& r, const ConfigNode& n, const std::string& key, D& d) {
                  std::string s = r.scalar(n, key);
                  auto v = parse_duration(s);
                  if (!v || *v > 30)
                    r.fail(n, "'" + key + "' must be a duration from 0 to 30s, e.g. 2s or 0.5s, not '" + s + "'");
                  d.jitter_s = *v;
                }),
  });
  return kKeys;
}

using H = HealthSettings;
const Section<H>& health_keys() {
  static const Section<H> kKeys({
      custom<H>("checks", "list of check names: " + known_checks_text(), "the checks a run without --checks runs",
                [](const Reader& r, const ConfigNode& n, const std::string& key, H& h) {
                  h.checks = r.list(n, key, &known_checks());
                }),
      number("timeout", &H::timeout_s, 1.0, 3600.0, "seconds for all checks together"),
      custom<H>("drain_prefix", "text, 1 to 32 characters", "what a drain reason by gpudiag starts with",
                [](const Reader& r, const ConfigNode& n, const std::string& key, H& h) {
                  h.drain_prefix = r.scalar(n, key);
                  if (h.drain_prefix.empty() || h.drain_prefix.size() > 32)
                    r.fail(n, "'" + key + "' must be 1 to 32 characters");
                }),
      text("node_name", &H::node_name, "this node's Slurm name (default: hostname -s)"),
      number("scontrol_timeout", &H::scontrol_timeout_s, 1.0, 300.0, "seconds one scontrol call may take"),
      path("state_dir", &H::state_dir, "where run state between runs is kept (default: /var/lib/gpudiag)"),
  });
  return kKeys;
}

// The kernel's three words for a port's link layer ("Unknown": EFA and other providers
// that report none).
const std::vector<std::string> kLinkLayers = {"InfiniBand", "Ethernet", "Unknown"};

const Section<RoleExpect>& role_expect_keys() {
  static const Section<RoleExpect> kKeys({
      number("rate_gbps", &RoleExpect::rate_gbps, 1.0, 100000.0, "the lowest rate a port of this role may run at (Gb/s)"),
      choice("link_layer", &RoleExpect::link_layer, kLinkLayers, "the link layer every port of this role must have"),
  });
  return kKeys;
}

const Section<RoleRule>& role_rule_keys() {
  static const Section<RoleRule> kKeys(
      {
          text("hca", &RoleRule::hca, "fnmatch pattern on the RDMA device name"),
          text("netdev", &RoleRule::netdev, "fnmatch pattern on the port's network interfaces"),
          number("port", &RoleRule::port, 1, 255, "only this port of the device"),
          after_check(custom<RoleRule>(
              "role", "one of: " + join(port_role_names()), "what the matching ports are for",
              [](const Reader& r, const ConfigNode& n, const std::string& key, RoleRule& rule) {
                const std::string role = r.one_of(n, key, port_role_names());
                for (PortRole p : {PortRole::fabric, PortRole::storage, PortRole::frontend, PortRole::unused})
                  if (role_name(p) == role) rule.role = p;
              })),
      },
      [](const Reader& r, const ConfigNode& item, RoleRule& rule) {
        if (rule.hca.empty() && rule.netdev.empty()) r.fail(item, "an 'ib.roles' entry needs hca or netdev (a pattern)");
        if (!item["role"]) r.fail(item, "an 'ib.roles' entry needs a role (" + join(port_role_names()) + ")");
      });
  return kKeys;
}

const Section<IbExpect>& ib_keys() {
  static const Section<IbExpect> kKeys({
      patterns("hcas", &IbExpect::hcas, "the HCAs expected (default: every one not excluded)"),
      number("count", &IbExpect::count, 0, 1024, "how many HCAs must match hcas (or exist)"),
      number("rate_gbps", &IbExpect::rate_gbps, 1.0, 100000.0, "the lowest rate a GPU-fabric port may run at (Gb/s)"),
      choice("link_layer", &IbExpect::link_layer, kLinkLayers, "the link layer of the GPU-fabric ports"),
      patterns("exclude", &IbExpect::exclude, "HCAs never checked (bonds, management)"),
      rules("roles", &IbExpect::roles, role_rule_keys(), "a list of {hca, netdev, port, role} entries",
            "the role of the ports each entry matches, where the node cannot tell; the first match wins"),
      mapping("storage", &IbExpect::storage, role_expect_keys(), "what storage ports must reach"),
      mapping("frontend", &IbExpect::frontend, role_expect_keys(), "what front-end ports must reach"),
  });
  return kKeys;
}

const Section<AcsSettings>& acs_keys() {
  static const Section<AcsSettings> kKeys({
      policy("policy", &AcsSettings::policy, "what ACS redirecting peer-to-peer traffic is"),
  });
  return kKeys;
}

const Section<IommuSettings>& iommu_keys() {
  static const std::vector<std::string> kModes = {"off", "passthrough", "translated"};
  static const Section<IommuSettings> kKeys({
      custom<IommuSettings>("allow", "list of: " + join(kModes), "the IOMMU modes that are fine",
                            [](const Reader& r, const ConfigNode& n, const std::string& key, IommuSettings& i) {
                              i.allow = r.list(n, key, &kModes);
                            }),
      policy("policy", &IommuSettings::policy, "what any other IOMMU mode is"),
  });
  return kKeys;
}

const Section<GpuLibraries>& gpu_library_keys() {
  static const Section<GpuLibraries> kKeys({
      path("nvml", &GpuLibraries::nvml, "libnvidia-ml the GPU probe loads (default: its standard search)"),
      path("cuda", &GpuLibraries::cuda, "libcuda the GPU probe loads (default: its standard search)"),
      path("nccl", &GpuLibraries::nccl, "libnccl the GPU probe loads (default: its standard search)"),
  });
  return kKeys;
}

using G = GpuExpect;
const Section<G>& gpu_keys() {
  static const Section<G> kKeys({
      number("count", &G::count, 0, 64, "NVIDIA GPUs on PCI and seen by the driver (0: a CPU node)"),
      text("model", &G::model, "fnmatch pattern on the GPU's name, e.g. *H100*"),
      path("probe", &G::probe, "gpudiag-gpu-probe (default: next to gpudiag-health's libexec)"),
      custom<G>("probe_timeout", "duration such as 40s, at least 1s", "seconds one probe run may take",
                [](const Reader& r, const ConfigNode& n, const std::string& key, G& g) {
                  g.probe_timeout_s = r.seconds(n, key);
                  if (g.probe_timeout_s < 1) r.fail(n, "'" + key + "' must be at least 1s");
                }),
      mapping("libraries", &G::libraries, gpu_library_keys(), "libraries the GPU probe loads"),
      policy("throttle", &G::throttle, "what a GPU whose clocks the hardware pulls down is"),
      number("pcie_replay_max", &G::pcie_replay_max, 0ull, 4294967295ull,
             "a PCIe replay counter above this is a warning"),
  });
  return kKeys;
}

const Section<P2pSettings>& p2p_keys() {
  static const Section<P2pSettings> kKeys({
      choice("expect", &P2pSettings::expect, {"ok", "nvlink", "any"},
             "ok: P2P read and write for every GPU pair; nvlink: over NVLink too; any: report only"),
      flag("bandwidth", &P2pSettings::bandwidth, "also time a copy between every ordered GPU pair"),
      number("min_bandwidth", &P2pSettings::min_bandwidth_gbps, 0.0, 100000.0,
             "a pair below this (GB/s) is critical (0: report only)"),
      size("copy_bytes", &P2pSettings::copy_bytes, 1ull << 20, 16ull << 30, "bytes each timed copy moves"),
  });
  return kKeys;
}

const Section<BandwidthRule>& bandwidth_rule_keys() {
  static const Section<BandwidthRule> kKeys(
      {
          text("model", &BandwidthRule::model, "fnmatch pattern on the GPU's name (default: *)"),
          number("gpus", &BandwidthRule::gpus, 1, 64, "only for exactly this many GPUs"),
          number("busbw", &BandwidthRule::busbw_gbps, 0.0, 100000.0, "the lowest bus bandwidth (GB/s)"),
          number("algbw", &BandwidthRule::algbw_gbps, 0.0, 100000.0, "the lowest algorithm bandwidth (GB/s)"),
      },
      [](const Reader& r, const ConfigNode& item, BandwidthRule& rule) {
        if (!rule.busbw_gbps && !rule.algbw_gbps) r.fail(item, "a 'nccl.min_bandwidth' entry needs busbw or algbw (GB/s)");
      });
  return kKeys;
}

const Section<NcclCheckSettings>& nccl_keys() {
  static const Section<NcclCheckSettings> kKeys({
      size("bytes", &NcclCheckSettings::bytes, 1ull << 20, 64ull << 30, "the all_reduce size per rank"),
      number("iters", &NcclCheckSettings::iters, 1, 10000, "timed all_reduce runs"),
      number("warmup", &NcclCheckSettings::warmup, 0, 10000, "untimed all_reduce runs first"),
      rules("min_bandwidth", &NcclCheckSettings::min_bandwidth, bandwidth_rule_keys(),
            "a list of {model, gpus, busbw} entries", "the floors; the first entry that fits the node's GPUs applies"),
  });
  return kKeys;
}

using F = FailFastSettings;
const Section<F>& failfast_keys() {
  static const Section<F> kKeys({
      flag("enabled", &F::enabled, "set the fail-fast defaults below in every task"),
      number("async_error_handling", &F::async_error_handling, 0, 3, "TORCH_NCCL_ASYNC_ERROR_HANDLING"),
      flag("dump_on_timeout", &F::dump_on_timeout, "TORCH_NCCL_DUMP_ON_TIMEOUT"),
      number("flight_recorder_entries", &F::flight_recorder_entries, 0, 10000000,
             "TORCH_FR_BUFFER_SIZE and TORCH_NCCL_TRACE_BUFFER_SIZE"),
      duration("heartbeat_timeout", &F::heartbeat_timeout_s, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC (0: torch's)"),
      duration("rdzv_join_timeout", &F::rdzv_join_timeout_s, "torchrun's rendezvous join_timeout (0: torchrun's)"),
      number("nccl_ib_timeout", &F::nccl_ib_timeout, 1, 31, "NCCL_IB_TIMEOUT (absent: NCCL's)"),
      number("nccl_ib_retry_cnt", &F::nccl_ib_retry_cnt, 1, 7, "NCCL_IB_RETRY_CNT (absent: NCCL's)"),
      number("deepspeed_timeout", &F::deepspeed_timeout_min, 1, 100000, "DEEPSPEED_TIMEOUT in minutes (absent: DeepSpeed's)"),
  });
  return kKeys;
}

const Section<HangSettings>& hang_keys() {
  static const Section<HangSettings> kKeys({
      duration("duration", &HangSettings::duration_s, "no output from any task of a node for this long is a hang (0: off)"),
      choice("action", &HangSettings::action, {"kill", "report"}, "kill: dump stacks and end the step; report: only dump"),
      flag("cpu", &HangSettings::cpu, "also require the tasks' CPU time to have stopped advancing"),
      duration("kill_grace", &HangSettings::kill_grace_s, "seconds between SIGTERM and SIGKILL"),
  });
  return kKeys;
}

using PF = PreflightSettings;
const Section<PF>& preflight_keys() {
  static const Section<PF> kKeys({
      flag("enabled", &PF::enabled, "run the preflight before every step (else only with --diag=preflight)"),
      path("shm_path", &PF::shm_path, "the shared-memory mount NCCL uses"),
      custom<PF>("shm_min", "size such as 1G or 512M", "the least free space shm_path must have",
                 [](const Reader& r, const ConfigNode& n, const std::string& key, PF& p) {
                   auto bytes = parse_size(r.scalar(n, key));
                   if (!bytes) r.fail(n, "'" + key + "' must be a size such as 1G or 512M");
                   p.shm_min_bytes = *bytes;
                 }),
      flag("memlock", &PF::memlock, "require an unlimited memlock ulimit where the node has IB"),
      path("fs_root", &PF::fs_root, "where sysfs is read from (a fixture tree in tests)"),
  });
  return kKeys;
}

using P = PluginSettings;
const Section<P>& plugin_keys() {
  static const Section<P> kKeys({
      flag("torch_env", &P::torch_env, "set MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE"),
      flag("torchrun_env", &P::torchrun_env, "set torchrun's PET_* variables"),
      custom<P>("master_port_range", "[first, last], whole numbers 1024 to 65535", "where MASTER_PORT is chosen",
                [](const Reader& r, const ConfigNode& range, const std::string& key, P& p) {
                  if (!range.IsSequence() || range.size() != 2)
                    r.fail(range, "'" + key + "' must be [first, last], e.g. [61000, 65535]");
                  p.master_port_first = r.numeric(range[0], key, 1024, 65535);
                  p.master_port_last = r.numeric(range[1], key, 1024, 65535);
                  if (p.master_port_first > p.master_port_last) r.fail(range, "'" + key + "' is empty: first > last");
                }),
      number("nproc_per_node", &P::nproc_per_node, 0, 1024, "PET_NPROC_PER_NODE (0: the GPUs the task sees)"),
      custom<P>("nccl_env", "mapping of NCCL_* names to values", "site NCCL defaults (NCCL_IB_HCA: auto for this node's HCAs)",
                [](const Reader& r, const ConfigNode& env, const std::string& key, P& p) {
                  r.require_map(env, key);
                  for (const auto& kv : env.entries()) {
                    std::string name = kv.first.Scalar();
                    if (name.rfind("NCCL_", 0) != 0)
                      r.fail(kv.first, "'" + key + "." + name + "': only NCCL_* variables belong here");
                    std::string value = r.scalar(kv.second, key + "." + name);
                    if (!is_one_printable_line(value)) r.fail(kv.second, "'" + key + "." + name + "' holds control characters");
                    p.nccl_env.emplace_back(name, value);
                  }
                }),
      choice("prefix", &P::prefix, {"auto", "always", "never"}, "the [host:rank] output prefix (auto: steps of more than one task)"),
      custom<P>("prefix_format", "text up to 128 characters with {host}, {rank}, {local_rank}", "the output prefix",
                [](const Reader& r, const ConfigNode& f, const std::string& key, P& p) {
                  std::string format = r.scalar(f, key);
                  if (format.size() > 128) r.fail(f, "'" + key + "' is longer than 128 characters");
                  if (!is_one_printable_line(format)) r.fail(f, "'" + key + "' holds control characters");
                  p.prefix_format = format;
                }),
      mapping("failfast", &P::failfast, failfast_keys(), "fail-fast defaults for torch and NCCL"),
      mapping("hang", &P::hang, hang_keys(), "the hang watchdog"),
      mapping("preflight", &P::preflight, preflight_keys(), "the checks before the user program"),
      choice("master_addr", &P::master_addr, {"auto", "name", "address", "hostname"},
             "which of the first node's names MASTER_ADDR is"),
      custom<P>("diag_dir_trusted_groups", "list of group names",
                "groups trusted with each other's diag dirs: an ancestor they may write need not be sticky",
                [](const Reader& r, const ConfigNode& g, const std::string& key, P& p) {
                  if (!g.IsSequence()) r.fail(g, "'" + key + "' must be a list of group names, e.g. [proj-ml]");
                  for (const auto& item : g.items()) {
                    std::string name = r.scalar(item, key);
                    if (name.empty() || !is_one_printable_line(name) || name.find_first_of(" :,") != std::string::npos)
                      r.fail(item, "'" + key + "' holds '" + escape_control(name) + "', which is not a group name");
                    p.diag_dir_trusted_groups.push_back(name);
                  }
                }),
  });
  return kKeys;
}

// xid.critical and xid.ignore: lists of Xid numbers.
ReadFn<XidSettings> xid_list(std::vector<int> XidSettings::*m) {
  return [=](const Reader& r, const ConfigNode& n, const std::string& key, XidSettings& x) {
    if (!n.IsSequence()) r.fail(n, "'" + key + "' must be a list of Xid numbers, e.g. [13, 43]");
    for (const auto& item : n.items()) (x.*m).push_back(r.numeric(item, key, 0, 9999));
  };
}

const Section<XidSettings>& xid_keys() {
  static const Section<XidSettings> kKeys(
      {
          custom<XidSettings>("critical", "list of Xid numbers, 0 to 9999",
                              "Xids that are critical whatever the catalogue says", xid_list(&XidSettings::critical)),
          custom<XidSettings>("ignore", "list of Xid numbers, 0 to 9999", "Xids that are only noted",
                              xid_list(&XidSettings::ignore)),
      },
      [](const Reader& r, const ConfigNode& n, XidSettings& x) {
        for (int v : x.critical)
          if (std::find(x.ignore.begin(), x.ignore.end(), v) != x.ignore.end())
            r.fail(n, "Xid " + std::to_string(v) + " is in both 'xid.critical' and 'xid.ignore'");
      });
  return kKeys;
}

std::vector<std::string> ib_counter_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : default_ib_counter_growth()) names.push_back(name);
  return names;
}

const Section<IbCounterSettings>& ibcounter_keys() {
  static const Section<IbCounterSettings> kKeys({
      custom<IbCounterSettings>(
          "max_growth", "mapping of counter names (" + join(ib_counter_names()) + ") to whole numbers",
          "how much each error counter may grow between two runs",
          [](const Reader& r, const ConfigNode& g, const std::string& key, IbCounterSettings& c) {
            r.require_map(g, key);
            for (const auto& kv : g.entries()) {
              const std::string name = kv.first.Scalar();
              auto it = std::find_if(c.max_growth.begin(), c.max_growth.end(), [&](const auto& e) { return e.first == name; });
              if (it == c.max_growth.end())
                r.fail(kv.first, "unknown counter '" + key + "." + name + "' (known: " + join(ib_counter_names()) + ")");
              it->second = r.numeric(kv.second, key + "." + name, 0ull, 1000000000000ull);
            }
          }),
      number("flap_critical", &IbCounterSettings::flap_critical, 0ull, 1000000000ull,
             "link_downed growth above this is critical"),
  });
  return kKeys;
}

const Section<PcieSettings>& pcie_keys() {
  static const Section<PcieSettings> kKeys({
      policy("policy", &PcieSettings::policy, "what a downtrained link is"),
      number("gpu_width", &PcieSettings::gpu_width, 1, 32, "the lanes a GPU's link must reach (default: its maximum)"),
      number("gpu_speed", &PcieSettings::gpu_speed, 2.5, 128.0, "the GT/s a GPU's link must reach (default: its maximum)"),
      number("nic_width", &PcieSettings::nic_width, 1, 32, "the lanes a NIC's link must reach (default: its maximum)"),
      number("nic_speed", &PcieSettings::nic_speed, 2.5, 128.0, "the GT/s a NIC's link must reach (default: its maximum)"),
  });
  return kKeys;
}

const Section<GdrSettings>& gdr_keys() {
  static const Section<GdrSettings> kKeys({
      choice("required", &GdrSettings::required, {"auto", "true", "false"},
             "auto/true: GPUDirect RDMA is required where the node has GPUs and RDMA NICs; false: a warning"),
  });
  return kKeys;
}

const Section<FabricSettings>& fabric_keys() {
  static const Section<FabricSettings> kKeys({
      choice("action", &FabricSettings::action, {"fail", "warn"}, "fail: a slow pair stops the step; warn: it starts"),
      number("seconds", &FabricSettings::seconds, 0.05, 10.0, "how long each direction of each pair sends"),
      number("slow_fraction", &FabricSettings::slow_fraction, 0.0, 1.0, "slow: below this share of the median node's best pair"),
      number("min_gbps", &FabricSettings::min_gbps, 0.0, 100000.0, "an absolute floor per direction over TCP (0: none)"),
      number("rdma_min_gbps", &FabricSettings::rdma_min_gbps, 0.0, 100000.0,
             "an absolute floor per direction over RDMA (0: none)"),
      flag("rdma", &FabricSettings::rdma, "RDMA pairs (verbs RC writes) where the nodes have an active HCA port"),
      path("rdma_library", &FabricSettings::rdma_library, "the libibverbs to load (default: libibverbs.so.1)"),
      choice("nccl", &FabricSettings::nccl, {"auto", "true", "false"},
             "NCCL all_reduce pairs through gpudiag-gpu-probe: auto where the node has an NVIDIA driver"),
      number("timeout", &FabricSettings::timeout_s, 5.0, 50.0, "seconds for the whole test"),
  });
  return kKeys;
}

const Section<Config>& top_level() {
  static const Section<Config> kKeys({
      mapping("health", &Config::health, health_keys(), "gpudiag-health"),
      mapping("drain", &Config::drain, drain_keys(), "the drain breaker"),
      mapping("ib", &Config::ib, ib_keys(), "the ib check: HCAs and their ports"),
      mapping("acs", &Config::acs, acs_keys(), "the acs check"),
      mapping("iommu", &Config::iommu, iommu_keys(), "the iommu check"),
      mapping("gpu", &Config::gpu, gpu_keys(), "the gpu check"),
      mapping("p2p", &Config::p2p, p2p_keys(), "the p2p check"),
      mapping("nccl", &Config::nccl, nccl_keys(), "the nccl check"),
      mapping("plugin", &Config::plugin, plugin_keys(), "what the SPANK plugin sets in every step"),
      mapping("xid", &Config::xid, xid_keys(), "the xid check"),
      mapping("ibcounters", &Config::ibcounters, ibcounter_keys(), "the ibcounters check"),
      mapping("pcie", &Config::pcie, pcie_keys(), "the pcie check"),
      mapping("gdr", &Config::gdr, gdr_keys(), "the gdr check"),
      mapping("fabric", &Config::fabric, fabric_keys(), "the fabric test before a step (--diag=fabric)"),
  });
  return kKeys;
}

void list_keys(const std::vector<KeyDoc>& docs, const std::string& prefix, std::vector<ConfigKey>& out) {
  for (const auto& d : docs) {
    out.push_back({prefix + d.name, d.type, d.help, d.children != nullptr});
    if (d.children) list_keys(*d.children, prefix + d.name + (d.list_of_mappings ? "[]." : "."), out);
  }
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

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> kKeys = [] {
    std::vector<ConfigKey> out;
    list_keys(top_level().docs, "", out);
    return out;
  }();
  return kKeys;
}

Result<Config> read_config(const ConfigNode& root, const std::string& source) {
  Config cfg;
  cfg.source = source;
  Reader r(source);
  try {
    if (!root.IsDefined() || root.IsNull()) return cfg;  // an empty file: all defaults
    read_section(r, root, "the top level", "", top_level(), cfg);
  } catch (const ConfigError& e) {
    return Result<Config>::failure(e.what());
  } catch (const std::exception& e) {
    return Result<Config>::failure("gpudiag: " + source + ": " + e.what());
  }
  return cfg;
}

}  // namespace gpudiag
