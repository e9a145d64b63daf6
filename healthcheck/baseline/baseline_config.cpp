#include "healthcheck/baseline/baseline_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "healthcheck/checks/port_roles.h"
#include "util/control_bytes.h"
#include "util/name_patterns.h"

namespace gpudiag {
namespace {

// A bonded RoCE device (mlx5_bond_0) carries the host network, not the GPU fabric.
std::optional<std::string> bond_pattern(const std::string& hca) {
  auto at = hca.find("_bond_");
  if (at == std::string::npos) return std::nullopt;
  return hca.substr(0, at) + "_bond_*";
}

// The doubts about devices of one kind whose value is below their siblings' best.
template <class T, class Get, class Say>
void below_siblings(const std::vector<PcieLinkFact>& links, Get get, Say say, std::vector<std::string>& doubts) {
  std::optional<T> best;
  for (const auto& l : links)
    if (auto v = get(l); v && (!best || *v > *best)) best = *v;
  if (!best) return;
  for (const auto& l : links)
    if (auto v = get(l); v && *v < *best) doubts.push_back(say(l, *v, *best));
}

template <class T, class Get>
std::optional<T> lowest(const std::vector<PcieLinkFact>& links, Get get) {
  std::optional<T> low;
  for (const auto& l : links)
    if (auto v = get(l); v && (!low || *v < *low)) low = *v;
  return low;
}

// YAML double-quoted scalar: always quoted, so "gpudiag:", "[{host}:{rank}]" and
// patterns such as "mlx5_[0-7]" stay strings.
std::string q(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (is_control_byte(c)) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& s : items) out += (out.size() > 1 ? ", " : "") + q(s);
  return out + "]";
}

// Text from sysfs, the kernel or the driver that goes into a comment: a newline in a
// hostile tree's hostname must not start a line of YAML.
std::string one_line(const std::string& s) { return replace_control(s, '?'); }

const char* yes(bool b) { return b ? "true" : "false"; }
std::string num(double v) { return fmt::format("{}", v); }
// 1G, 256M, 1000: the way etc/gpudiag.yaml writes sizes, and exact.
std::string size(unsigned long long v) {
  static const std::pair<const char*, unsigned long long> kUnits[] = {
      {"T", 1ull << 40}, {"G", 1ull << 30}, {"M", 1ull << 20}, {"K", 1ull << 10}};
  for (const auto& [unit, bytes] : kUnits)
    if (v >= bytes && v % bytes == 0) return fmt::format("{}{}", v / bytes, unit);
  return fmt::format("{}", v);
}
std::string secs(double v) { return fmt::format("{}s", static_cast<long long>(v + 0.5)); }

void write_health(std::string& o, const HealthSettings& h) {
  o += "health:\n";
  if (h.checks.empty()) o += "  # checks: the default (every check that needs no GPU initialisation)\n";
  else o += "  checks: " + list(h.checks) + "\n";
  o += "  timeout: " + num(h.timeout_s) + "\n";
  o += "  drain_prefix: " + q(h.drain_prefix) + "\n";
  o += "  scontrol_timeout: " + num(h.scontrol_timeout_s) + "\n";
  // The Slurm name of one node: copied to the others it would name them all the same.
  if (!h.node_name.empty()) o += "  # node_name: " + q(h.node_name) + "  (per node: set it on each node, not here)\n";
}

void write_ib(std::string& o, const Baseline& b, const BaselineFacts& f) {
  o += "\nib:\n";
  if (!f.ib.class_present) {
    o += "  # No /sys/class/infiniband on this node: none is expected.\n  count: 0\n";
  } else {
    o += "  # Every HCA this node has, by name; each must be present.\n";
    o += "  hcas: " + list(b.ib.hcas) + "\n";
    if (b.ib.count) o += fmt::format("  count: {}\n", *b.ib.count);
    if (b.ib.rate_gbps) o += "  rate_gbps: " + num(*b.ib.rate_gbps) + "  # the lowest active port's rate\n";
    else o += "  # rate_gbps: no port is up here to read a rate from\n";
    if (b.ib.link_layer)
      o += "  link_layer: " + *b.ib.link_layer +
           (*b.ib.link_layer == "Unknown" ? "  # what EFA's driver always reports\n" : "\n");
    if (!b.roles.empty()) {
      o += "  # The ports this node does not take for the GPU fabric (the RDMA devices nearest the\n"
           "  # GPUs, which rate_gbps and link_layer above are for). Every other port is the fabric.\n";
      o += "  roles:\n";
      for (const auto& r : b.roles) {
        o += "    - {hca: " + q(r.hca);
        if (r.port) o += fmt::format(", port: {}", *r.port);
        o += ", role: " + role_name(r.role) + "}  # " + one_line(r.note) + "\n";
      }
    }
    for (PortRole role : {PortRole::storage, PortRole::frontend}) {
      const RoleExpect& e = role == PortRole::storage ? b.ib.storage : b.ib.frontend;
      if (!e.rate_gbps && !e.link_layer) continue;
      o += "  " + role_name(role) + ":\n";
      if (e.rate_gbps) o += "    rate_gbps: " + num(*e.rate_gbps) + "  # the lowest active " + role_name(role) + " port's rate\n";
      if (e.link_layer) o += "    link_layer: " + *e.link_layer + "\n";
    }
  }
  if (!b.auto_excluded.empty())
    o += "  # " + list(b.auto_excluded) + ": bonded host-network devices, not the GPU fabric.\n";
  o += "  exclude: " + list(b.ib.exclude) + "\n";
}

void write_pcie(std::string& o, const PcieFloors& p) {
  // The pcie check reads these; the lowest link of each kind.
  o += "\npcie:\n  policy: critical\n";
  auto width = [&](const char* key, const std::optional<int>& v, const char* what) {
    if (v) o += fmt::format("  {}: {}  # the lowest current link width of the node's {}\n", key, *v, what);
    else o += fmt::format("  # {}: no {} link width read here\n", key, what);
  };
  auto speed = [&](const char* key, const std::optional<double>& v, const char* what) {
    if (v)
      o += fmt::format("  {}: {}  # GT/s, the lowest {} link speed of the node's {}\n", key, num(*v),
                       std::string(what) == "GPUs" ? "trainable (max)" : "current", what);
    else o += fmt::format("  # {}: no {} link speed read here\n", key, what);
  };
  width("gpu_width", p.gpu_width, "GPUs");
  speed("gpu_speed", p.gpu_speed, "GPUs");
  width("nic_width", p.nic_width, "HCAs");
  speed("nic_speed", p.nic_speed, "HCAs");
}

void write_gpu(std::string& o, const Baseline& b, const GpuExpect& g) {
  o += "\ngpu:\n";
  if (b.gpu_count) o += fmt::format("  count: {}  # NVIDIA GPUs on PCI\n", *b.gpu_count);
  else o += "  # count: PCI devices could not be listed here\n";
  if (!b.gpu_model.empty())
    o += "  model: " + q(b.gpu_model) + (b.gpu_note.empty() ? "" : "  # " + one_line(b.gpu_note)) + "\n";
  else if (!b.gpu_note.empty()) o += "  # model: " + one_line(b.gpu_note) + "\n";
  if (!g.probe.empty()) o += "  probe: " + q(g.probe) + "\n";
  o += "  probe_timeout: " + secs(g.probe_timeout_s) + "\n";
  o += "  throttle: " + policy_name(g.throttle) + "\n";
  o += fmt::format("  pcie_replay_max: {}\n", g.pcie_replay_max);
  if (!g.libraries.nvml.empty() || !g.libraries.cuda.empty() || !g.libraries.nccl.empty()) {
    o += "  libraries:\n";
    if (!g.libraries.nvml.empty()) o += "    nvml: " + q(g.libraries.nvml) + "\n";
    if (!g.libraries.cuda.empty()) o += "    cuda: " + q(g.libraries.cuda) + "\n";
    if (!g.libraries.nccl.empty()) o += "    nccl: " + q(g.libraries.nccl) + "\n";
  }
}

void write_p2p_nccl(std::string& o, const P2pSettings& p, const NcclCheckSettings& n) {
  o += "\np2p:\n  expect: " + p.expect + "\n  bandwidth: " + yes(p.bandwidth) + "\n  min_bandwidth: " +
       num(p.min_bandwidth_gbps) + "\n  copy_bytes: " + size(p.copy_bytes) + "\n";
  o += fmt::format("\nnccl:\n  bytes: {}\n  iters: {}\n  warmup: {}\n", size(n.bytes), n.iters, n.warmup);
  if (!n.min_bandwidth.empty()) {
    o += "  min_bandwidth:\n";
    for (const auto& r : n.min_bandwidth) {
      o += "    - {model: " + q(r.model);
      if (r.gpus) o += fmt::format(", gpus: {}", *r.gpus);
      if (r.busbw_gbps) o += ", busbw: " + num(*r.busbw_gbps);
      if (r.algbw_gbps) o += ", algbw: " + num(*r.algbw_gbps);
      o += "}\n";
    }
  }
}

// The fabric test's floors (issue 32). Only RDMA's can come from one node: a healthy RC
// queue pair's writes run near its port's rate (ib_write_bw reaches about nine tenths of
// it), so half of the GPU-fabric port's rate is a floor no healthy pair falls under. One
// TCP stream's rate depends on the CPUs, the kernel and the NIC's offloads more than on
// the link, and between nodes is measured only by the test itself: no TCP floor here.
void write_fabric(std::string& o, const FabricSettings& f, std::optional<double> port_rate_gbps) {
  o += "\nfabric:\n  action: " + f.action + "\n  seconds: " + num(f.seconds) + "\n  slow_fraction: " +
       num(f.slow_fraction) + "\n";
  o += "  # The TCP floor is not derived from one node: one stream's rate depends on the CPUs and\n"
       "  # the kernel more than on the link. Set it from a healthy run's fabric.json if wanted.\n";
  o += "  min_gbps: " + num(f.min_gbps) + "\n";
  double rdma = f.rdma_min_gbps;
  // Derived from the node like its other hardware keys (so that a baseline read back
  // writes itself again); the loaded floor stays only where the rate is unknown.
  if (port_rate_gbps && *port_rate_gbps > 0) {
    rdma = *port_rate_gbps / 2;
    o += "  # Half of this node's GPU-fabric port rate (" + num(*port_rate_gbps) +
         " Gb/s): a healthy RC queue pair writes at\n  # about nine tenths of it.\n";
  }
  o += "  rdma_min_gbps: " + num(rdma) + "\n  timeout: " + num(f.timeout_s) + "\n  rdma: " + yes(f.rdma) +
       "\n  nccl: " + q(f.nccl) + "\n";
  if (!f.rdma_library.empty()) o += "  rdma_library: " + q(f.rdma_library) + "\n";
}

void write_plugin(std::string& o, const PluginSettings& p) {
  o += "\nplugin:\n";
  o += std::string("  torch_env: ") + yes(p.torch_env) + "\n  torchrun_env: " + yes(p.torchrun_env) + "\n";
  o += fmt::format("  master_port_range: [{}, {}]\n  nproc_per_node: {}\n", p.master_port_first, p.master_port_last,
                   p.nproc_per_node);
  if (!p.nccl_env.empty()) {
    o += "  nccl_env:\n";
    for (const auto& [k, v] : p.nccl_env) o += "    " + k + ": " + q(v) + "\n";
  }
  o += "  prefix: " + p.prefix + "\n  prefix_format: " + q(p.prefix_format) + "\n";
  if (!p.diag_dir_trusted_groups.empty()) {
    o += "  diag_dir_trusted_groups:\n";
    for (const auto& g : p.diag_dir_trusted_groups) o += "    - " + q(g) + "\n";
  }
  const auto& f = p.failfast;
  o += fmt::format("  failfast:\n    enabled: {}\n    async_error_handling: {}\n    dump_on_timeout: {}\n"
                   "    flight_recorder_entries: {}\n    heartbeat_timeout: {}\n    rdzv_join_timeout: {}\n",
                   yes(f.enabled), f.async_error_handling, yes(f.dump_on_timeout), f.flight_recorder_entries,
                   secs(f.heartbeat_timeout_s), secs(f.rdzv_join_timeout_s));
  // 0 means "leave it to NCCL / DeepSpeed", which these keys can only say by absence.
  if (f.nccl_ib_timeout) o += fmt::format("    nccl_ib_timeout: {}\n", f.nccl_ib_timeout);
  if (f.nccl_ib_retry_cnt) o += fmt::format("    nccl_ib_retry_cnt: {}\n", f.nccl_ib_retry_cnt);
  if (f.deepspeed_timeout_min) o += fmt::format("    deepspeed_timeout: {}\n", f.deepspeed_timeout_min);
  const auto& h = p.hang;
  o += fmt::format("  hang:\n    duration: {}\n    action: {}\n    cpu: {}\n    kill_grace: {}\n", secs(h.duration_s),
                   h.action, yes(h.cpu), secs(h.kill_grace_s));
  const auto& pf = p.preflight;
  o += fmt::format("  preflight:\n    enabled: {}\n    shm_path: {}\n    shm_min: {}\n    memlock: {}\n"
                   "    fs_root: {}\n",
                   yes(pf.enabled), q(pf.shm_path), size(pf.shm_min_bytes), yes(pf.memlock), q(pf.fs_root));
}

}  // namespace

