// The step plan: what the plugin sets and starts in a task, from the site config, the
// two --diag lists, the task's variables and its Slurm ids, all of them the user's or
// the admin's text. Lines of the input:
//   0 GPUDIAG_DIAG   1 --diag's argument   2 CUDA_VISIBLE_DEVICES   3 SLURM_SUBMIT_DIR
//   4 SLURMD_NODENAME and the host name    5 SLURM_LABELIO          6 bytes: ids and switches
//   the rest: the site config (YAML); the built-in defaults when it does not parse.
// Byte 9 of the switches drives the rendezvous: 1 MASTER_ADDR by choose_master_addr
// from Slurm's address (line 2) and hostname (line 3) for NodeName line 4; 2 a user's
// MASTER_ADDR (line 5); 4 the first node; bits 4-5 what the check found for each target.
// Byte 10 makes a forked task differ from what user_init saw (prepared_task.h): where the
// task may take user_init's plan, that plan is the one it would have made itself.
#include <cstring>
#include <map>
#include <string>

#include "fuzz/fuzz_input.h"
#include "config/config.h"
#include "config/config_file.h"
#include "tests/unit/spank/plan/plan_env.h"
#include "spank/plan/env_writer.h"
#include "spank/plan/port_salt.h"
#include "spank/plan/prepared_task.h"
#include "spank/plan/step_plan.h"
#include "util/visible_gpus.h"
#include "spank/preflight/rendezvous_check.h"
#include "spank/relay/node_relay.h"

namespace {

std::optional<std::string> field(const std::vector<std::string_view>& f, std::size_t i) {
  if (i >= f.size()) return std::nullopt;
  return std::string(f[i]);
}

// A small number from byte `i` of the switches, so ids stay in reach of each other.
unsigned byte_at(std::string_view s, std::size_t i) { return i < s.size() ? static_cast<unsigned char>(s[i]) : 0; }

// A problem that must fail the step: a user's value, or any problem under the preflight.
bool rendezvous_must_fail(const gpudiag::StepInputs& in) {
  const bool preflight = in.diag.preflight.value_or(in.cfg.plugin.preflight.enabled);
  for (const auto& f : in.rendezvous) {
    const bool problem = f.timed_out || !f.resolve_error.empty() || !f.route_error.empty() || !f.bind_error.empty();
    if (problem && (preflight || f.target.user_set)) return true;
  }
  return false;
}

void check_plan(const gpudiag::StepInputs& in, const gpudiag::StepPlan& plan) {
  if (gpudiag::step_runs_tasks(in.ids.step_id) && rendezvous_must_fail(in)) GPUDIAG_FUZZ_CHECK(plan.fail);
  if (plan.fail) {
    GPUDIAG_FUZZ_CHECK(plan.fail->rfind("gpudiag: ", 0) == 0);
    GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(*plan.fail));  // one line, no escape sequence
    GPUDIAG_FUZZ_CHECK(plan.env.empty());
    return;
  }
  for (const auto& n : plan.notices) GPUDIAG_FUZZ_CHECK(n.rfind("gpudiag: ", 0) == 0);
  if (in.ids.local_rank != 0) GPUDIAG_FUZZ_CHECK(plan.notices.empty());
  // What reaches the task's environment is one printable line, by apply_env's own rule.
  for (const auto& [name, value] : plan.env) {
    GPUDIAG_FUZZ_CHECK(!name.empty() && name.find('=') == std::string::npos);
    GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(value));
  }
  if (!gpudiag::step_runs_tasks(in.ids.step_id)) {
    GPUDIAG_FUZZ_CHECK(plan.env.empty() && !plan.preflight && !plan.tag && plan.hang.duration_s == 0);
    return;
  }
  // A taken or missing diag dir never switches the watchdog off: its report goes to
  // stderr then, so the watchdog is on exactly when a hang duration is set.
  GPUDIAG_FUZZ_CHECK((plan.hang.duration_s > 0) == (gpudiag::hang_seconds(in.diag, in.cfg.plugin) > 0));
  if (plan.hang.duration_s > 0) GPUDIAG_FUZZ_CHECK(plan.hang.diag_dir == plan.diag_dir);
  if (plan.diag_dir.empty()) GPUDIAG_FUZZ_CHECK(gpudiag::wanted_diag_dir(in).empty() || in.dir_problem);
  else GPUDIAG_FUZZ_CHECK(plan.diag_dir == gpudiag::wanted_diag_dir(in) && !in.dir_problem);

  for (int bits = 0; bits < 16; ++bits) {
    gpudiag::StreamFacts s{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0};
    auto choice = gpudiag::plan_relay(plan, in.ids.rank, s);
    if (choice.notice) GPUDIAG_FUZZ_CHECK(choice.notice->rfind("gpudiag: ", 0) == 0 && !choice.relay);
    if (!choice.relay) continue;
    GPUDIAG_FUZZ_CHECK(choice.relay->out || choice.relay->err);
    if (choice.relay->tag_out) GPUDIAG_FUZZ_CHECK(plan.tag && s.out_forwarded && choice.relay->out);
    if (choice.relay->tag_err) GPUDIAG_FUZZ_CHECK(plan.tag && s.err_forwarded && choice.relay->err);
  }
}

