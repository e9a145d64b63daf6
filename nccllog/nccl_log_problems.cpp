#include "nccllog/nccl_log_problems.h"

#include <fmt/format.h>

#include "nodeinfo/join.h"

#include <algorithm>
#include <map>

#include "nodeinfo/name_patterns.h"

namespace gpudiag {
namespace {

bool bad_iface(const std::string& name) {
  return name == "lo" || matches_any({"docker*", "virbr*", "flannel*", "cni*", "veth*"}, name);
}

struct Collector {
  std::vector<NcclProblem> out;
  std::map<std::string, std::size_t> by_kind;
  void add(Severity s, const std::string& kind, const std::string& message, const std::string& fix,
           const std::string& who) {
    auto it = by_kind.find(kind);
    if (it == by_kind.end()) {
      by_kind[kind] = out.size();
      out.push_back({s, kind, message, fix, {}});
      it = by_kind.find(kind);
    }
    auto& w = out[it->second].who;
    if (!who.empty() && std::find(w.begin(), w.end(), who) == w.end()) w.push_back(who);
  }
};

std::string ib_error_kind(int code) { return "ib-error-" + std::to_string(code); }

void ib_error(Collector& c, int code, const std::string& who) {
  switch (code) {
    case 12:
      c.add(Severity::problem, ib_error_kind(code), "IB completion error 12 (transport retry counter exceeded)",
            "the NICs cannot reach each other: check the fabric between these hosts (`ibstat`, `ibdiagnet`, link "
            "errors in `perfquery`, the subnet manager); on RoCE check NCCL_IB_GID_INDEX, VLAN and PFC",
            who);
      break;
    case 4:
      c.add(Severity::problem, ib_error_kind(code), "IB completion error 4 (local protection error)",
            "usually PCIe ACS or the IOMMU breaking GPUDirect RDMA: run `gpudiag-health --checks acs,iommu` on this "
            "host; disable ACS redirect or boot with iommu=pt (NCCL_NET_GDR_LEVEL=LOC confirms it by avoiding GDR)",
            who);
      break;
    case 5:
      c.add(Severity::warning, ib_error_kind(code), "IB completion error 5 (work request flushed)",
            "a queue pair went into the error state after an earlier failure: look for the first error, often on "
            "the peer",
            who);
      break;
    default:
      c.add(Severity::problem, ib_error_kind(code), fmt::format("IB completion error {}", code),
            "see ibv_wc_status in <infiniband/verbs.h> for the code; check the fabric and both hosts' NICs", who);
  }
}

void init_completion(Collector& c, const NcclLogAnalysis& a) {
  // The job's largest communicator: which of its ranks finished init? Logs below INFO
  // level hold no init lines at all, and then nothing can be said.
  int nranks = 0;
  std::string group;
  for (const auto& p : a.processes)
    if (const CommInfo* w = p.world(); w && w->nranks > nranks) {
      nranks = w->nranks;
      group = w->comm_id;
    }
  if (nranks == 0) return;
  std::set<int> complete, seen;
  std::vector<std::string> stuck;
  for (const auto& p : a.processes) {
    for (const auto& [ptr, ci] : p.comms) {
      if (ci.nranks != nranks || (!group.empty() && !ci.comm_id.empty() && ci.comm_id != group)) continue;
      seen.insert(ci.rank);
      if (ci.complete) complete.insert(ci.rank);
      else stuck.push_back(p.host + ":" + std::to_string(ci.rank));
    }
  }
  std::vector<std::string> absent;
  for (int r = 0; r < nranks && absent.size() < 32; ++r)
    if (!seen.count(r)) absent.push_back(std::to_string(r));
  if (stuck.empty() && absent.empty()) return;
  std::string message = fmt::format("{} of {} ranks never reached Init COMPLETE",
                                    nranks - static_cast<int>(complete.size()), nranks);
  if (!absent.empty()) message += fmt::format(" (no log at all from rank {})", join(absent));
  c.add(Severity::problem, "init-incomplete", message,
        "those ranks hung or died while NCCL set up: read their WARN lines; a rank with no log may not have started, "
        "or logged on a node whose diag dir is not visible here",
        "");
  for (const auto& s : stuck) c.add(Severity::problem, "init-incomplete", message, "", s);
}

}  // namespace

std::vector<NcclProblem> diagnose(const NcclLogAnalysis& a, const std::set<std::string>& hosts_with_active_ib) {
  Collector c;
  std::set<std::string> hosts;
  for (const auto& p : a.processes) hosts.insert(p.host);
  std::map<std::string, std::vector<std::string>> versions, networks;

  for (const auto& p : a.processes) {
    const std::string who = p.label();
    if (!p.version.empty()) versions[p.version].push_back(who);
    std::string net = p.network;
    if (!p.plugin.empty() && p.plugin != "internal") net += " (plugin " + p.plugin + ")";
    if (!net.empty()) networks[net].push_back(who);

    if (p.network == "Socket" && (hosts_with_active_ib.count(p.host) || !p.ib_devices.empty()))
      c.add(Severity::problem, "socket-with-ib", "NCCL used NET/Socket on hosts that have active IB ports",
            "inter-node traffic crawls over TCP: something stopped NCCL from using IB (NCCL_IB_DISABLE=1, an "
            "NCCL_IB_HCA that matches no device, or no libibverbs/rdma-core in the container): check the job's "
            "NCCL_* variables and `ibv_devinfo` inside the job",
            who);
    for (const auto& d : p.socket_devices)
      if (bad_iface(d))
        c.add(Severity::problem, "socket-bad-iface", fmt::format("NET/Socket uses {}", d),
              "lo, docker*, virbr* and flannel* do not reach other nodes: set NCCL_SOCKET_IFNAME to the cluster "
              "network (e.g. =eth0), site-wide with gpudiag's plugin.nccl_env",
              who);
    if (!p.oob.empty() && bad_iface(p.oob) && (p.oob != "lo" || hosts.size() > 1))
      c.add(Severity::problem, "oob-bad-iface", fmt::format("NCCL's bootstrap (OOB) uses {}", p.oob),
            "ranks on other nodes cannot connect back over it and init hangs: set NCCL_SOCKET_IFNAME to the cluster "
            "network",
            who);
    for (const auto& d : p.ib_devices)
      if (d.rfind("mlx5_bond", 0) == 0)
        c.add(Severity::warning, "bond-hca", fmt::format("NCCL uses the bond device {}", d.substr(0, d.find(':'))),
              "a bond is usually the management or storage network: exclude it with NCCL_IB_HCA=^=mlx5_bond_0, or "
              "list the training HCAs (gpudiag's NCCL_IB_HCA: auto leaves bonds out)",
              who);
    for (const auto& [code, n] : p.ib_errors) ib_error(c, code, who);
    if (p.shm_failed)
      c.add(Severity::problem, "shm", "NCCL could not create or extend its /dev/shm segment",
            "/dev/shm is too small (Docker's default is 64 MiB): give the container --shm-size=1g or a larger tmpfs; "
            "NCCL_SHM_DISABLE=1 works around it at a cost",
            who);
    if (p.reg_mr_failed)
      c.add(Severity::problem, "reg-mr", "ibv_reg_mr failed: NCCL could not register memory with the NIC",
            "the memlock limit is too low (want unlimited: `ulimit -l`; in Slurm set LimitMEMLOCK=infinity for "
            "slurmd and PropagateResourceLimitsExcept=MEMLOCK), or GPUDirect RDMA lacks nvidia-peermem",
            who);
    if (p.p2p_disabled)
      c.add(Severity::warning, "p2p-disabled", "P2P between GPUs is disabled or not supported",
            "intra-node traffic goes through host memory: NCCL_P2P_DISABLE is set, or ACS/IOMMU/a VM blocks P2P: run "
            "`gpudiag-health --checks p2p,acs`",
            who);
    if (p.duplicate_gpu)
      c.add(Severity::problem, "duplicate-gpu", "two ranks use the same GPU",
            "each rank must pick its own GPU: torch.cuda.set_device(int(os.environ['LOCAL_RANK'])), or srun "
            "--gpus-per-task=1",
            who);
  }
  if (versions.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [v, w] : versions) parts.push_back(fmt::format("{} on {} rank(s)", v, w.size()));
    c.add(Severity::problem, "version-mismatch", "NCCL versions differ across ranks: " + join(parts),
          "ranks with different NCCL versions may not interoperate: run every node from one image or environment", "");
    for (const auto& [v, w] : versions)
      if (w.size() * 2 <= a.processes.size())
        for (const auto& x : w) c.add(Severity::problem, "version-mismatch", "", "", x);
  }
  if (networks.size() > 1) {
    std::vector<std::string> parts;
    for (const auto& [n, w] : networks) parts.push_back(fmt::format("{} on {} rank(s)", n, w.size()));
    c.add(Severity::problem, "network-mismatch", "ranks use different networks: " + join(parts),
          "a net plugin (or IB) loaded on some nodes only: the ranks cannot talk to each other over one transport; "
          "make the plugin (NCCL_NET_PLUGIN, libnccl-net.so) and NCCL_IB_* the same everywhere",
          "");
    for (const auto& [n, w] : networks)
      if (w.size() * 2 <= a.processes.size())
        for (const auto& x : w) c.add(Severity::problem, "network-mismatch", "", "", x);
  }
  init_completion(c, a);
  for (const auto& m : a.mismatches) {
    std::vector<std::string> calls;
    for (const auto& [who, coll] : m.calls) calls.push_back(coll + " on " + who);
    c.add(Severity::problem, "collective-mismatch",
          fmt::format("ranks issued different collectives at opCount {}: {}", m.op_count, join(calls)),
          "the ranks' code paths diverged, which hangs or corrupts the job: TORCH_DISTRIBUTED_DEBUG=DETAIL reports "
          "where",
          "");
    break;  // the first divergence is the one that matters
  }
  return c.out;
}

int nccl_log_exit_code(const NcclLogAnalysis& a, const std::vector<NcclProblem>& problems) {
  int code = a.warnings.empty() ? 0 : 1;
  for (const auto& p : problems) code = std::max(code, static_cast<int>(p.severity));
  return code;
}

}  // namespace gpudiag
