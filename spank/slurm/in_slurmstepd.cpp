// slurmstepd (S_CTX_REMOTE): one step on one node. init and init_post_opt run as root,
// user_init as the user once per step and node before the tasks fork, task_init in each
// forked task as the user just before exec, task_exit and exit back in slurmstepd.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include "spank/slurm/contexts.h"

#include "config/config.h"
#include "nodeinfo/ib_discovery.h"
#include "spank/plan/diag_dir.h"
#include "spank/plan/diag_options.h"
#include "spank/plan/env_writer.h"
#include "spank/plan/nccl_defaults.h"
#include "spank/plan/port_salt.h"
#include "spank/plan/prepared_task.h"
#include "spank/plan/step_plan.h"
#include "spank/preflight/fabric_step.h"
#include "spank/preflight/preflight.h"
#include "spank/preflight/preflight_barrier.h"
#include "spank/preflight/rendezvous_check.h"
#include "spank/relay/node_relay.h"
#include "spank/relay/output_relay.h"
#include "spank/relay/relay_notices.h"
#include "spank/slurm/proctrack_kind.h"
#include "spank/slurm/slurm_compat.h"
#include "spank/slurm/slurm_node_addr.h"
#include "spank/slurm/slurm_proctrack.h"
#include "spank/slurm/spank_access.h"
#include "spank/slurm/step_killer.h"
#include "util/control_bytes.h"
#include "util/detached_thread.h"
#include "util/task_path.h"
#include "util/this_host.h"

