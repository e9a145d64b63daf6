#include "spank/plan/port_salt.h"
#include "spank/plan/step_plan.h"

#include <algorithm>

#include "util/task_path.h"
#include "util/this_host.h"
#include "spank/plan/failfast_env.h"
#include "spank/plan/prefix_format.h"
#include "util/visible_gpus.h"

namespace gpudiag {
namespace {

constexpr std::uint32_t kBatchStep = 0xfffffffb;
constexpr std::uint32_t kExternStep = 0xfffffffc;
constexpr std::uint32_t kInteractiveStep = 0xfffffffa;

HangWatch hang_watch(const StepInputs& in, const std::string& diag_dir, const std::string& host) {
  const PluginSettings& p = in.cfg.plugin;
  HangWatch w;
  w.duration_s = hang_seconds(in.diag, p);
  w.kill = in.diag.hang_action.value_or(p.hang.action) == "kill";
  w.cpu = p.hang.cpu;
  w.kill_grace_s = p.hang.kill_grace_s;
  w.step = std::to_string(in.ids.job_id) + "." + std::to_string(in.ids.step_id);
  w.state_dir = hang_state_dir(in.uid, w.step);
  w.diag_dir = diag_dir;
  w.host = host;
  w.rank = in.ids.rank;
  w.nodes = in.ids.num_nodes;
  return w;
}

void append(EnvList& to, const EnvList& from) { to.insert(to.end(), from.begin(), from.end()); }

void append_lines(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

}  // namespace

// --diag items win over the site's settings; each rule is decided once, here.
bool prefix_wanted(const DiagOptions& d, const PluginSettings& p, int world_size) {
  if (d.prefix) return *d.prefix;
  if (p.prefix == "always") return true;
  if (p.prefix == "never") return false;
  return world_size > 1;
}

Result<DiagOptions> merge_diag_options(std::string_view from_env, const std::optional<std::string>& option) {
  DiagOptions base;
  if (!from_env.empty()) {
    auto parsed = parse_diag_list(from_env);
    if (!parsed) return Result<DiagOptions>::failure(parsed.error() + " (from GPUDIAG_DIAG)");
    base = *parsed;
  }
  if (option) return parse_diag_list(*option, base);
  return base;
}

GPUDIAG_TASK_PATH bool step_runs_tasks(std::uint32_t step_id) {
  return step_id != kBatchStep && step_id != kExternStep && step_id != kInteractiveStep;
}

TaskEnv read_task_env(EnvTarget& env) {
  TaskEnv t;
  t.cuda_visible_devices = env.get("CUDA_VISIBLE_DEVICES");
  t.step_nodelist = env.get("SLURM_STEP_NODELIST");
  t.job_nodelist = env.get("SLURM_JOB_NODELIST");
  t.submit_dir = env.get("SLURM_SUBMIT_DIR");
  t.labelio = env.get("SLURM_LABELIO");
  t.nodename = env.get("SLURMD_NODENAME");
  t.port_salt = env.get(kPortSaltEnv);
  return t;
}

std::string master_nodelist(const TaskEnv& env) {
  if (env.step_nodelist) return *env.step_nodelist;
  return env.job_nodelist.value_or("");
}

std::string choose_master_addr(const std::string& mode, const std::string& name,
                               const std::optional<SlurmNodeAddr>& slurm) {
  if (mode == "name" || !slurm) return name;
  const std::string& picked = mode == "hostname" ? slurm->hostname : slurm->address;
  return picked.empty() || !safe_env_value(picked) ? name : picked;
}

EnvList planned_rendezvous_env(const PluginSettings& p, const TaskIds& ids) {
  EnvList out;
  if (ids.master_addr.empty()) return out;
  const PortRange range{p.master_port_first, p.master_port_last};
  auto keep = [&](const EnvList& from, std::initializer_list<const char*> names) {
    for (const auto& kv : from)
      for (const char* n : names)
        if (kv.first == n) out.push_back(kv);
  };
  if (p.torch_env) keep(torch_env(ids, range), {"MASTER_ADDR", "MASTER_PORT"});
  if (p.torchrun_env) keep(torchrun_env(ids, range), {"PET_MASTER_ADDR", "PET_MASTER_PORT"});
  return out;
}

std::string diag_dir_path(const DiagOptions& diag, const std::string& submit_dir, const std::string& cwd,
                          std::uint32_t job_id, std::uint32_t step_id) {
  if (!diag.dir.empty()) return diag.dir;
  return default_diag_dir(submit_dir, cwd, job_id, step_id);
}

GPUDIAG_TASK_PATH std::string_view short_host_of(std::optional<std::string_view> slurmd_nodename,
                                                std::string_view hostname) {
  const std::string_view host = slurmd_nodename.value_or(std::string_view());
  return short_name_of(host.empty() ? hostname : host);
}

std::string short_host(const std::optional<std::string>& slurmd_nodename, const std::string& hostname) {
  return std::string(short_host_of(slurmd_nodename, hostname));
}

std::string wanted_diag_dir(const StepInputs& in) {
  if (!step_runs_tasks(in.ids.step_id)) return "";
  // The hang watchdog's report needs the diag dir even when only the site turned it on.
  if (!in.diag.enabled && !(hang_seconds(in.diag, in.cfg.plugin) > 0)) return "";
  return diag_dir_path(in.diag, in.env.submit_dir.value_or(""), in.cwd, in.ids.job_id, in.ids.step_id);
}

double hang_seconds(const DiagOptions& d, const PluginSettings& p) { return d.hang_s.value_or(p.hang.duration_s); }

StepPlan plan_step(const StepInputs& in) {
  StepPlan plan;
  if (!step_runs_tasks(in.ids.step_id)) return plan;
  const PluginSettings& p = in.cfg.plugin;
  const DiagOptions& d = in.diag;

  TaskIds t = in.ids;
  t.port_salt = parse_port_salt(in.env.port_salt);
  // Only the user can put a bad salt there (srun and sbatch replace one): say once what it costs.
  if (in.env.port_salt && !t.port_salt && t.rank == 0 && (p.torch_env || p.torchrun_env))
    plan.notices.push_back(std::string("gpudiag: ") + kPortSaltEnv +
                           " is not 16 lowercase hex digits, so MASTER_PORT is the one any user can compute from "
                           "the job id; unset it and srun or sbatch makes one");
  const int gpus = count_visible_gpus(in.env.cuda_visible_devices).value_or(0);
  t.nproc_per_node = p.nproc_per_node > 0 ? p.nproc_per_node : (gpus > 0 ? gpus : 1);
  const PortRange range{p.master_port_first, p.master_port_last};
  if (p.torch_env && !t.master_addr.empty()) append(plan.env, torch_env(t, range));
  if (p.torchrun_env && !t.master_addr.empty()) append(plan.env, torchrun_env(t, range));
  // Gloo advertises the address its host name resolves to, and falls back to loopback
  // where the name resolves nowhere, so ranks on other nodes never connect (measured on
  // the namespace cluster). The interface that reaches MASTER_ADDR is the one to use.
  if ((p.torch_env || p.torchrun_env) && !t.master_addr.empty())
    for (const auto& f : in.rendezvous)
      if (f.target.var == "MASTER_ADDR" && !f.local_interface.empty())
        plan.env.emplace_back("GLOO_SOCKET_IFNAME", f.local_interface);
  append(plan.env, in.nccl_env);

  const bool hang_on = hang_seconds(d, p) > 0;
  // claim_diag_dir resolved the path (links on the way are not followed again).
  std::string dir = in.claimed_dir.empty() ? wanted_diag_dir(in) : in.claimed_dir;
  if (!dir.empty() && in.dir_problem) {
    auto verdict = judge_diag_dir_problem(*in.dir_problem, !d.dir.empty(), d.enabled, hang_on);
    if (verdict.fail_task) {
      StepPlan failed;
      failed.fail = verdict.message;
      return failed;
    }
    if (t.local_rank == 0 && !verdict.message.empty()) plan.notices.push_back(verdict.message);
    // The watchdog stays on: a neighbour who takes the dir's name must not be able to
    // switch it off. Its report then goes to the task's stderr.
    dir.clear();
  }
  if (!dir.empty()) plan.env.emplace_back("GPUDIAG_DIAG_DIR", dir);
  if (d.enabled && !dir.empty()) {
    plan.env.emplace_back("NCCL_DEBUG", d.nccl_level);
    plan.env.emplace_back("NCCL_DEBUG_SUBSYS", d.nccl_subsys);
    plan.env.emplace_back("NCCL_DEBUG_FILE", dir + "/nccl.%h.%p.log");
    plan.env.emplace_back("TORCH_DISTRIBUTED_DEBUG", "INFO");
  }
  append(plan.env, failfast_env(p.failfast, dir, hang_on, in.user_env));
  // apply_env refuses these too; leaving them out here keeps the plan what is applied.
  plan.env.erase(std::remove_if(plan.env.begin(), plan.env.end(),
                                [](const auto& kv) { return !safe_env_value(kv.second); }),
                 plan.env.end());

  plan.diag_dir = dir;
  // The fabric test waits at the preflight's barrier: no node starts before its verdict.
  plan.preflight = d.preflight.value_or(p.preflight.enabled) || d.fabric;
  plan.host = short_host(in.env.nodename, in.hostname);
  auto rendezvous = judge_rendezvous(in.rendezvous, plan.host, plan.preflight, kRendezvousLookupDeadline);
  if (rendezvous.fail) {
    StepPlan failed;
    failed.fail = rendezvous.fail;
    return failed;
  }
  if (t.local_rank == 0) append_lines(plan.notices, rendezvous.warnings);
  // srun --label already tags lines.
  plan.tag = prefix_wanted(d, p, t.world_size) && in.env.labelio.value_or("") != "1";
  plan.tag_text = expand_prefix_format(p.prefix_format, plan.host, t.rank, t.local_rank);
  if (hang_on) plan.hang = hang_watch(in, dir, plan.host);  // no dir: the report goes to stderr
  plan.hang_asked = d.hang_s.has_value();
  return plan;
}

GPUDIAG_TASK_PATH RelayChoice plan_relay(const StepPlan& plan, int rank, const StreamFacts& streams) {
  RelayChoice choice;
  RelayPlan r;
  r.hang = plan.hang;
  const bool watch = r.hang.duration_s > 0;
  r.tag_out = plan.tag && streams.out_forwarded;
  r.tag_err = plan.tag && streams.err_forwarded;
  // The watchdog sees output on every stream that is not a terminal.
  r.out = r.tag_out || (watch && !streams.out_tty);
  r.err = r.tag_err || (watch && !streams.err_tty);
  if (watch && !r.out && !r.err && plan.hang_asked)
    choice.notice = "gpudiag: hang=: no hang watchdog for task " + std::to_string(rank) +
                    ": its output goes to a terminal (srun --pty), which the watchdog cannot watch; run the step "
                    "without --pty to have one";
  if (!r.out && !r.err) return choice;
  r.tag = plan.tag_text;
  choice.relay = r;
  return choice;
}

}  // namespace gpudiag
