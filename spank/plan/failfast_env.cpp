#include "spank/plan/failfast_env.h"

namespace gpudiag {

std::string old_torch_name(const std::string& name) {
  // The full list of renames in pytorch#114077 (ProcessGroupNCCL.hpp, getCvar*).
  static const std::pair<const char*, const char*> kRenamed[] = {
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"},
      {"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT"},
      {"TORCH_NCCL_DESYNC_DEBUG", "NCCL_DESYNC_DEBUG"},
      {"TORCH_NCCL_ENABLE_TIMING", "NCCL_ENABLE_TIMING"},
      {"TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", "NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK"},
  };
  for (const auto& [now, before] : kRenamed)
    if (name == now) return before;
  return "";
}

namespace {

// Adds the old name beside every renamed variable. A user value under either name
// goes to both, so that old and new torch see the same setting (apply_env then keeps
// the one the user set and writes the other).
EnvList with_old_names(const EnvList& env, EnvTarget* task_env) {
  EnvList out;
  for (const auto& [name, value] : env) {
    const std::string old = old_torch_name(name);
    if (old.empty()) {
      out.emplace_back(name, value);
      continue;
    }
    std::string v = value;
    if (task_env) {
      if (auto u = user_value(*task_env, name)) v = *u;
      else if (auto o = user_value(*task_env, old)) v = *o;
    }
    // The user's value is too long to read: it stays under its own name, and the other
    // name gets nothing rather than the stand-in (adversary review 5).
    if (v == kUnreadableValue) continue;
    out.emplace_back(name, v);
    out.emplace_back(old, v);
  }
  return out;
}

}  // namespace

EnvList failfast_env(const FailFastSettings& f, const std::string& diag_dir, bool fr_pipe, EnvTarget* task_env) {
  EnvList env;
  if (!f.enabled) return env;
  env.emplace_back("TORCH_NCCL_ASYNC_ERROR_HANDLING", std::to_string(f.async_error_handling));
  env.emplace_back("TORCH_NCCL_DUMP_ON_TIMEOUT", f.dump_on_timeout ? "1" : "0");
  if (f.flight_recorder_entries > 0) {
    // The buffer has had two names; torch reads whichever it knows.
    env.emplace_back("TORCH_FR_BUFFER_SIZE", std::to_string(f.flight_recorder_entries));
    env.emplace_back("TORCH_NCCL_TRACE_BUFFER_SIZE", std::to_string(f.flight_recorder_entries));
  }
  if (!diag_dir.empty()) {
    // torch appends the rank to these stems.
    const std::string dump = diag_dir + "/fr_trace.rank";
    env.emplace_back("TORCH_FR_DUMP_TEMP_FILE", dump);
    env.emplace_back("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dump);
    if (fr_pipe) env.emplace_back("TORCH_NCCL_DEBUG_INFO_PIPE_FILE", diag_dir + "/fr_pipe.rank");
  }
  if (f.heartbeat_timeout_s > 0)
    env.emplace_back("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", std::to_string(f.heartbeat_timeout_s));
  if (f.rdzv_join_timeout_s > 0) env.emplace_back("PET_RDZV_CONF", "join_timeout=" + std::to_string(f.rdzv_join_timeout_s));
  if (f.nccl_ib_timeout > 0) env.emplace_back("NCCL_IB_TIMEOUT", std::to_string(f.nccl_ib_timeout));
  if (f.nccl_ib_retry_cnt > 0) env.emplace_back("NCCL_IB_RETRY_CNT", std::to_string(f.nccl_ib_retry_cnt));
  if (f.deepspeed_timeout_min > 0) env.emplace_back("DEEPSPEED_TIMEOUT", std::to_string(f.deepspeed_timeout_min));
  return with_old_names(env, task_env);
}

}  // namespace gpudiag