namespace gpudiag::in_slurmstepd {
namespace {

struct Stepd {
  Config cfg;
  DiagOptions diag;                     // GPUDIAG_DIAG, then --diag, merged in init_post_opt
  std::optional<std::string> diag_arg;  // --diag's argument, when given
  EnvList nccl_env;          // this node's NCCL defaults, once per step before the tasks fork
  std::string master_addr;   // chosen once per step and node ("": user_init did not run)
  std::vector<RendezvousFacts> rendezvous;  // checked once per step and node
  // Why gpudiag cannot run this step. A failure in init or init_post_opt on the node is
  // "launch failed" with exit 0 in srun (22.05), so it is kept here and fails each task
  // in task_init, where the task exits non-zero and the message reaches the user's
  // terminal (issue 21.3).
  std::string remote_error;
  StepKiller killer;                   // a refused task ends the step on every node
  bool under_preflight = false;        // a task: in the preflight, which only srun's verdict ends
  bool forward_stepd_signals = false;  // the relay passes slurmstepd's signals on (proctrack_kind.h)
  // The node's relay (node_relay.h): its socket opened in user_init, its thread started in
  // the first task_post_fork. Never deleted in a task:
  // the forked copy of the pointer leads to a thread that is not in that process.
  NodeRelay* node_relay = nullptr;
  // Each local task's plan, by local id, made in user_init (prepared_task.h); empty: each
  // task plans itself.
  std::vector<PreparedTask> prepared;
};

// Plans made before the fork are kept for at most this many local tasks: slurmstepd holds
// them (a few kB each) for the whole step.
constexpr std::uint32_t kMaxPreparedTasks = 256;

Stepd g;

// Where slurmstepd cannot fail usefully (see Stepd::remote_error), keep the first error.
int remote_failure(const std::string& message) {
  slurm_error("%s", message.c_str());
  if (g.remote_error.empty()) g.remote_error = message;
  return 0;
}

GPUDIAG_TASK_PATH bool forwarded_to_srun(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return false;
  return S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
}

// `message`: the handoff made ahead for `relay` (empty: made here).
GPUDIAG_TASK_PATH void relay_task(const RelayPlan& relay, std::string_view message, int rank, int local_id) {
  // Tags alone: the node's thread relays, and the task is the program itself. A watched
  // task keeps its own relay process, where the watchdog lives.
  NodeRelay* node = g.node_relay;
  if (relay.hang.duration_s <= 0 && node && node->accepting()) {
    auto err = message.empty() ? hand_to_node_relay(node->task_socket(), relay, local_id)
                               : hand_over_streams(node->task_socket(), message, relay.out, relay.err);
    if (!err) return;
    slurm_error("%s", task_relays_itself(rank, *err).c_str());
  }
  RelayPlan own = relay;
  own.forward_stepd_signals = g.forward_stepd_signals;
  // Returns here in the program's process; the relay never comes back.
  if (auto err = start_relay(own)) slurm_error("%s", task_runs_without_relay(rank, *err).c_str());
}

// `ready`: the task's prepared plan, whose relay was chosen ahead for kPreparedStreams.
GPUDIAG_TASK_PATH void start_output_relay(const StepPlan& plan, int rank, int local_id,
                                          const PreparedTask* ready = nullptr) {
  StreamFacts streams;
  streams.out_forwarded = forwarded_to_srun(STDOUT_FILENO);
  streams.err_forwarded = forwarded_to_srun(STDERR_FILENO);
  // A pipe or a socket is no terminal: one syscall less each.
  streams.out_tty = !streams.out_forwarded && ::isatty(STDOUT_FILENO);
  streams.err_tty = !streams.err_forwarded && ::isatty(STDERR_FILENO);
  if (ready && streams == kPreparedStreams) {
    if (ready->relay) relay_task(*ready->relay, ready->handoff, rank, local_id);
    return;
  }
  auto choice = plan_relay(plan, rank, streams);
  if (choice.notice) slurm_error("%s", choice.notice->c_str());
  if (choice.relay) relay_task(*choice.relay, {}, rank, local_id);
}

// Every task checks (it is cheap), so no task of a bad node starts the program; each
// problem is said once per node, by the first task to find it (slurm_error reaches the
// step's stderr and slurmd's log): one that only task 1 finds (its own
// CUDA_VISIBLE_DEVICES) is said too. `said`: this task said one.
// The variables are read after apply_env: NCCL_SOCKET_IFNAME as the program will see it.
bool preflight_passes(const Config& cfg, EnvTarget& env, const StepPlan& plan, int local_rank, bool& said) {
  auto facts = gather_preflight(cfg.plugin.preflight, cfg.ib, plan.host, env.get("SLURM_GPUS_ON_NODE"),
                                env.get("CUDA_VISIBLE_DEVICES"), env.get("NCCL_SOCKET_IFNAME"));
  auto problems = evaluate_preflight(facts);
  for (const auto& p : problems)
    if (g.killer.first_to_say(p, local_rank)) {
      slurm_error("%s", p.c_str());
      g.killer.done_saying();
      said = true;
    }
  return problems.empty();
}

// Whether srun holds a barrier or a fabric test for this step: each task then starts only
// on srun's word. Read only where something failed, so the normal path pays nothing.
bool step_holds_a_barrier(spank_t sp) noexcept {
  char value[16];
  for (const char* name : {kBarrierEnv, fabric::kFabricEnv}) {
    const spank_err_t rc = spank_getenv(sp, name, value, sizeof value);
    if (rc == ESPANK_SUCCESS || rc == ESPANK_NOSPACE) return true;
  }
  return false;
}

// This task's local id, -1 where Slurm does not say.
int local_task_id(spank_t sp) {
  int id = -1;
  return item(sp, S_TASK_ID, id) ? id : -1;
}

// What the page's said lines know the refusal's hint by (refuse_task's fallback_hint).
constexpr std::string_view kRefusalHintKey = "gpudiag: the refusal's hint";

// gpudiag refuses this task: the step then ends on every node, not only here, unless
// `end_step` is false (srun stopped every task, or another refusal on this node ends it).
// Never throws: the marks come first, and a message that cannot be made is left out,
// since a task whose refusal escaped as an exception would start the program.
int refuse_task(const std::string& why, bool say, bool end_step = true) noexcept {
  g.killer.unmark_running();  // first: the count never holds a task that has stopped
  if (end_step) g.killer.mark_refused();
  if (!say) return -1;
  try {
    const std::string hint = g.killer.fallback_hint();
    if (!(why + hint).empty()) slurm_error("%s%s", why.empty() ? "gpudiag:" : why.c_str(), hint.c_str());
  } catch (...) {
    if (!why.empty()) slurm_error("%s", why.c_str());
  }
  return -1;
}

// What the barrier lets a task do: start the program, or not; kStoppedBySrun: srun said
// stop to every task of the step, so none starts and nothing needs ending.
enum class BarrierAnswer { kStart, kRefuse, kStoppedBySrun };

// Under the preflight, no task starts the program until every task of the step passed
// (srun's verdict).
BarrierAnswer barrier_lets_go(EnvTarget& env, const StepPlan& plan, int rank, int local_rank, bool passed) {
  // A step with no srun (--async) has no barrier: a value there is an outer step's,
  // inherited through its program's environment (adversary review 15).
  const bool no_srun = step_has_no_srun(env.get("SLURM_STEP_LAUNCHER_PORT"));
  auto value = no_srun ? std::nullopt : env.get(kBarrierEnv);
  if (!value && !no_srun && env.get(kOldBarrierEnv)) {
    // An srun of an older gpudiag: it holds a barrier this task cannot take part in.
    if (local_rank == 0)
      slurm_error("gpudiag: preflight on %s: srun runs an older gpudiag than this node (it set %s): not starting "
                  "the program; install the same gpudiag on the login and compute nodes",
                  plan.host.c_str(), kOldBarrierEnv);
    return BarrierAnswer::kRefuse;
  }
  if (!value) {
    // srun has no barrier: one task, or it could not listen and said so, or there is no
    // srun (--async), which says so here, once per step.
    if (passed && rank == 0 && no_srun)
      slurm_error("gpudiag: preflight: this step has no srun to hold the cross-node barrier (srun --async): each "
                  "node that passes its own preflight starts the program without waiting for the others");
    return passed ? BarrierAnswer::kStart : BarrierAnswer::kRefuse;
  }
  auto endpoint = parse_barrier_env(*value);
  auto srun_addr = env.get("SLURM_LAUNCH_NODE_IPADDR");
  BarrierOutcome out;
  if (endpoint && srun_addr) {
    BarrierReport report{endpoint->token, static_cast<std::uint32_t>(rank), passed, plan.host};
    out = await_barrier(*srun_addr, *endpoint, report, 5, kBarrierWait_s);
  } else {
    out.detail = "no usable " + std::string(kBarrierEnv) + " or SLURM_LAUNCH_NODE_IPADDR";
  }
  const bool start = barrier_allows_start(passed, out.kind);
  if (passed && local_rank == 0) {
    // A failing node says why itself; a healthy one stopped by srun says nothing.
    if (out.kind == BarrierOutcome::kUnreachable)
      slurm_error("gpudiag: preflight on %s: cannot reach srun for the cross-node barrier (%s): not starting the "
                  "program, since no node may start while another fails its preflight; allow TCP connections from "
                  "the nodes to srun's host (srun's own I/O needs them too), or run without --diag=preflight",
                  plan.host.c_str(), escape_control(out.detail).c_str());
    if (out.kind == BarrierOutcome::kNoVerdict)
      slurm_error("gpudiag: preflight on %s: %s from srun for the cross-node barrier: not starting the program "
                  "(a node of the step did not report; see the errors above, or launch fewer nodes at once)",
                  plan.host.c_str(), escape_control(out.detail).c_str());
  }
  if (start) return BarrierAnswer::kStart;
  return passed && out.kind == BarrierOutcome::kStop ? BarrierAnswer::kStoppedBySrun : BarrierAnswer::kRefuse;
}

// What --diag=fabric reports of this task: the environment the program will get (after
// apply_env) and its argv.
FabricTaskFacts fabric_facts(spank_t sp, const StepPlan& plan, const TaskIds& t,
                             const std::vector<RendezvousFacts>& rendezvous) {
  FabricTaskFacts f;
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

// Once per step and node, before the tasks fork (they inherit the result): MASTER_ADDR
// from Slurm's own node table (no RPC, ARCHITECTURE §3), and whether this node can reach
// the rendezvous the program will use. task_init judges what was found.
void check_rendezvous(spank_t sp) {
  std::uint32_t job = 0, step = 0, nodeid = 0;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step) || !step_runs_tasks(step)) return;
  item(sp, S_JOB_NODEID, nodeid);
  SpankEnv env(sp);
  const TaskEnv task_env = read_task_env(env);
  const std::string first = slurm_compat::first_host(master_nodelist(task_env));
  if (first.empty()) return;
  const PluginSettings& p = g.cfg.plugin;
  g.master_addr = choose_master_addr(p.master_addr, first, slurm_node_addr(first));
  TaskIds ids;
  ids.job_id = job;
  ids.step_id = step;
  ids.master_addr = g.master_addr;
  ids.port_salt = parse_port_salt(task_env.port_salt);
  EnvList user;
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_RDZV_ENDPOINT"})
    if (auto v = user_value(env, name)) user.emplace_back(name, *v);
  for (const auto& target : rendezvous_targets(user, planned_rendezvous_env(p, ids), nodeid == 0))
    g.rendezvous.push_back(gather_rendezvous(target, kRendezvousLookupDeadline));
}

// Once per step and node: the socket of the thread that tags every local task's lines, when
// the step's lines are tagged at all. The thread itself starts in task_post_fork.
void open_node_relay(spank_t sp) {
  std::uint32_t step = 0, total = 1, local = 0;
  if (!item(sp, S_JOB_STEPID, step) || !step_runs_tasks(step)) return;
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  if (!prefix_wanted(g.diag, g.cfg.plugin, static_cast<int>(total))) return;
  // Unknown (0) if Slurm does not say: each task's pipes are then drained on their own.
  if (!item(sp, S_JOB_LOCAL_TASK_COUNT, local)) local = 0;
  auto* relay = new NodeRelay();
  if (auto err = relay->open(static_cast<int>(local))) {
    slurm_info("%s", node_relay_not_started(*err).c_str());
    delete relay;
    return;
  }
  g.node_relay = relay;
}

// Whether prepare_tasks has anything to do: a step whose tasks gpudiag runs (not the batch
// or extern step), with no error kept, and a local task count it prepares for.
bool tasks_to_prepare(spank_t sp) {
  std::uint32_t job = 0, step = 0, local_count = 0;
  return g.remote_error.empty() && item(sp, S_JOB_ID, job) && item(sp, S_JOB_STEPID, step) && step_runs_tasks(step) &&
         item(sp, S_JOB_LOCAL_TASK_COUNT, local_count) && local_count > 0 && local_count <= kMaxPreparedTasks;
}

// Once per step and node, after everything else user_init finds, before the tasks fork:
// each local task's plan, as task_init would make it from the job's environment now. A
// task that it fits then only applies it (use_prepared).
void prepare_tasks(spank_t sp) {
  std::uint32_t job = 0, step = 0, nnodes = 1, nodeid = 0, local_count = 0, total = 1;
  uid_t uid = 0;
  if (!tasks_to_prepare(sp) || !item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step) ||
      !item(sp, S_JOB_LOCAL_TASK_COUNT, local_count))
    return;
  item(sp, S_JOB_NNODES, nnodes);
  item(sp, S_JOB_NODEID, nodeid);
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  item(sp, S_JOB_UID, uid);
  SpankEnv job_env(sp);
  ReadOnceEnv env(job_env);
  StepInputs base{g.cfg, g.diag};
  base.env = read_task_env(env);
  base.nccl_env = g.nccl_env;
  base.cwd = current_dir();
  base.hostname = hostname();
  base.uid = uid;
  base.rendezvous = g.rendezvous;
  TaskIds& t = base.ids;
  t.job_id = job;
  t.step_id = step;
  t.world_size = static_cast<int>(total);
  t.local_world_size = static_cast<int>(local_count);
  t.node_rank = static_cast<int>(nodeid);
  t.num_nodes = static_cast<int>(nnodes);
  t.master_addr = g.master_addr.empty() ? slurm_compat::first_host(master_nodelist(base.env)) : g.master_addr;
  std::vector<PreparedTask> prepared;
  prepared.reserve(local_count);
  std::size_t bytes = 0;
  for (std::uint32_t local = 0; local < local_count; ++local) {
    std::uint32_t global = 0;
    if (spank_get_item(sp, S_JOB_LOCAL_TO_GLOBAL_ID, local, &global) != ESPANK_SUCCESS) return;
    StepInputs in = base;
    in.ids.rank = static_cast<int>(global);
    in.ids.local_rank = static_cast<int>(local);
    auto p = prepare_task(std::move(in), env, !g.master_addr.empty());
    if (!p) return;  // the plan needs the task itself: each one plans as before
    if (p->relay) p->handoff = handoff_message(*p->relay, static_cast<int>(local)).value_or("");
    bytes += prepared_bytes(*p);
    if (bytes > kPreparedStepBudget) return;  // the user's variables are large: each task plans itself
    prepared.push_back(std::move(*p));
  }
  g.prepared = std::move(prepared);
}

