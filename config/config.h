#pragma once
// The one config file both halves of gpudiag read (/etc/gpudiag/gpudiag.yaml).
// Unknown keys and wrong types are errors with file:line, so a typo never silently
// turns a check off.
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <vector>

#include "util/result.h"

namespace gpudiag {

constexpr const char* kDefaultConfigPath = "/etc/gpudiag/gpudiag.yaml";

// What a finding that a policy governs becomes.
enum class Policy { critical, warning, ignore };
std::string policy_name(Policy p);

// What an RDMA port is for. The GPU fabric carries NCCL's traffic (the devices nearest
// the GPUs); storage and front-end ports carry other traffic at their own speeds; an
// unused port is not cabled on purpose and is never expected up.
enum class PortRole { fabric, storage, frontend, unused };
// "fabric", "storage", "frontend", "unused": the names the config, the reports and the
// metrics use.
const std::vector<std::string>& port_role_names();
std::string role_name(PortRole r);

// ib.roles: one entry says the role of the ports it matches, where the node cannot tell.
// `hca` and `netdev` are fnmatch patterns on the RDMA device and its network interfaces;
// `port` narrows to one port. The first entry that matches wins.
struct RoleRule {
  std::string hca, netdev;
  std::optional<int> port;
  PortRole role = PortRole::fabric;
  int line = 0;  // in the config, for messages
};

// Expectations of the ports of one role.
struct RoleExpect {
  std::optional<double> rate_gbps;        // minimum port rate
  std::optional<std::string> link_layer;  // "InfiniBand", "Ethernet" or "Unknown" (EFA)
};

struct IbExpect {
  // Expected HCAs: exact names ("mlx5_0") or fnmatch patterns ("mlx5_[0-7]"). Empty:
  // every HCA that is not excluded is checked, and none is required.
  std::vector<std::string> hcas;
  std::optional<int> count;          // how many HCAs must match `hcas` (or exist)
  std::optional<double> rate_gbps;   // minimum rate of a GPU-fabric port
  std::optional<std::string> link_layer;  // of the GPU-fabric ports: InfiniBand, Ethernet or Unknown
  std::vector<std::string> exclude;  // patterns never checked (bonds, management HCAs)
  std::vector<RoleRule> roles;       // ib.roles
  RoleExpect storage, frontend;      // ib.storage, ib.frontend
  // The expectations of a role: the fabric's are rate_gbps/link_layer above; an unused
  // port has none.
  RoleExpect expect_for(PortRole r) const;
};

struct AcsSettings {
  Policy policy = Policy::critical;
};

struct IommuSettings {
  std::vector<std::string> allow = {"off", "passthrough"};  // modes that are fine
  Policy policy = Policy::warning;                          // for any other mode
};

// Libraries the GPU probe dlopens; empty means its standard search (soname, then the
// usual driver and toolkit directories).
struct GpuLibraries {
  std::string nvml, cuda, nccl;
};

struct GpuExpect {
  std::optional<int> count;     // NVIDIA GPUs on PCI and seen by the driver; 0: a CPU node
  std::string model;            // fnmatch pattern on NVML's name, e.g. "*H100*"; empty: any
  std::string probe;            // gpudiag-gpu-probe; empty: ../libexec/gpudiag/ from gpudiag-health
  double probe_timeout_s = 40;  // per probe run, capped by what is left of health.timeout
  GpuLibraries libraries;
  // What a GPU whose clocks the hardware pulls down (HW slowdown, HW thermal slowdown,
  // HW power brake) is.
  Policy throttle = Policy::warning;
  // A PCIe replay counter above this is a WARNING. Absolute (since the driver loaded),
  // because this check keeps no state between runs.
  unsigned long long pcie_replay_max = 100;
  bool expects_none() const { return count && *count == 0; }
};

// The p2p check: NVML's P2P status for every GPU pair.
struct P2pSettings {
  // ok: READ and WRITE are OK for every pair; nvlink: NVLINK is OK too; any: report only.
  std::string expect = "ok";
  bool bandwidth = false;           // also time cuMemcpyPeer for every ordered pair
  double min_bandwidth_gbps = 0;    // a pair below this is CRITICAL (0: report only)
  unsigned long long copy_bytes = 256ull << 20;
};

// A minimum all_reduce bandwidth for GPUs whose name matches `model` (fnmatch), and
// for exactly `gpus` of them when given.
struct BandwidthRule {
  std::string model = "*";
  std::optional<int> gpus;
  std::optional<double> busbw_gbps, algbw_gbps;
  int line = 0;  // in the config, for messages
};

// The nccl check: one all_reduce size, gated against the first rule that fits.
struct NcclCheckSettings {
  unsigned long long bytes = 1ull << 30;  // per rank, as nccl-tests' -b/-e
  int iters = 20;
  int warmup = 5;
  std::vector<BandwidthRule> min_bandwidth;
};

struct HealthSettings {
  std::vector<std::string> checks;  // default checks; empty means the built-in default
  double timeout_s = 50;            // below Slurm's 60 s HealthCheckProgram limit
  std::string drain_prefix = "gpudiag:";
  std::string node_name;            // Slurm node name; empty means `hostname -s`
  double scontrol_timeout_s = 10;   // a hung slurmctld must not hang the health check
  // Where run state ("since the last run") is kept; empty: /var/lib/gpudiag, or none
  // under --fs-root (a fixture's state must not land in the host's).
  std::string state_dir;
};

// Fail-fast defaults for torch and NCCL (ARCHITECTURE §6). A value the user set always wins;
// 0 / empty means "leave it to torch, NCCL or DeepSpeed".
struct FailFastSettings {
  bool enabled = true;
  int async_error_handling = 3;         // TORCH_NCCL_ASYNC_ERROR_HANDLING (dumps need 3)
  bool dump_on_timeout = true;          // TORCH_NCCL_DUMP_ON_TIMEOUT
  int flight_recorder_entries = 2000;   // TORCH_FR_BUFFER_SIZE and TORCH_NCCL_TRACE_BUFFER_SIZE
  int heartbeat_timeout_s = 0;          // TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC
  int rdzv_join_timeout_s = 0;          // torchrun: PET_RDZV_CONF=join_timeout=N
  int nccl_ib_timeout = 0;              // NCCL_IB_TIMEOUT (4.096 us x 2^N per try)
  int nccl_ib_retry_cnt = 0;            // NCCL_IB_RETRY_CNT
  int deepspeed_timeout_min = 0;        // DEEPSPEED_TIMEOUT, in minutes
};

// The hang watchdog in the output relay. srun --diag=hang=... overrides per step.
struct HangSettings {
  double duration_s = 0;       // no output from any task of a node for this long: a hang (0: off)
  std::string action = "kill"; // kill: dump and end the step; report: only dump
  bool cpu = false;            // also require the tasks' CPU time to have stopped advancing
  double kill_grace_s = 10;    // SIGTERM, then SIGKILL after this long
};

// The preflight before the user program (srun --diag=preflight or enabled here).
struct PreflightSettings {
  bool enabled = false;
  std::string shm_path = "/dev/shm";
  unsigned long long shm_min_bytes = 1ull << 30;  // NCCL wants about 1 GiB; Docker gives 64 MiB
  bool memlock = true;        // require an unlimited memlock ulimit when the node has IB
  std::string fs_root = "/";  // where sysfs is read from (a fixture tree in tests)
};

// What the SPANK plugin sets in every task of every step.
struct PluginSettings {
  bool torch_env = true;     // MASTER_ADDR/PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
  bool torchrun_env = true;  // PET_NNODES, PET_NODE_RANK, PET_NPROC_PER_NODE, PET_MASTER_*
  int master_port_first = 61000;  // MASTER_PORT range, outside Linux's ephemeral ports
  int master_port_last = 65535;
  int nproc_per_node = 0;    // PET_NPROC_PER_NODE; 0: the GPUs the task sees (else 1)
  // MASTER_ADDR (and PET_MASTER_ADDR) from the step's first node: "auto" (its address as
  // Slurm reaches it, else its NodeName), "name" (NodeName), "address" (NodeAddr, as
  // Slurm resolved it) or "hostname" (NodeHostname). A NodeName need not resolve.
  std::string master_addr = "auto";
  // Site NCCL defaults, in file order. NCCL_IB_HCA: auto means this node's active IB
  // HCAs (bonds and excluded ones left out) as an exact list.
  std::vector<std::pair<std::string, std::string>> nccl_env;
  // The [host:rank] output prefix: "auto" (steps with more than one task), "always"
  // or "never". --diag=prefix / --diag=noprefix override it per step.
  std::string prefix = "auto";
  // {host} (short node name), {rank} and {local_rank}; the relay adds one separator.
  std::string prefix_format = "[{host}:{rank}]";
  // Groups whose members the site trusts with each other's diag dirs: an ancestor of a
  // diag dir that such a group may write need not be sticky (a project dir, 2770).
  // Names; empty: StrictModes' rule alone (spank/plan/diag_dir.h, docs/SECURITY.md).
  std::vector<std::string> diag_dir_trusted_groups;
  FailFastSettings failfast;
  HangSettings hang;
  PreflightSettings preflight;
};

// The xid check: overrides of the Xid catalogue (healthcheck/checks/xid_catalogue.cpp).
struct XidSettings {
  std::vector<int> critical;  // these Xids are CRITICAL whatever the catalogue says
  std::vector<int> ignore;    // these are only noted
};

// The ibcounters check: how much an error counter may grow between two runs.
struct IbCounterSettings {
  // Counter name -> allowed growth per run; the defaults are in config.cpp.
  std::vector<std::pair<std::string, unsigned long long>> max_growth;
  unsigned long long flap_critical = 3;  // link_downed growth above this is CRITICAL
  unsigned long long max_growth_for(const std::string& counter) const;
};
// The counters the ibcounters check judges, with their default allowed growth.
const std::vector<std::pair<std::string, unsigned long long>>& default_ib_counter_growth();
// The pcie check. Without a floor a GPU's or NIC's link must run at its own maximum;
// with one (a site whose slots are x8 by design) it must reach the floor.
struct PcieSettings {
  Policy policy = Policy::critical;  // what a downtrained link is
  std::optional<int> gpu_width, nic_width;      // lanes
  std::optional<double> gpu_speed, nic_speed;   // GT/s
};

// The gdr check. auto: GPUDirect RDMA is required where the node has both NVIDIA GPUs
// and RDMA NICs (true means the same: a node without either has nothing to check);
// false: its absence is only a warning.
struct GdrSettings {
  std::string required = "auto";
};

// The drain breaker (README "The drain breaker", ARCHITECTURE §4): how many nodes
// gpudiag may have drained at once before `--drain` holds a CRITICAL node back.
struct DrainSettings {
  // Nodes drained by gpudiag in the whole cluster, this one included; nullopt: no cap.
  std::optional<int> max_nodes = 16;
  // Per cent of each partition this node is in, rounded up (so never below one node).
  std::optional<int> max_share_pct = 10;
  // A random wait up to this before counting, so that nodes deciding at once reach
  // slurmctld one after another (and its load is spread); 0: none.
  double jitter_s = 2;
};

// --diag=fabric (issue 32): what lies between the step's nodes, tested before the
// program starts (fabric/). A pair below either floor is slow.
struct FabricSettings {
  std::string action = "fail";   // fail: the step does not start; warn: it starts, the verdict printed
  double seconds = 0.5;          // each direction of each pair sends this long
  double slow_fraction = 0.25;   // of the median node's best pair
  double min_gbps = 0;           // an absolute floor per direction over TCP (0: none)
  double rdma_min_gbps = 0;      // the same over RDMA (0: none)
  double timeout_s = 40;         // the whole test, launch of every node included
  bool rdma = true;              // RDMA pairs where the nodes have an active HCA port
  std::string nccl = "auto";     // NCCL all_reduce pairs through the GPU probe: auto (nodes with an NVIDIA driver), true, false
  std::string rdma_library;      // libibverbs to load ("" : libibverbs.so.1 from the loader's path)
};

struct Config {
  std::string source;  // the file it came from, or "" for built-in defaults
  HealthSettings health;
  DrainSettings drain;
  IbExpect ib;
  AcsSettings acs;
  IommuSettings iommu;
  GpuExpect gpu;
  P2pSettings p2p;
  NcclCheckSettings nccl;
  PluginSettings plugin;
  XidSettings xid;
  IbCounterSettings ibcounters = {default_ib_counter_growth()};
  PcieSettings pcie;
  GdrSettings gdr;
  FabricSettings fabric;
};

// One key the config file may hold, as config.cpp declares it where it reads it: the
// unknown-key check, this list and `gpudiag-health --config-keys` come from that one
// declaration.
struct ConfigKey {
  std::string name;  // dotted: "plugin.hang.duration"; "ib.roles[].hca" for a key of each list entry
  std::string type;  // the values it takes, with their range
  std::string help;  // what it is for
  bool mapping = false;  // it holds keys of its own, listed after it
};
// Every key, each section followed by its keys, in the order of the unknown-key messages.
const std::vector<ConfigKey>& config_keys();

class ConfigNode;
// The config from its document (config_tree.h); `source` names it in error messages.
// Errors start with "gpudiag: " and name file:line. From text or a file:
// config/config_file.h (yaml-cpp); the plugin's cache: spank/slurm/plugin_config.h.
Result<Config> read_config(const ConfigNode& root, const std::string& source);

}  // namespace gpudiag
