// gpudiag.so: the SPANK plugin (ARCHITECTURE §3). Every callback catches everything: no
// exception may cross into srun or slurmstepd, and a failure is a clear message,
// never a crash.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "config/config.h"
#include "nodeinfo/ib_discovery.h"
#include "util/control_bytes.h"
#include "spank/plan/diag_dir.h"
#include "spank/plan/diag_options.h"
#include "spank/plan/env_writer.h"
#include "spank/preflight/fabric_step.h"
#include "spank/slurm/guarded.h"
#include "spank/plan/nccl_defaults.h"
#include "spank/relay/node_relay.h"
#include "spank/relay/output_relay.h"
#include "spank/preflight/preflight.h"
#include "spank/preflight/preflight_barrier.h"
#include "spank/slurm/proctrack_kind.h"
#include "spank/relay/relay_notices.h"
#include "spank/preflight/rendezvous_check.h"
#include "spank/slurm/slurm_node_addr.h"
#include "spank/slurm/step_killer.h"
#include "spank/slurm/plugin_args.h"
#include "spank/plan/port_salt.h"
#include "spank/plan/step_plan.h"
#include "spank/slurm/slurm_compat.h"
#include "spank/slurm/slurm_proctrack.h"
#include "spank/watchdog/step_summary.h"
#include "stacks/verdict/step_verdict.h"
#include "util/this_host.h"

// SPANK_PLUGIN() gives these internal linkage in C++: declare them by hand.
extern "C" {
extern const char plugin_name[] = "gpudiag";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
}

namespace {

using gpudiag::Config;
using gpudiag::DiagOptions;

// One per process: srun, sbatch and each slurmstepd load the plugin on their own, so
// each context's state is its own struct and the other one stays empty (as in pyxis).
struct Options {
  Config cfg;
  DiagOptions diag;                       // GPUDIAG_DIAG, then --diag, merged in init_post_opt
  std::optional<std::string> diag_arg;    // --diag's argument, when given
};

// srun: which step this is, for the summary at its end.
struct SrunSide {
  std::uint32_t job_id = 0, step_id = 0;
  bool have_step = false;
  uid_t job_uid = 0;  // whose diag dir it is (srun as root may run tasks as a user)
};

// slurmstepd: one step on one node.
struct StepdSide {
  gpudiag::EnvList nccl_env;  // this node's NCCL defaults, once per step before the tasks fork
  std::string master_addr;    // chosen once per step and node ("": user_init did not run)
  std::vector<gpudiag::RendezvousFacts> rendezvous;  // checked once per step and node
  // Why gpudiag cannot run this step. A failure in init or init_post_opt on the node is
  // "launch failed" with exit 0 in srun (22.05), so it is kept here and fails each task
  // in task_init, where the task exits non-zero and the message reaches the user's
  // terminal (issue 21.3).
  std::string remote_error;
  gpudiag::StepKiller killer;  // a refused task ends the step on every node
  bool forward_stepd_signals = false;  // the relay passes slurmstepd's signals on (proctrack_kind.h)
  // The node's relay thread (node_relay.h), started in user_init. Never deleted in a task:
  // the forked copy of the pointer leads to a thread that is not in that process.
  gpudiag::NodeRelay* node_relay = nullptr;
};

Options g_opt;
SrunSide g_srun;
StepdSide g_stepd;

int diag_option_cb(int val, const char* optarg, int remote);

// Every entry point from Slurm goes through here: no exception may cross into srun or
// slurmstepd. `on_error` is what Slurm gets back if one is thrown; its text is escaped.
template <class F>
int guarded(const char* where, int on_error, F&& body) noexcept {
  return gpudiag::guarded_call([](const char* at, const char* text) { slurm_error("gpudiag: %s: %s", at, text); },
                               where, on_error, std::forward<F>(body));
}

// Every option in one table, registered in a loop (the model is pyxis). The help text
// is the parser's own list of items, filled in before registration.
std::string g_diag_help;
struct spank_option kOptions[] = {
    {const_cast<char*>("diag"), const_cast<char*>("[LIST]"), nullptr, 2, 0, diag_option_cb},
};

// Where slurmstepd cannot fail usefully (see StepdSide::remote_error), keep the first error.
int remote_failure(const std::string& message) {
  slurm_error("%s", message.c_str());
  if (g_stepd.remote_error.empty()) g_stepd.remote_error = message;
  return 0;
}

// Callbacks can fire twice: the argument is kept and parsed from scratch, here only to
// fail early; init_post_opt merges it with GPUDIAG_DIAG.
int diag_option_cb(int, const char* optarg, int remote) {
  return guarded("--diag", -1, [&] {
    g_opt.diag_arg = optarg ? optarg : "";
    auto parsed = gpudiag::parse_diag_list(*g_opt.diag_arg);
    if (!parsed) {
      if (remote) return remote_failure(parsed.error());
      slurm_error("%s", parsed.error().c_str());
      return -1;
    }
    return 0;
  });
}

class SpankEnv : public gpudiag::EnvTarget {
 public:
  explicit SpankEnv(spank_t sp) : sp_(sp) {}
  std::optional<std::string> get(const std::string& name) override {
    std::vector<char> buf(gpudiag::kMaxDiagListBytes + 1);
    spank_err_t rc = spank_getenv(sp_, name.c_str(), buf.data(), static_cast<int>(buf.size()));
    if (rc == ESPANK_SUCCESS) return std::string(buf.data());
    if (rc == ESPANK_NOSPACE) return std::string("(too long)");  // present: the user's
    return std::nullopt;
  }
  bool set(const std::string& name, const std::string& value) override {
    return spank_setenv(sp_, name.c_str(), value.c_str(), 1) == ESPANK_SUCCESS;
  }