// In the task: user_init's plan for it, when it fits (task_may_use). Nothing here builds a
// string or grows a container: the task reads what slurmstepd prepared, and each page it
// writes is a copy (BENCHMARKS "A launch as cheap as pyxis"). false: nothing was done, and
// the task plans itself.
GPUDIAG_TASK_PATH bool use_prepared(spank_t sp, const TaskIds& seen) {
  if (seen.local_rank < 0 || static_cast<std::size_t>(seen.local_rank) >= g.prepared.size()) return false;
  const PreparedTask& p = g.prepared[static_cast<std::size_t>(seen.local_rank)];
  TaskView view;
  view.ids = seen;
  char** env = nullptr;
  if (spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS || !env) return false;
  view.env = env;
  char host[256] = {};  // as hostname() reads it
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  view.hostname = host;
  if (!task_may_use(p, view)) return false;
  for (const auto& line : p.plan.notices) slurm_error("%s", line.c_str());
  for (const auto& [name, value] : p.sets) spank_setenv(sp, name.c_str(), value.c_str(), 1);
  start_output_relay(p.plan, seen.rank, seen.local_rank, &p);
  return true;
}

}  // namespace

void keep_error(const char* where, const char* text) noexcept {
  try {
    remote_failure(std::string("gpudiag: ") + where + ": " + text);
  } catch (...) {
    slurm_error("gpudiag: %s: %s", where, text);
  }
}

