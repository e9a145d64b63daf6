#include "spank/plan/prepared_task.h"

#include <map>
#include <utility>

#include "spank/plan/diag_options.h"
#include "spank/plan/port_salt.h"
#include "util/task_path.h"
#include "util/visible_gpus.h"

namespace gpudiag {
namespace {

// The job's environment as the task would see it after apply_env: reads go to `real` and
// are kept (the first read of each name, before the plan set it), sets stay here.
class RecordingEnv : public EnvTarget {
 public:
  explicit RecordingEnv(EnvTarget& real) : real_(real) {}
  std::optional<std::string> get(const std::string& name) override {
    if (auto it = written_.find(name); it != written_.end()) return it->second;
    for (const auto& r : reads_)
      if (r.name == name) return r.value;
    auto value = real_.get(name);
    reads_.push_back({name, value});
    return value;
  }
  bool set(const std::string& name, const std::string& value) override {
    written_[name] = value;
    sets_.emplace_back(name, value);
    return true;
  }
  std::vector<EnvRead> take_reads() { return std::move(reads_); }
  EnvList take_sets() { return std::move(sets_); }

 private:
  EnvTarget& real_;
  std::map<std::string, std::string> written_;
  std::vector<EnvRead> reads_;
  EnvList sets_;
};

// Where SpankEnv reads a value in full (spank_access.cpp): a longer one reads as a
// stand-in, which the task would then have planned with.
GPUDIAG_TASK_PATH bool readable(std::string_view value) { return value.size() <= kMaxDiagListBytes; }

GPUDIAG_TASK_PATH bool same(const std::optional<std::string>& planned, const std::optional<std::string_view>& now) {
  if (!planned || !now) return !planned && !now;
  return readable(*now) && *planned == *now;
}

GPUDIAG_TASK_PATH bool same_ids(const TaskIds& a, const TaskIds& b) {
  return a.job_id == b.job_id && a.step_id == b.step_id && a.rank == b.rank && a.world_size == b.world_size &&
         a.local_rank == b.local_rank && a.local_world_size == b.local_world_size && a.node_rank == b.node_rank &&
         a.num_nodes == b.num_nodes;
}

}  // namespace

GPUDIAG_TASK_PATH std::optional<std::string_view> env_lookup(const char* const* env, std::string_view name) {
  if (!env) return std::nullopt;
  // A task looks up some 25 names in an environment of a hundred or more entries: compared
  // byte by byte up to the first difference, not measured whole (strlen) each time.
  for (const char* const* e = env; *e; ++e) {
    const char* entry = *e;
    std::size_t i = 0;
    while (i < name.size() && entry[i] != '\0' && entry[i] == name[i]) ++i;
    if (i == name.size() && entry[i] == '=') return std::string_view(entry + i + 1);
  }
  return std::nullopt;
}

std::optional<std::string> ReadOnceEnv::get(const std::string& name) {
  auto it = seen_.find(name);
  if (it == seen_.end()) it = seen_.emplace(name, real_.get(name)).first;
  return it->second;
}

std::optional<PreparedTask> prepare_task(StepInputs in, EnvTarget& env, bool master_addr_fixed) {
  // A dir to claim is the task's own work, as the user, in the task.
  if (!wanted_diag_dir(in).empty()) return std::nullopt;
  RecordingEnv recorded(env);
  in.user_env = &recorded;
  StepPlan plan = plan_step(in);
  if (plan.fail || plan.preflight || plan.hang.duration_s > 0 || !plan.diag_dir.empty()) return std::nullopt;
  apply_env(recorded, plan.env);
  PreparedTask p;
  p.ids = std::move(in.ids);
  p.env = std::move(in.env);
  p.hostname = std::move(in.hostname);
  p.master_addr_fixed = master_addr_fixed;
  p.reads = recorded.take_reads();
  p.sets = recorded.take_sets();
  p.plan = std::move(plan);
  p.plan.env = EnvList();  // `sets` is what the task applies; slurmstepd keeps one copy
  p.relay = plan_relay(p.plan, p.ids.rank, kPreparedStreams).relay;
  return p;
}

std::size_t prepared_bytes(const PreparedTask& p) {
  std::size_t n = sizeof p + p.hostname.size() + p.plan.host.size() + p.plan.tag_text.size() + p.handoff.size() +
                  (p.relay ? p.relay->tag.size() : 0);
  for (const auto* v : {&p.env.cuda_visible_devices, &p.env.step_nodelist, &p.env.job_nodelist, &p.env.submit_dir,
                        &p.env.labelio, &p.env.nodename, &p.env.port_salt})
    n += v->value_or("").size();
  for (const auto& r : p.reads) n += sizeof r + r.name.size() + r.value.value_or("").size();
  for (const auto& [name, value] : p.sets) n += 2 * sizeof(std::string) + name.size() + value.size();
  for (const auto& line : p.plan.notices) n += sizeof line + line.size();
  return n;
}

GPUDIAG_TASK_PATH bool task_may_use(const PreparedTask& p, const TaskView& t) {
  if (!t.env || !same_ids(p.ids, t.ids)) return false;
  // The task variables plan_step reads (read_task_env), each by what it decides there.
  const auto nodename = env_lookup(t.env, "SLURMD_NODENAME");
  if ((nodename && !readable(*nodename)) || short_host_of(nodename, t.hostname) != p.plan.host) return false;
  const auto cuda = env_lookup(t.env, "CUDA_VISIBLE_DEVICES");
  if ((cuda && !readable(*cuda)) ||
      count_visible_gpus(cuda).value_or(0) != count_visible_gpus(p.env.cuda_visible_devices).value_or(0))
    return false;
  const auto labelio = env_lookup(t.env, "SLURM_LABELIO");
  if ((labelio && !readable(*labelio)) || (labelio.value_or("") == "1") != (p.env.labelio.value_or("") == "1"))
    return false;
  if (!same(p.env.port_salt, env_lookup(t.env, kPortSaltEnv))) return false;
  if (!p.master_addr_fixed && (!same(p.env.step_nodelist, env_lookup(t.env, "SLURM_STEP_NODELIST")) ||
                               !same(p.env.job_nodelist, env_lookup(t.env, "SLURM_JOB_NODELIST"))))
    return false;
  // SLURM_SUBMIT_DIR, the cwd and the uid decide only the diag dir and the watchdog's
  // state, which a prepared plan has none of.
  for (const auto& r : p.reads)
    if (!same(r.value, env_lookup(t.env, r.name))) return false;
  return true;
}

}  // namespace gpudiag