 private:
  spank_t sp_;
};

template <class T>
bool item(spank_t sp, spank_item_t what, T& out) {
  return spank_get_item(sp, what, &out) == ESPANK_SUCCESS;
}

std::string current_dir() {
  char cwd[4096];
  return ::getcwd(cwd, sizeof cwd) ? cwd : "";
}

// Loads the config named by the plugstack arguments. Errors are messages.
gpudiag::Result<Config> load(int ac, char** av) {
  std::vector<std::string> args(av, av + ac);
  auto parsed = gpudiag::parse_plugin_args(args);
  if (!parsed) return gpudiag::Result<Config>::failure(parsed.error());
  std::string path = parsed->config_given ? parsed->config : gpudiag::kDefaultConfigPath;
  struct stat st;
  if (!parsed->config_given && ::stat(path.c_str(), &st) != 0) return Config{};
  auto cfg = gpudiag::load_config_file(path);
  if (!cfg && ::access(path.c_str(), R_OK) != 0) {
    // srun reads it as the user, slurmstepd as root: a root-only file fails only in srun.
    const char* fix = errno == EACCES ? " (srun reads it as the user: make it readable by all users)"
                                      : " (fix config= on the gpudiag.so line in plugstack.conf)";
    return gpudiag::Result<Config>::failure(cfg.error() + fix);
  }
  return cfg;
}

bool forwarded_to_srun(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

void start_output_relay(const gpudiag::StepPlan& plan, int rank, int local_id) {
  gpudiag::StreamFacts streams;
  streams.out_forwarded = forwarded_to_srun(STDOUT_FILENO);
  streams.err_forwarded = forwarded_to_srun(STDERR_FILENO);
  streams.out_tty = ::isatty(STDOUT_FILENO);
  streams.err_tty = ::isatty(STDERR_FILENO);
  auto choice = gpudiag::plan_relay(plan, rank, streams);
  if (choice.notice) slurm_error("%s", choice.notice->c_str());
  if (!choice.relay) return;
  // Tags alone: the node's thread relays, and the task is the program itself. A watched
  // task keeps its own relay process, where the watchdog lives.
  gpudiag::NodeRelay* node = g_stepd.node_relay;
  if (choice.relay->hang.duration_s <= 0 && node && node->running()) {
    auto err = gpudiag::hand_to_node_relay(node->task_socket(), *choice.relay, local_id);
    if (!err) return;
    slurm_error("%s", gpudiag::task_relays_itself(rank, *err).c_str());
  }
  choice.relay->forward_stepd_signals = g_stepd.forward_stepd_signals;
  // Returns here in the program's process; the relay never comes back.
  if (auto err = gpudiag::start_relay(*choice.relay))
    slurm_error("%s", gpudiag::task_runs_without_relay(rank, *err).c_str());
}

// Every task checks (it is cheap), so no task of a bad node starts the program; the
// first task of each node says why (slurm_error reaches the step's stderr and slurmd's log).
// The variables are read after apply_env: NCCL_SOCKET_IFNAME as the program will see it.
bool preflight_passes(gpudiag::EnvTarget& env, const gpudiag::StepPlan& plan, int local_rank) {
  const Config& cfg = g_opt.cfg;
  auto facts = gpudiag::gather_preflight(cfg.plugin.preflight, cfg.ib, plan.host, env.get("SLURM_GPUS_ON_NODE"),
                                         env.get("CUDA_VISIBLE_DEVICES"), env.get("NCCL_SOCKET_IFNAME"));
  auto problems = gpudiag::evaluate_preflight(facts);
  if (problems.empty()) return true;
  if (local_rank == 0) {
    for (const auto& p : problems) slurm_error("%s", p.c_str());
  }
  return false;
}

// gpudiag refuses this task: the step then ends on every node, not only here.
int refuse_task(const std::string& why, bool say) {
  g_stepd.killer.mark_refused();
  const std::string hint = g_stepd.killer.fallback_hint();
  if (say && !(why + hint).empty()) slurm_error("%s%s", why.empty() ? "gpudiag:" : why.c_str(), hint.c_str());
  return -1;
}

// How long a task that passed waits for the other tasks' preflights (srun serves a little
// longer): the launch of every node of the step must fit in it.
constexpr double kBarrierWait_s = 60;

// Under the preflight, no task starts the program until every task of the step passed
// (srun's verdict). Returns whether this task may start it.
bool barrier_lets_go(gpudiag::EnvTarget& env, const gpudiag::StepPlan& plan, int rank, int local_rank, bool passed) {
  auto value = env.get(gpudiag::kBarrierEnv);
  if (!value) {
    // srun has no barrier: one task, or it could not listen and said so, or there is no
    // srun (--async), which says so here, once per step.
    if (passed && rank == 0 && gpudiag::step_has_no_srun(env.get("SLURM_STEP_LAUNCHER_PORT")))
      slurm_error("gpudiag: preflight: this step has no srun to hold the cross-node barrier (srun --async): each "
                  "node that passes its own preflight starts the program without waiting for the others");
    return passed;
  }
  auto endpoint = gpudiag::parse_barrier_env(*value);
  auto srun_addr = env.get("SLURM_LAUNCH_NODE_IPADDR");
  gpudiag::BarrierOutcome out;
  if (endpoint && srun_addr) {
    gpudiag::BarrierReport report{endpoint->token, static_cast<std::uint32_t>(rank), passed, plan.host};
    out = gpudiag::await_barrier(*srun_addr, *endpoint, report, 5, kBarrierWait_s);
  } else {
    out.detail = "no usable " + std::string(gpudiag::kBarrierEnv) + " or SLURM_LAUNCH_NODE_IPADDR";
  }
  const bool start = gpudiag::barrier_allows_start(passed, out.kind);
  if (passed && local_rank == 0) {
    // A failing node says why itself; a healthy one stopped by srun says nothing.
    if (out.kind == gpudiag::BarrierOutcome::kUnreachable)
      slurm_error("gpudiag: preflight on %s: cannot reach srun for the cross-node barrier (%s): not starting the "
                  "program, since no node may start while another fails its preflight; allow TCP connections from "
                  "the nodes to srun's host (srun's own I/O needs them too), or run without --diag=preflight",
                  plan.host.c_str(), gpudiag::escape_control(out.detail).c_str());
    if (out.kind == gpudiag::BarrierOutcome::kNoVerdict)
      slurm_error("gpudiag: preflight on %s: %s from srun for the cross-node barrier: not starting the program "
                  "(a node of the step did not report; see the errors above, or launch fewer nodes at once)",
                  plan.host.c_str(), gpudiag::escape_control(out.detail).c_str());
  }
  return start;
}

// What --diag=fabric reports of this task: the environment the program will get (after
// apply_env) and its argv.
gpudiag::FabricTaskFacts fabric_facts(spank_t sp, const gpudiag::StepPlan& plan, const gpudiag::TaskIds& t,
                                      const std::vector<gpudiag::RendezvousFacts>& rendezvous) {
  gpudiag::FabricTaskFacts f;
  f.host = plan.host;
  f.rank = static_cast<std::uint32_t>(t.rank);
  f.node_id = static_cast<std::uint32_t>(t.node_rank);
  f.nnodes = static_cast<std::uint32_t>(t.num_nodes);
  f.local_rank = static_cast<std::uint32_t>(t.local_rank);
  f.local_tasks = static_cast<std::uint32_t>(t.local_world_size);
  char** env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &env) == ESPANK_SUCCESS && env)
    for (char** e = env; *e && f.job_env.size() < 4096; ++e) f.job_env.emplace_back(*e);
  int argc = 0;
  char** argv = nullptr;
  if (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) == ESPANK_SUCCESS && argv)
    for (int i = 0; i < argc && i < 64 && argv[i]; ++i) f.argv.emplace_back(argv[i]);
  f.rendezvous = rendezvous;
  return f;
}