// The job's or a task's environment, as spank_getenv and S_JOB_ENV see it: the unit
// tests' own (one definition).
using gpudiag::test::MapEnv;

void put(MapEnv& env, const char* name, const std::optional<std::string>& value) {
  if (value) env.vars[name] = *value;
  else env.vars.erase(name);
}

// The task variables of `in` in its environment, besides the user's own.
void put_task_env(MapEnv& env, const gpudiag::StepInputs& in) {
  put(env, "CUDA_VISIBLE_DEVICES", in.env.cuda_visible_devices);
  put(env, "SLURM_STEP_NODELIST", in.env.step_nodelist);
  put(env, "SLURM_SUBMIT_DIR", in.env.submit_dir);
  put(env, "SLURM_LABELIO", in.env.labelio);
  put(env, "SLURMD_NODENAME", in.env.nodename);
  put(env, gpudiag::kPortSaltEnv, in.env.port_salt);
}

// What an environment (a C string per variable) can hold of a value: up to its first NUL.
// The task reads its variables through spank_getenv, so a NUL inside one cannot reach the
// plan; a fuzzed StepInputs could otherwise differ from the environment array it stands for.
void as_c_strings(gpudiag::StepInputs& in) {
  auto cut = [](std::optional<std::string>& v) {
    if (v) v->resize(std::strlen(v->c_str()));
  };
  for (auto* v : {&in.env.cuda_visible_devices, &in.env.step_nodelist, &in.env.job_nodelist, &in.env.submit_dir,
                  &in.env.labelio, &in.env.nodename, &in.env.port_salt})
    cut(*v);
  in.hostname.resize(std::strlen(in.hostname.c_str()));
}
void as_c_strings(MapEnv& env) {
  for (auto& [name, value] : env.vars) value.resize(std::strlen(value.c_str()));
}

