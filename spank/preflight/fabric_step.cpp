#include "spank/preflight/fabric_step.h"

#include <climits>
#include <cstdlib>

#include "fabric/fabric_coordinator.h"
#include "fabric/fabric_task.h"
#include "fabric/node_differs.h"
#include "fabric/node_facts.h"
#include "spank/plan/diag_dir.h"
#include "spank/preflight/preflight_barrier.h"
#include "util/control_bytes.h"
#include "util/tcp.h"
#include "util/text_lists.h"

namespace gpudiag {
namespace {

// What the layout rules read besides the compared prefixes.
bool reported_env(const std::string& name) {
  return fabric::compared_env(name) || name == "CUDA_VISIBLE_DEVICES" || name == "WORLD_SIZE" ||
         name == "PET_NNODES" || name == "PET_NPROC_PER_NODE" || name == "SLURM_GPUS_ON_NODE";
}

// The address gloo and NCCL's bootstrap will use: GLOO_SOCKET_IFNAME's, else the one
// the route to MASTER_ADDR leaves from.
std::string listen_address(EnvTarget& env, const std::vector<RendezvousFacts>& rendezvous) {
  if (auto ifname = env.get("GLOO_SOCKET_IFNAME")) {
    auto names = split_list(*ifname);
    if (!names.empty()) {
      std::string a = interface_addr(names.front());
      if (!a.empty()) return a;
    }
  }
  for (const auto& r : rendezvous)
    for (const auto& addr : r.addresses) {
      std::string a = local_addr_towards(addr);
      if (!a.empty()) return a;
    }
  return "";
}

int rendezvous_port(EnvTarget& env) {
  for (const char* name : {"MASTER_PORT", "PET_MASTER_PORT"}) {
    auto v = env.get(name);
    if (!v || v->empty() || v->size() > 5 || v->find_first_not_of("0123456789") != std::string::npos) continue;
    int p = std::atoi(v->c_str());
    if (p > 0 && p <= 65535) return p;
  }
  return 0;
}

}  // namespace

std::string start_fabric(const Config& cfg, std::uint32_t total_tasks, const std::string& diag_dir, uid_t uid,
                         std::uint32_t job, std::uint32_t step) {
  fabric::CoordinatorSettings s;
  s.cfg = cfg.fabric;
  s.total_tasks = total_tasks;
  s.report_dir = diag_dir;
  s.uid = uid;
  s.job_step = std::to_string(job) + "." + std::to_string(step);
  // The tasks' own rule (claim_diag_dir): a dir they refused, srun does not write into.
  s.dir_check = [uid](const std::string& dir) -> std::string {
    if (auto why = distrust_diag_dir(read_dir_facts(dir), uid)) return *why;
    char real[PATH_MAX];
    if (!::realpath(dir.c_str(), real)) return dir + ": cannot resolve it";
    if (auto why = distrust_ancestors(read_ancestor_facts(real), uid)) return *why;
    return "";
  };
  auto started = fabric::start_fabric_coordinator(s);
  if (!started.endpoint) return started.error;
  ::setenv(fabric::kFabricEnv, fabric::format_endpoint(*started.endpoint).c_str(), 1);
  return "";
}

FabricPart fabric_part(EnvTarget& env, const Config& cfg, const FabricTaskFacts& t) {
  FabricPart part;
  // A step with no srun (--async) has no fabric test: a value there is an outer step's.
  if (step_has_no_srun(env.get("SLURM_STEP_LAUNCHER_PORT"))) return part;
  auto value = env.get(fabric::kFabricEnv);
  if (!value) return part;
  auto endpoint = fabric::parse_endpoint(*value);
  auto srun_addr = env.get("SLURM_LAUNCH_NODE_IPADDR");
  if (!endpoint || !srun_addr) {
    part.pass = false;
    if (t.local_rank == 0)
      part.say = "gpudiag: fabric on " + t.host + ": no usable " + fabric::kFabricEnv +
                 " or SLURM_LAUNCH_NODE_IPADDR: not starting the program";
    return part;
  }
  fabric::TaskSide side;
  side.srun_addr = *srun_addr;
  side.endpoint = *endpoint;
  side.leader = t.local_rank == 0;
  side.deadline_s = cfg.fabric.timeout_s + 5;
  fabric::TaskHello& h = side.hello;
  h.rank = t.rank;
  h.node_id = t.node_id;
  h.nnodes = t.nnodes;
  h.local_rank = t.local_rank;
  h.local_tasks = t.local_tasks;
  h.node = t.host;
  std::vector<const char*> argv;
  for (const auto& a : t.argv) argv.push_back(a.c_str());
  h.launcher = fabric::launcher_of(static_cast<int>(argv.size()), argv.data());
  const InjectedRecord injected = parse_injected(env.get(kInjectedVar).value_or(""));
  for (const auto& kv : t.job_env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    const std::string name = kv.substr(0, eq), v = kv.substr(eq + 1);
    if (!reported_env(name) || h.env.size() >= 200) continue;
    // A value that is not one printable line is shown escaped: it is compared all the same.
    h.env[name] = is_one_printable_line(v) ? v : escape_control(v);
    auto it = injected.find(name);
    if (it != injected.end() && it->second == injected_value_tag(v)) h.injected.insert(name);
  }
  if (side.leader) {
    side.listen_addr = listen_address(env, t.rendezvous);
    if (t.node_id == 0) side.listen_port = rendezvous_port(env);
    h.facts = fabric::gather_node_facts(cfg.plugin.preflight.fs_root);
    side.rdma = cfg.fabric.rdma;
    side.rdma_library = cfg.fabric.rdma_library;
    side.nccl_ib_hca = env.get("NCCL_IB_HCA").value_or("");
    side.nccl_ib_gid_index = env.get("NCCL_IB_GID_INDEX").value_or("");
    std::string no_probe;
    side.nccl_probe = {fabric::nccl_probe_path(cfg.gpu.probe, no_probe), cfg.gpu.libraries.cuda,
                       cfg.gpu.libraries.nccl};
    side.nccl_none = no_probe;
    if (cfg.fabric.nccl == "false") side.nccl_none = "fabric.nccl: false";
    else if (cfg.fabric.nccl == "auto" && h.facts->driver.empty()) side.nccl_none = "no NVIDIA driver";
  }
  const auto out = fabric::run_fabric_task(side);
  part.pass = out.kind == fabric::TaskOutcome::kOk;
  if (out.kind == fabric::TaskOutcome::kNoVerdict && t.local_rank == 0)
    part.say = "gpudiag: fabric on " + t.host + ": " + escape_control(out.detail) +
               ": not starting the program (see srun's verdict, or run without --diag=fabric)";
  return part;
}

}  // namespace gpudiag