int task_init(spank_t sp) {
  std::uint32_t job = 0, step = 0, nnodes = 1, nodeid = 0, local_count = 1, total = 1, global_id = 0;
  int local_id = 0;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step)) return 0;
  // A batch script still runs: each srun in it then fails with the reason.
  if (!gpudiag::step_runs_tasks(step)) return 0;
  if (!g_stepd.remote_error.empty()) {
    // Every task fails; the first of each node says why (slurmstepd adds a line per task).
    item(sp, S_TASK_ID, local_id);
    return refuse_task(g_stepd.remote_error, local_id == 0);
  }
  item(sp, S_JOB_NNODES, nnodes);
  item(sp, S_JOB_NODEID, nodeid);
  item(sp, S_JOB_LOCAL_TASK_COUNT, local_count);
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  item(sp, S_TASK_GLOBAL_ID, global_id);
  item(sp, S_TASK_ID, local_id);

  SpankEnv env(sp);
  gpudiag::StepInputs in;
  in.cfg = g_opt.cfg;
  in.diag = g_opt.diag;
  in.env = gpudiag::read_task_env(env);
  in.nccl_env = g_stepd.nccl_env;
  in.cwd = current_dir();
  in.hostname = gpudiag::hostname();
  in.uid = ::getuid();
  in.user_env = &env;
  gpudiag::TaskIds& t = in.ids;
  t.job_id = job;
  t.step_id = step;
  t.rank = static_cast<int>(global_id);
  t.world_size = static_cast<int>(total);
  t.local_rank = local_id;
  t.local_world_size = static_cast<int>(local_count);
  t.node_rank = static_cast<int>(nodeid);
  t.num_nodes = static_cast<int>(nnodes);
  t.master_addr = g_stepd.master_addr.empty() ? gpudiag::slurm_compat::first_host(gpudiag::master_nodelist(in.env))
                                              : g_stepd.master_addr;
  in.rendezvous = g_stepd.rendezvous;
  // task_init runs as the user: the directory is the user's, and a place the user may
  // not write is refused by the kernel, not by us as root.
  std::string dir = gpudiag::wanted_diag_dir(in);
  if (!dir.empty()) {
    // rewrites dir to the resolved path
    in.dir_problem =
        gpudiag::claim_diag_dir(dir, in.uid, gpudiag::group_ids(g_opt.cfg.plugin.diag_dir_trusted_groups));
    in.claimed_dir = dir;
  }

  const gpudiag::StepPlan plan = gpudiag::plan_step(in);
  if (plan.fail) return refuse_task(*plan.fail, true);
  for (const auto& line : plan.notices) slurm_error("%s", line.c_str());
  gpudiag::apply_env(env, plan.env);
  if (plan.preflight) {
    bool passed = preflight_passes(env, plan, local_id);
    // --diag=fabric: even a node that failed its preflight takes part, or the others wait for it.
    const auto fabric = gpudiag::fabric_part(env, g_opt.cfg, fabric_facts(sp, plan, t, in.rendezvous));
    if (!fabric.say.empty()) slurm_error("%s", fabric.say.c_str());
    passed = passed && fabric.pass;
    if (!barrier_lets_go(env, plan, t.rank, local_id, passed)) return refuse_task("", local_id == 0 && !passed);
  }
  start_output_relay(plan, t.rank, local_id);
  return 0;
}