int init(spank_t sp, int ac, char** av) {
  auto cfg = load_plugin_config(ac, av);
  if (!cfg) {
    // Registered all the same, so the step's --diag still parses on its way to task_init.
    register_options(sp, false);
    return remote_failure(cfg.error());
  }
  g.cfg = *cfg;
  return register_options(sp, true) ? 0 : -1;
}

// Callbacks can fire twice: the argument is kept and parsed from scratch, here only to
// fail early; init_post_opt merges it with GPUDIAG_DIAG.
int diag_option(const char* optarg) {
  g.diag_arg = optarg ? optarg : "";
  auto parsed = parse_diag_list(*g.diag_arg);
  if (!parsed) return remote_failure(parsed.error());
  return 0;
}

int init_post_opt(spank_t sp) {
  SpankEnv env(sp);
  const std::string from_env = env.get("GPUDIAG_DIAG").value_or("");
  auto merged = merge_diag_options(from_env, g.diag_arg);
  if (!merged) return remote_failure(merged.error());
  g.diag = *merged;
  return 0;
}

int user_init(spank_t sp) {
  guarded("user init", 0, [&] {
    // Before the tasks fork: they share the refusal flag with this process.
    const bool can_end = slurm_compat::kill_job_step_symbol() != nullptr;
    g.killer.prepare(can_end ? &slurm_compat::end_step : nullptr, kSrunGrace_s);
    return 0;
  });
  // Once per step and node, before the tasks fork: whom slurmstepd's signals reach.
  guarded("user init", 0, [&] {
    const auto verdict = step_signal_reach(slurm_compat::proctrack_type());
    g.forward_stepd_signals = verdict.reach == StepSignalReach::kRelayOnly;
    if (verdict.notice) slurm_info("%s", verdict.notice->c_str());
    return 0;
  });
  // The rendezvous check only gathers here; its verdict fails the tasks in task_init.
  guarded("user init", 0, [&] {
    check_rendezvous(sp);
    return 0;
  });
  // Before the tasks fork, so that they inherit its socket. Without it the tasks relay
  // themselves, as before (on_error 0).
  guarded("user init", 0, [&] {
    open_node_relay(sp);
    return 0;
  });
  // NCCL defaults are a convenience: never fail a job over them (on_error 0).
  const int rc = guarded("user init", 0, [&] {
    // Once per step and node, before the tasks fork: they inherit the result.
    RootedFs fs("/");
    g.nccl_env = nccl_defaults(g.cfg.plugin, discover_ib(fs), g.cfg.ib);
    return 0;
  });
  // Last: the plans read what the blocks above found. Without them each task plans itself.
  // On a thread of its own, joined here: the plans, and all the work that makes them, stay
  // off slurmstepd's main heap (detached_thread.h). This thread waits meanwhile, so the
  // SPANK calls in prepare_tasks meet nothing of slurmstepd's that main would not.
  guarded("user init", 0, [&] {
    // No thread for a step with nothing to plan (the batch step, a refused one).
    if (!tasks_to_prepare(sp)) return 0;
    std::exception_ptr error;
    const auto prepare = [&] {
      try {
        prepare_tasks(sp);
      } catch (...) {
        error = std::current_exception();
      }
    };
    if (!run_in_own_arena(prepare)) prepare();
    if (error) std::rethrow_exception(error);
    return 0;
  });
  return rc;
}

