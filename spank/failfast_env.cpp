#include "spank/failfast_env.h"

namespace gpudiag {

EnvList failfast_env(const FailFastSettings& f, const std::string& diag_dir, bool fr_pipe) {
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
  return env;
}

}  // namespace gpudiag