// Once per step and node, before the tasks fork (they inherit the result): MASTER_ADDR
// from Slurm's own node table (no RPC, ARCHITECTURE §3), and whether this node can reach
// the rendezvous the program will use. task_init judges what was found.
void check_rendezvous(spank_t sp) {
  std::uint32_t job = 0, step = 0, nodeid = 0;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step) || !gpudiag::step_runs_tasks(step)) return;
  item(sp, S_JOB_NODEID, nodeid);
  SpankEnv env(sp);
  const gpudiag::TaskEnv task_env = gpudiag::read_task_env(env);
  const std::string first = gpudiag::slurm_compat::first_host(gpudiag::master_nodelist(task_env));
  if (first.empty()) return;
  const gpudiag::PluginSettings& p = g_opt.cfg.plugin;
  g_stepd.master_addr = gpudiag::choose_master_addr(p.master_addr, first, gpudiag::slurm_node_addr(first));
  gpudiag::TaskIds ids;
  ids.job_id = job;
  ids.step_id = step;
  ids.master_addr = g_stepd.master_addr;
  ids.port_salt = gpudiag::parse_port_salt(task_env.port_salt);
  gpudiag::EnvList user;
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_RDZV_ENDPOINT"})
    if (auto v = gpudiag::user_value(env, name)) user.emplace_back(name, *v);
  for (const auto& target : gpudiag::rendezvous_targets(user, gpudiag::planned_rendezvous_env(p, ids), nodeid == 0))
    g_stepd.rendezvous.push_back(gpudiag::gather_rendezvous(target, gpudiag::kRendezvousLookupDeadline));
}