namespace {

// Everything gpudiag decides for the task: 0 lets it start the program.
GPUDIAG_TASK_PATH int check_and_plan_task(spank_t sp) {
  std::uint32_t job = 0, step = 0, nnodes = 1, nodeid = 0, local_count = 1, total = 1, global_id = 0;
  int local_id = 0;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step)) return 0;
  // A batch script still runs: each srun in it then fails with the reason.
  if (!step_runs_tasks(step)) return 0;
  if (!g.remote_error.empty()) {
    // Every task fails; the first of each node says why (slurmstepd adds a line per task).
    item(sp, S_TASK_ID, local_id);
    return refuse_task(g.remote_error, local_id == 0);
  }
  item(sp, S_JOB_NNODES, nnodes);
  item(sp, S_JOB_NODEID, nodeid);
  item(sp, S_JOB_LOCAL_TASK_COUNT, local_count);
  item(sp, S_JOB_TOTAL_TASK_COUNT, total);
  item(sp, S_TASK_GLOBAL_ID, global_id);
  item(sp, S_TASK_ID, local_id);
  {
    TaskIds seen;
    seen.job_id = job;
    seen.step_id = step;
    seen.rank = static_cast<int>(global_id);
    seen.world_size = static_cast<int>(total);
    seen.local_rank = local_id;
    seen.local_world_size = static_cast<int>(local_count);
    seen.node_rank = static_cast<int>(nodeid);
    seen.num_nodes = static_cast<int>(nnodes);
    if (use_prepared(sp, seen)) return 0;
  }

  SpankEnv env(sp);
  // This process is the forked task, with its own copy of g, used once: moved, not copied.
  // A copy writes fresh heap pages, and each one a fork has shared costs a page fault and
  // a page copy, in every task of every step (BENCHMARKS "A launch as cheap as pyxis").
  StepInputs in{std::move(g.cfg), std::move(g.diag)};
  in.env = read_task_env(env);
  in.nccl_env = std::move(g.nccl_env);
  in.cwd = current_dir();
  in.hostname = hostname();
  in.uid = ::getuid();
  in.user_env = &env;
  TaskIds& t = in.ids;
  t.job_id = job;
  t.step_id = step;
  t.rank = static_cast<int>(global_id);
  t.world_size = static_cast<int>(total);
  t.local_rank = local_id;
  t.local_world_size = static_cast<int>(local_count);
  t.node_rank = static_cast<int>(nodeid);
  t.num_nodes = static_cast<int>(nnodes);
  t.master_addr = g.master_addr.empty() ? slurm_compat::first_host(master_nodelist(in.env)) : g.master_addr;
  in.rendezvous = std::move(g.rendezvous);
  // task_init runs as the user: the directory is the user's, and a place the user may
  // not write is refused by the kernel, not by us as root.
  std::string dir = wanted_diag_dir(in);
  if (!dir.empty()) {
    // rewrites dir to the resolved path
    in.dir_problem = claim_diag_dir(dir, in.uid, group_ids(in.cfg.plugin.diag_dir_trusted_groups));
    in.claimed_dir = dir;
  }

  const StepPlan plan = plan_step(in);
  if (plan.fail) return refuse_task(*plan.fail, true);
  for (const auto& line : plan.notices) slurm_error("%s", line.c_str());
  apply_env(env, plan.env);
  if (plan.preflight) {
    g.under_preflight = true;
    bool said_why = false;
    bool passed = preflight_passes(in.cfg, env, plan, local_id, said_why);
    // From here a task may wait for other nodes (the fabric test, the barrier): a refusal
    // on this node then ends the step at once, not when this task gives up.
    if (waits_for_other_nodes(passed, env.get(fabric::kFabricEnv).has_value()) && !g.killer.mark_running(local_id))
      return refuse_task("", false, false);
    // --diag=fabric: even a node that failed its preflight takes part, or the others wait for it.
    const auto fabric = fabric_part(env, in.cfg, fabric_facts(sp, plan, t, in.rendezvous));
    if (!fabric.say.empty()) slurm_error("%s", fabric.say.c_str());
    passed = passed && fabric.pass;
    const BarrierAnswer answer = barrier_lets_go(env, plan, t.rank, local_id, passed);
    if (answer != BarrierAnswer::kStart) {
      // The hint where the step cannot be ended comes with the node's failure, once per
      // node: from a task that said a problem, or task 0 (a failed fabric test).
      const bool hint = (said_why || (local_id == 0 && !passed)) && g.killer.first_to_say(kRefusalHintKey, local_id);
      const int rc = refuse_task("", hint, answer == BarrierAnswer::kRefuse);
      if (hint) g.killer.done_saying();
      return rc;
    }
  }
  start_output_relay(plan, t.rank, local_id);
  return 0;
}

}  // namespace