std::string model_pattern(const std::string& nvml_name) {
  std::string word;
  std::size_t i = 0;
  while (i < nvml_name.size()) {
    while (i < nvml_name.size() && nvml_name[i] == ' ') ++i;
    std::size_t end = nvml_name.find(' ', i);
    std::string w = nvml_name.substr(i, end == std::string::npos ? std::string::npos : end - i);
    i = end == std::string::npos ? nvml_name.size() : end;
    if (std::any_of(w.begin(), w.end(), [](unsigned char c) { return std::isdigit(c); })) {
      word = w.substr(0, w.find('-'));
      break;
    }
  }
  if (word.empty()) word = nvml_name;
  // A glob character in the name itself would make the pattern mean something else.
  word.erase(std::remove_if(word.begin(), word.end(), [](char c) { return c == '*' || c == '?' || c == '['; }),
             word.end());
  return "*" + word + "*";
}

Baseline derive_baseline(const BaselineFacts& f, const Config& loaded) {
  Baseline b;
  b.ib.exclude = loaded.ib.exclude;
  for (const auto& hca : f.ib.hcas)
    if (auto pat = bond_pattern(hca.name); pat && !matches_any(b.ib.exclude, hca.name)) {
      b.ib.exclude.push_back(*pat);
      b.auto_excluded.push_back(*pat);
    }

  std::vector<const IbHca*> fabric;
  for (const auto& hca : f.ib.hcas) {
    if (matches_any(b.ib.exclude, hca.name)) continue;
    if (!loaded.ib.hcas.empty() && !matches_any(loaded.ib.hcas, hca.name)) continue;
    fabric.push_back(&hca);
    b.ib.hcas.push_back(hca.name);
  }
  if (f.ib.class_present) b.ib.count = static_cast<int>(fabric.size());

  // Per role: the lowest up port's rate is the floor, the link layer most ports have is
  // expected; a port below its role's best, or of another layer, is a doubt.
  struct RoleFacts {
    std::map<std::string, std::vector<std::string>> by_layer;
    std::optional<double> lowest;
    double best = 0;
  };
  std::map<PortRole, RoleFacts> per_role;
  std::vector<std::string> fabric_nics;  // the HCAs the PCIe NIC floors come from
  for (const auto* hca : fabric) {
    if (!hca->error.empty()) b.doubts.push_back(fmt::format("{}: cannot list its ports: {}", hca->name, hca->error));
    std::optional<PortRole> device_role;
    bool one_role = true;
    for (const auto& p : hca->ports) {
      const RoleOf role = role_of(f.roles, p.subject());
      if (device_role && *device_role != role.role) one_role = false;
      device_role = role.role;
      if (role.role == PortRole::fabric &&
          std::find(fabric_nics.begin(), fabric_nics.end(), hca->name) == fabric_nics.end())
        fabric_nics.push_back(hca->name);
      if (role.role == PortRole::unused) continue;
      if (!p.is_up()) {
        b.doubts.push_back(fmt::format("{} is not up ({})", p.subject(),
                                       p.state ? p.state->name : std::string("state unreadable")));
        continue;
      }
      RoleFacts& rf = per_role[role.role];
      if (p.link_layer) rf.by_layer[*p.link_layer].push_back(p.subject());
      if (!p.rate_gbps) continue;
      rf.best = std::max(rf.best, *p.rate_gbps);
      if (!rf.lowest || *p.rate_gbps < *rf.lowest) rf.lowest = *p.rate_gbps;
    }
    // What the node does not take for the fabric is written down, with why.
    for (const auto& p : hca->ports) {
      const RoleOf role = role_of(f.roles, p.subject());
      if (role.role == PortRole::fabric && !role.from_config) continue;
      std::string note = role.from_config ? "from the loaded config" : role.why;
      if (role.role == PortRole::unused)
        note = fmt::format("{} ({}) here: {}; left out, not expected up", p.state ? p.state->name : "state unreadable",
                           p.phys_state ? p.phys_state->name : "phys_state unreadable",
                           role.from_config ? "from the loaded config" : "no link partner, not cabled");
      if (one_role && hca->ports.size() == 1) b.roles.push_back({hca->name, std::nullopt, role.role, note});
      else b.roles.push_back({hca->name, p.number, role.role, note});
    }
  }
  for (auto& [role, rf] : per_role) {
    RoleExpect e;
    e.rate_gbps = rf.lowest;
    for (const auto* hca : fabric)
      for (const auto& p : hca->ports)
        if (role_of(f.roles, p.subject()).role == role && p.is_up() && p.rate_gbps && *p.rate_gbps < rf.best)
          b.doubts.push_back(fmt::format("{} runs at {} where its siblings reach {} Gb/sec", p.subject(), p.rate_text,
                                         num(rf.best)));
    // The link layer most ports have; a minority is what looks wrong.
    std::size_t most = 0;
    for (const auto& [layer, ports] : rf.by_layer)
      if (ports.size() > most) most = ports.size(), e.link_layer = layer;
    for (const auto& [layer, ports] : rf.by_layer)
      if (layer != e.link_layer)
        for (const auto& port : ports)
          b.doubts.push_back(fmt::format("{} is {} where its siblings are {}", port, layer, *e.link_layer));
    if (role == PortRole::fabric) b.ib.rate_gbps = e.rate_gbps, b.ib.link_layer = e.link_layer;
    if (role == PortRole::storage) b.ib.storage = e;
    if (role == PortRole::frontend) b.ib.frontend = e;
  }

  // Less than the loaded config expects is a node below what the site has seen before.
  if (loaded.ib.count && b.ib.count && *b.ib.count < *loaded.ib.count)
    b.doubts.push_back(fmt::format("{} HCA(s) where the loaded config expects {} (ib.count)", *b.ib.count,
                                   *loaded.ib.count));
  if (loaded.ib.rate_gbps && b.ib.rate_gbps && *b.ib.rate_gbps < *loaded.ib.rate_gbps)
    b.doubts.push_back(fmt::format("a port runs at {} Gb/sec where the loaded config expects {} (ib.rate_gbps)",
                                   num(*b.ib.rate_gbps), num(*loaded.ib.rate_gbps)));
  if (f.pci_error.empty() && loaded.gpu.count && f.pci_gpus < *loaded.gpu.count)
    b.doubts.push_back(fmt::format("{} GPU(s) on PCI where the loaded config expects {} (gpu.count)", f.pci_gpus,
                                   *loaded.gpu.count));
  if (f.pci_error.empty()) b.gpu_count = f.pci_gpus;
  else b.doubts.push_back("PCI devices could not be listed: " + f.pci_error);
  b.gpu_note = f.gpu_note;
  if (f.gpu_names) {
    if (static_cast<int>(f.gpu_names->size()) != f.pci_gpus)
      b.doubts.push_back(fmt::format("the driver sees {} GPU(s) but {} are on PCI", f.gpu_names->size(), f.pci_gpus));
    std::map<std::string, int> models;
    for (const auto& n : *f.gpu_names)
      if (!n.empty()) ++models[n];
    if (models.size() > 1) {
      std::string seen;
      for (const auto& [n, c] : models) seen += fmt::format("{}{} x {}", seen.empty() ? "" : ", ", c, n);
      b.doubts.push_back("the GPUs are not all the same model: " + seen);
    }
    int most_gpus = 0;
    for (const auto& [n, c] : models)
      if (c > most_gpus) most_gpus = c, b.gpu_model = model_pattern(n);
    if (models.empty()) b.gpu_note = "not read: the driver named no GPU";
  }

  // Not read here: the site's own pattern stands rather than vanishing from the copy.
  if (b.gpu_model.empty() && !loaded.gpu.model.empty()) {
    b.gpu_model = loaded.gpu.model;
    b.gpu_note = b.gpu_note.empty() ? "from the loaded config"
                                    : "from the loaded config; the driver's name was " + b.gpu_note;
  }
  b.iommu_mode = f.iommu_mode;
  for (const auto& e : f.iommu_errors) b.doubts.push_back("IOMMU state: " + e);

  // The NIC floors are the GPU fabric's: a front-end card of another model (a Gen4
  // ConnectX-6 Dx beside Gen5 ConnectX-7s) would otherwise lower them for all, and the
  // pcie check holds no card to more than it can do.
  std::vector<PcieLinkFact> nics;
  for (const auto& l : f.hca_links)
    if (std::find(fabric_nics.begin(), fabric_nics.end(), l.name) != fabric_nics.end()) nics.push_back(l);
  auto width = [](const PcieLinkFact& l) { return l.width; };
  auto speed = [](const PcieLinkFact& l) { return l.speed_gts; };
  b.pcie.gpu_width = lowest<int>(f.gpu_links, width);
  b.pcie.gpu_speed = lowest<double>(f.gpu_links, speed);
  b.pcie.nic_width = lowest<int>(nics, width);
  b.pcie.nic_speed = lowest<double>(nics, speed);
  for (const std::vector<PcieLinkFact>* links : {&f.gpu_links, static_cast<const std::vector<PcieLinkFact>*>(&nics)}) {
    below_siblings<int>(
        *links, width,
        [](const PcieLinkFact& l, int v, int best) {
          return fmt::format("{} ({}) has a x{} PCIe link where its siblings have x{}", l.name, l.bdf, v, best);
        },
        b.doubts);
    below_siblings<double>(
        *links, speed,
        [](const PcieLinkFact& l, double v, double best) {
          return fmt::format("{} ({}) has a {} GT/s PCIe link where its siblings have {} GT/s", l.name, l.bdf, num(v),
                             num(best));
        },
        b.doubts);
  }
  return b;
}