// slurmstepd, once per step and node: the thread that tags every local task's lines, when
// the step's lines are tagged at all.
void start_node_relay(spank_t sp) {
  std::uint32_t step = 0, total = 1, local = 0;
  if (!item(sp, S_JOB_STEPID, step) || !gpudiag::step_runs_tasks(step)) return;
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  if (!gpudiag::prefix_wanted(g_opt.diag, g_opt.cfg.plugin, static_cast<int>(total))) return;
  // Unknown (0) if Slurm does not say: each task's pipes are then drained on their own.
  if (!item(sp, S_JOB_LOCAL_TASK_COUNT, local)) local = 0;
  auto* relay = new gpudiag::NodeRelay();
  if (auto err = relay->start(static_cast<int>(local))) {
    slurm_info("%s", gpudiag::node_relay_not_started(*err).c_str());
    delete relay;
    return;
  }
  g_stepd.node_relay = relay;
}

// srun, sbatch and salloc: the job's MASTER_PORT secret (port_salt.h). One the job already
// has (an srun inside sbatch) is kept, so that the job's steps keep distinct ports.
void give_job_a_port_salt() {
  const char* have = std::getenv(gpudiag::kPortSaltEnv);
  if (have && gpudiag::parse_port_salt(std::string(have))) return;
  if (auto salt = gpudiag::new_port_salt()) ::setenv(gpudiag::kPortSaltEnv, salt->c_str(), 1);
}

// srun, once per step: the coordinator of the preflight barrier. A setenv here still
// reaches the step's environment (22.05, checked). Without the preflight the variable is
// removed, so that a step inside a step never reports to the outer srun.
void start_preflight_barrier(spank_t sp) {
  ::unsetenv(gpudiag::kBarrierEnv);
  if (!g_opt.diag.preflight.value_or(g_opt.cfg.plugin.preflight.enabled) && !g_opt.diag.fabric) return;
  std::uint32_t total = 0;
  if (!item(sp, S_JOB_TOTAL_TASK_COUNT, total) || total <= 1) return;
  auto started = gpudiag::start_barrier_server(total, kBarrierWait_s + 10);
  if (!started.endpoint) {
    slurm_error("gpudiag: the preflight runs without its cross-node barrier (%s): a node that passes starts the "
                "program without waiting for the others",
                started.error.c_str());
    return;
  }
  ::setenv(gpudiag::kBarrierEnv, gpudiag::format_barrier_env(*started.endpoint).c_str(), 1);
}