GPUDIAG_TASK_PATH int task_init(spank_t sp) {
  int rc = 0;
  try {
    rc = check_and_plan_task(sp);
  } catch (...) {
    // Under the preflight a task starts only on srun's verdict: an error there refuses it,
    // also one before the preflight began (adversary review 15). Elsewhere gpudiag's
    // error never fails a job (guarded() says it and lets it run).
    if (g.under_preflight || step_holds_a_barrier(sp)) {
      slurm_error("gpudiag: preflight: an internal error before srun's verdict: not starting the program");
      return refuse_task("", false);
    }
    if (!g.killer.mark_running(local_task_id(sp))) return refuse_task("", false, false);
    throw;
  }
  if (rc != 0) return rc;
  // A task of this node was refused meanwhile: the step is ending, and this task would
  // only wait for the refused rank (step_killer.h). The refused task said why.
  if (!g.killer.mark_running(local_task_id(sp))) return refuse_task("", false, false);
  return 0;
}

// In slurmstepd, for each task once all are forked and before any may run (mgr.c,
// _fork_all_tasks): the relay thread starts at the first.
int task_post_fork(spank_t) {
  if (!g.node_relay) return 0;
  if (auto err = g.node_relay->start_thread()) slurm_info("%s", node_relay_not_started(*err).c_str());
  return 0;
}