std::string baseline_yaml(const Baseline& b, const BaselineFacts& f, const Config& loaded, const std::string& date) {
  std::string o;
  o += fmt::format("# gpudiag.yaml read from {} on {} by gpudiag-health --baseline.\n", one_line(f.host), date);
  o += "# What this node has is what every node of its kind is expected to have: copy this file\n"
       "# to them as /etc/gpudiag/gpudiag.yaml. Keys not about the hardware come from ";
  o += loaded.source.empty() ? std::string("the defaults.\n")
                             : "the config loaded then (" + one_line(loaded.source) + ").\n";
  if (!b.doubts.empty()) {
    o += "#\n# WARNING: this node did not look healthy; its numbers may be a sick node's:\n";
    for (const auto& d : b.doubts) o += "#   " + one_line(d) + "\n";
  }
  o += "\n";
  write_health(o, loaded.health);
  write_ib(o, b, f);
  o += "\nacs:\n  policy: " + policy_name(loaded.acs.policy) + "\n";
  o += "\niommu:\n  # The mode seen here.\n  allow: " + list({b.iommu_mode}) + "\n  policy: " +
       policy_name(loaded.iommu.policy) + "\n";
  write_pcie(o, b.pcie);
  write_gpu(o, b, loaded.gpu);
  write_p2p_nccl(o, loaded.p2p, loaded.nccl);
  write_plugin(o, loaded.plugin);
  write_fabric(o, loaded.fabric, b.ib.rate_gbps);
  return o;
}

}  // namespace gpudiag