// srun, once per step, under --diag=fabric: the fabric test's coordinator (fabric/). As
// for the barrier, the variable is removed otherwise, so a step inside a step never
// reports to the outer srun.
void start_fabric_test(spank_t sp) {
  ::unsetenv(gpudiag::fabric::kFabricEnv);
  std::uint32_t total = 0;
  if (!g_opt.diag.fabric || !g_srun.have_step || !item(sp, S_JOB_TOTAL_TASK_COUNT, total) || total <= 1) return;
  const char* submit = std::getenv("SLURM_SUBMIT_DIR");
  const std::string dir =
      gpudiag::diag_dir_path(g_opt.diag, submit ? submit : "", current_dir(), g_srun.job_id, g_srun.step_id);
  const std::string err = gpudiag::start_fabric(g_opt.cfg, total, gpudiag::safe_env_value(dir) ? dir : "",
                                                g_srun.job_uid, g_srun.job_id, g_srun.step_id);
  if (!err.empty())
    slurm_error("gpudiag: --diag=fabric: no fabric test (%s): the step starts without it", err.c_str());
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  return guarded("init", -1, [&] {
    const spank_context_t ctx = spank_context();
    if (g_diag_help.empty()) g_diag_help = gpudiag::diag_option_help();
    kOptions[0].usage = const_cast<char*>(g_diag_help.c_str());
    auto cfg = load(ac, av);
    if (!cfg && ctx == S_CTX_REMOTE) {
      // Registered all the same, so the step's --diag still parses on its way to task_init.
      for (auto& opt : kOptions) spank_option_register(sp, &opt);
      return remote_failure(cfg.error());
    }
    if (!cfg) {
      slurm_error("%s", cfg.error().c_str());
      // In slurmd and prolog/epilog contexts an error would take more than the user's
      // step down with it; there the message is enough.
      return (ctx == S_CTX_LOCAL || ctx == S_CTX_REMOTE || ctx == S_CTX_ALLOCATOR) ? -1 : 0;
    }
    g_opt.cfg = *cfg;
    if (ctx == S_CTX_LOCAL || ctx == S_CTX_REMOTE || ctx == S_CTX_ALLOCATOR) {
      for (auto& opt : kOptions) {
        if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
          slurm_error("gpudiag: cannot register --%s", opt.name);
          return -1;
        }
      }
    }
    return 0;
  });
}

int slurm_spank_init_post_opt(spank_t sp, int, char**) {
  return guarded("options", -1, [&] {
    const spank_context_t ctx = spank_context();
    // sbatch and salloc: the job's environment is still being made; what is set now, its
    // steps inherit.
    if (ctx == S_CTX_ALLOCATOR) give_job_a_port_salt();
    if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE) return 0;
    std::string from_env;
    if (ctx == S_CTX_LOCAL) {
      const char* v = std::getenv("GPUDIAG_DIAG");
      if (v) from_env = v;
    } else {
      SpankEnv env(sp);
      from_env = env.get("GPUDIAG_DIAG").value_or("");
    }
    auto merged = gpudiag::merge_diag_options(from_env, g_opt.diag_arg);
    if (!merged) {
      if (ctx == S_CTX_REMOTE) return remote_failure(merged.error());
      slurm_error("%s", merged.error().c_str());
      return -1;
    }
    g_opt.diag = *merged;
    const std::string& named = g_opt.diag.dir;
    if (ctx == S_CTX_LOCAL && !named.empty()) {
      // srun runs as the user: a named dir the user cannot write fails here, once.
      if (auto why = gpudiag::judge_named_dir(named, gpudiag::read_named_dir_facts(named))) {
        slurm_error("%s", why->c_str());
        return -1;
      }
    }
    return 0;
  });
}