// As each task is reaped: a task gpudiag refused ends the step everywhere.
int task_exit(spank_t sp) {
  std::uint32_t job = 0, step = 0, total = 1;
  if (!item(sp, S_JOB_ID, job) || !item(sp, S_JOB_STEPID, step) || !step_runs_tasks(step)) return 0;
  const int local_id = local_task_id(sp);
  if (g.node_relay && local_id >= 0) g.node_relay->task_exited(local_id);
  g.killer.task_reaped(local_id);
  // One task: it is the step, and it has already ended.
  if (item(sp, S_JOB_TOTAL_TASK_COUNT, total) && total <= 1) return 0;
  // Only while a task of this node runs the program; else at exit (step_killer.h). The
  // error goes to slurmd's log: the user's terminal already has the refusal.
  if (auto err = g.killer.end_if_refused(job, step, hostname(), StepKiller::Moment::kTaskReaped))
    slurm_error("%s", err->c_str());
  return 0;
}

// After the step's output is out: a refusal ends the step now that it has reached srun
// (step_killer.h), and the relay thread ends (node_relay.h).
int exit(spank_t sp) {
  std::uint32_t job = 0, step = 0, nnodes = 2;
  // A step of one node has ended with this node's tasks: nothing is left to end.
  if (item(sp, S_JOB_ID, job) && item(sp, S_JOB_STEPID, step) && step_runs_tasks(step) &&
      !(item(sp, S_JOB_NNODES, nnodes) && nnodes <= 1)) {
    if (auto err = g.killer.end_if_refused(job, step, hostname(), StepKiller::Moment::kNodeDone))
      slurm_error("%s", err->c_str());
  }
  if (!g.node_relay) return 0;
  g.node_relay->stop();
  delete g.node_relay;
  g.node_relay = nullptr;
  return 0;
}

}  // namespace gpudiag::in_slurmstepd