void check_prepared(gpudiag::StepInputs node, unsigned diff, const std::vector<std::string_view>& lines) {
  as_c_strings(node);
  MapEnv job;
  job.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "2";
  if (diff & 64) job.vars["MASTER_PORT"] = field(lines, 1).value_or("");
  node.env.step_nodelist = "n[0-3]";
  put_task_env(job, node);
  as_c_strings(job);
  const auto before = job.vars;
  const bool fixed = (diff & 128) != 0;
  auto p = gpudiag::prepare_task(node, job, fixed);
  GPUDIAG_FUZZ_CHECK(job.vars == before);  // user_init plans without writing
  if (!p) return;
  GPUDIAG_FUZZ_CHECK(!p->plan.fail && p->plan.diag_dir.empty() && !p->plan.preflight && p->plan.hang.duration_s == 0);

  gpudiag::StepInputs task = node;
  MapEnv env = job;
  if (diff & 1) task.env.nodename = field(lines, 5);
  if (diff & 2) task.env.cuda_visible_devices = field(lines, 3);
  if (diff & 4) task.env.labelio = field(lines, 5);
  if (diff & 8) task.env.port_salt = field(lines, 1);
  if (diff & 16) env.vars["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = field(lines, 2).value_or("");
  if (diff & 32) task.hostname = field(lines, 3).value_or("");
  if (diff & 256) {
    task.env.step_nodelist = "m[0-3]";
    if (!fixed) task.ids.master_addr += "m";  // first_host of the other nodelist
  }
  if (diff & 512) task.env.submit_dir = field(lines, 2);
  if (diff & 1024) task.cwd = "/elsewhere";
  as_c_strings(task);
  put_task_env(env, task);
  as_c_strings(env);
  const gpudiag::test::EnvArray array(env.vars);
  gpudiag::TaskView view;
  view.ids = task.ids;
  view.env = array.ptrs.data();
  view.hostname = task.hostname;
  if (!gpudiag::task_may_use(*p, view)) return;

  // What the task would have done itself.
  task.user_env = &env;
  const gpudiag::StepPlan own = gpudiag::plan_step(task);
  GPUDIAG_FUZZ_CHECK(!own.fail);
  GPUDIAG_FUZZ_CHECK(own.notices == p->plan.notices && own.host == p->plan.host && own.tag == p->plan.tag &&
                     own.tag_text == p->plan.tag_text && own.diag_dir.empty() && !own.preflight &&
                     own.hang.duration_s == 0 && own.hang_asked == p->plan.hang_asked);
  // The relay chosen ahead for the usual streams (kPreparedStreams), and the handoff
  // user_init makes for it, are what the task would choose and encode itself (9405fe3).
  const auto own_relay = gpudiag::plan_relay(own, task.ids.rank, gpudiag::kPreparedStreams);
  GPUDIAG_FUZZ_CHECK(!own_relay.notice && own_relay.relay.has_value() == p->relay.has_value());
  if (own_relay.relay) {
    const auto& a = *own_relay.relay;
    const auto& b = *p->relay;
    GPUDIAG_FUZZ_CHECK(a.tag == b.tag && a.out == b.out && a.err == b.err && a.tag_out == b.tag_out &&
                       a.tag_err == b.tag_err && a.max_line == b.max_line && b.hang.duration_s == 0);
    GPUDIAG_FUZZ_CHECK(gpudiag::handoff_message(a, task.ids.local_rank) ==
                       gpudiag::handoff_message(b, p->ids.local_rank));
  }
  MapEnv applied = env;
  gpudiag::apply_env(applied, own.env);
  for (const auto& [name, value] : p->sets) env.vars[name] = value;
  GPUDIAG_FUZZ_CHECK(applied.vars == env.vars);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto lines = gpudiag::fuzz::split(text, '\n');
  const std::string_view bits = lines.size() > 6 ? lines[6] : std::string_view();
  const unsigned flags = byte_at(bits, 0);

  gpudiag::StepInputs in;
  std::size_t config_at = 0;
  for (std::size_t i = 0; i < 7 && i < lines.size(); ++i) config_at += lines[i].size() + 1;
  if (config_at < text.size()) {
    auto cfg = gpudiag::parse_config(text.substr(config_at), "fuzz.yaml");
    if (cfg) in.cfg = *cfg;
  }

  const std::string from_env = field(lines, 0).value_or("");
  const std::optional<std::string> option = (flags & 1) ? field(lines, 1).value_or("") : std::optional<std::string>();
  auto merged = gpudiag::merge_diag_options(from_env, option);
  if (!merged) {
    GPUDIAG_FUZZ_CHECK(merged.error().rfind("gpudiag: ", 0) == 0);
    return 0;
  }
  in.diag = *merged;

  in.env.cuda_visible_devices = (flags & 2) ? field(lines, 2) : std::nullopt;
  if (auto n = gpudiag::count_visible_gpus(in.env.cuda_visible_devices))
    GPUDIAG_FUZZ_CHECK(*n >= 0 && static_cast<std::size_t>(*n) <= in.env.cuda_visible_devices->size());
  in.env.submit_dir = (flags & 4) ? field(lines, 3) : std::nullopt;
  in.env.nodename = (flags & 8) ? field(lines, 4) : std::nullopt;
  in.env.labelio = (flags & 16) ? field(lines, 5) : std::nullopt;
  in.hostname = field(lines, 4).value_or("");
  in.cwd = (flags & 32) ? "" : "/home/u";
  in.ids.master_addr = (flags & 64) ? field(lines, 4).value_or("") : "";

  const unsigned steps[] = {0, 1, 0xfffffffa, 0xfffffffb, 0xfffffffc, 0xfffffffe, 4294967295u, 7};
  in.ids.job_id = byte_at(bits, 1) * 65537u;
  in.ids.step_id = steps[byte_at(bits, 2) % 8];
  in.ids.world_size = 1 + static_cast<int>(byte_at(bits, 3));
  in.ids.rank = static_cast<int>(byte_at(bits, 4)) % in.ids.world_size;
  in.ids.local_world_size = 1 + static_cast<int>(byte_at(bits, 5) % 8);
  in.ids.local_rank = in.ids.rank % in.ids.local_world_size;
  in.ids.num_nodes = 1 + static_cast<int>(byte_at(bits, 6) % 16);
  in.ids.node_rank = in.ids.rank % in.ids.num_nodes;
  in.uid = byte_at(bits, 7) * 1000u;
  if (flags & 128) in.nccl_env = {{"NCCL_IB_HCA", field(lines, 2).value_or("")}};

  const unsigned rdzv = byte_at(bits, 9);
  if (rdzv & 1) {
    const gpudiag::SlurmNodeAddr slurm{field(lines, 2).value_or(""), field(lines, 3).value_or("")};
    const std::string name = field(lines, 4).value_or("");
    in.ids.master_addr = gpudiag::choose_master_addr(in.cfg.plugin.master_addr, name, slurm);
    // The NodeName, or one of Slurm's answers, and then only one apply_env would take.
    GPUDIAG_FUZZ_CHECK(in.ids.master_addr == name || in.ids.master_addr == slurm.address ||
                       in.ids.master_addr == slurm.hostname);
    if (in.ids.master_addr != name) GPUDIAG_FUZZ_CHECK(gpudiag::safe_env_value(in.ids.master_addr));
  }
  gpudiag::EnvList user;
  if (rdzv & 2) user.emplace_back("MASTER_ADDR", field(lines, 5).value_or(""));
  const auto planned = gpudiag::planned_rendezvous_env(in.cfg.plugin, in.ids);
  for (const auto& t : gpudiag::rendezvous_targets(user, planned, (rdzv & 4) != 0)) {
    GPUDIAG_FUZZ_CHECK(!t.host.empty() && t.port >= 0 && t.port <= 65535);
    if (t.bind_here) GPUDIAG_FUZZ_CHECK(!t.user_set && t.port > 0);
    gpudiag::RendezvousFacts f;
    f.target = t;
    switch ((rdzv >> 4) % 4) {
      case 1: f.resolve_error = "Name or service not known"; break;
      case 2: f.timed_out = true; break;
      case 3:  // gather_rendezvous binds only where the target says so
        f.addresses = {"10.0.0.1"};
        if (t.bind_here) f.bind_error = "Address already in use";
        break;
      default: f.addresses = {"10.0.0.1"}; break;
    }
    in.rendezvous.push_back(f);
  }

  const std::string wanted = gpudiag::wanted_diag_dir(in);
  const unsigned problem = byte_at(bits, 8) % 5;  // none, or one of the 4 kinds
  if (!wanted.empty() && problem > 0)
    in.dir_problem = gpudiag::DiagDirProblem{static_cast<gpudiag::DiagDirProblem::Kind>(problem - 1),
                                             "the diag dir " + wanted + " is unusable"};
  check_plan(in, gpudiag::plan_step(in));
  check_prepared(in, byte_at(bits, 10) | (byte_at(bits, 11) << 8), lines);
  return 0;
}