int slurm_spank_user_init(spank_t sp, int, char**) {
  guarded("user init", 0, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    // Before the tasks fork: they share the refusal flag with this process.
    const bool can_end = gpudiag::slurm_compat::kill_job_step_symbol() != nullptr;
    g_stepd.killer.prepare(can_end ? &gpudiag::slurm_compat::end_step : nullptr);
    return 0;
  });
  // Once per step and node, before the tasks fork: whom slurmstepd's signals reach.
  guarded("user init", 0, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    const auto verdict = gpudiag::step_signal_reach(gpudiag::slurm_compat::proctrack_type());
    g_stepd.forward_stepd_signals = verdict.reach == gpudiag::StepSignalReach::kRelayOnly;
    if (verdict.notice) slurm_info("%s", verdict.notice->c_str());
    return 0;
  });
  // The rendezvous check only gathers here; its verdict fails the tasks in task_init.
  guarded("user init", 0, [&] {
    if (spank_context() == S_CTX_REMOTE) check_rendezvous(sp);
    return 0;
  });
  // Before the tasks fork, so that they inherit its socket. Without it the tasks relay
  // themselves, as before (on_error 0).
  guarded("user init", 0, [&] {
    if (spank_context() == S_CTX_REMOTE) start_node_relay(sp);
    return 0;
  });
  // NCCL defaults are a convenience: never fail a job over them (on_error 0).
  return guarded("user init", 0, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    // Once per step and node, before the tasks fork: they inherit the result.
    gpudiag::RootedFs fs("/");
    g_stepd.nccl_env = gpudiag::nccl_defaults(g_opt.cfg.plugin, gpudiag::discover_ib(fs), g_opt.cfg.ib);
    return 0;
  });
}

int slurm_spank_local_user_init(spank_t sp, int, char**) {
  return guarded("local user init", 0, [&] {
    if (spank_context() != S_CTX_LOCAL) return 0;
    g_srun.have_step = item(sp, S_JOB_ID, g_srun.job_id) && item(sp, S_JOB_STEPID, g_srun.step_id);
    g_srun.job_uid = gpudiag::slurm_compat::srun_job_uid(sp);
    give_job_a_port_salt();
    start_preflight_barrier(sp);
    start_fabric_test(sp);
    return 0;
  });
}

// slurmstepd, after the step's output is out (node_relay.h): the relay thread ends.
// srun, after the step: what NCCL did, from the logs the tasks wrote (issue 7).
int slurm_spank_exit(spank_t, int, char**) {
  guarded("exit", 0, [&] {
    if (spank_context() != S_CTX_REMOTE || !g_stepd.node_relay) return 0;
    g_stepd.node_relay->stop();
    delete g_stepd.node_relay;
    g_stepd.node_relay = nullptr;
    return 0;
  });
  return guarded("exit", 0, [&] {
    if (spank_context() != S_CTX_LOCAL || !g_opt.diag.enabled || !g_srun.have_step) return 0;
    // The tasks' rule: srun hands them its own directory as $SLURM_SUBMIT_DIR.
    const char* submit = std::getenv("SLURM_SUBMIT_DIR");
    const std::string dir =
        gpudiag::diag_dir_path(g_opt.diag, submit ? submit : "", current_dir(), g_srun.job_id, g_srun.step_id);
    // The tasks did not use a dir whose name or owner is wrong, and said why; reading it
    // here would print control bytes, or summarize logs a neighbour planted.
    if (!gpudiag::safe_env_value(dir)) return 0;
    auto facts = gpudiag::read_dir_facts(dir);
    if (facts.exists && gpudiag::distrust_diag_dir(facts, g_srun.job_uid)) return 0;
    // A hang first: which rank, where, on which node, from every node's report (issue 31.3).
    std::string text = gpudiag::hang_step_verdict(dir, g_srun.job_uid) + gpudiag::nccl_step_summary(dir);
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    return 0;
  });
}

int slurm_spank_task_init(spank_t sp, int, char**) {
  return guarded("task init", 0, [&] { return task_init(sp); });
}

// slurmstepd, as each task is reaped: a task gpudiag refused ends the step everywhere.
int slurm_spank_task_exit(spank_t sp, int, char**) {
  return guarded("task exit", 0, [&] {
    if (spank_context() != S_CTX_REMOTE) return 0;
    std::uint32_t job = 0, step = 0, total = 1;
    if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step) || !gpudiag::step_runs_tasks(step)) return 0;
    if (g_stepd.node_relay) {
      int local_id = -1;
      if (item(sp, S_TASK_ID, local_id)) g_stepd.node_relay->task_exited(local_id);
    }
    // One task: it is the step, and it has already ended.
    if (item(sp, S_JOB_TOTAL_TASK_COUNT, total) && total <= 1) return 0;
    // The error goes to slurmd's log: the user's terminal already has the refusal.
    if (auto err = g_stepd.killer.end_if_refused(job, step, gpudiag::hostname())) slurm_error("%s", err->c_str());
    return 0;
  });
}

}  // extern "C"
