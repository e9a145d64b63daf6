#pragma once
// The ibcounters check: InfiniBand port error counters compared with the last run.
// Their absolute values mean little (they count since the last reset); growth since
// the last run beyond ibcounters.max_growth is a WARNING, and link_downed growth is a
// flap (CRITICAL above ibcounters.flap_critical).
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "healthcheck/checks/check_context.h"
#include "healthcheck/report/report.h"

namespace gpudiag {

struct IbPortCounters {
  std::string hca;
  int port = 0;
  std::vector<std::pair<std::string, unsigned long long>> values;  // every counter read, by name
  // mlx5's hw_counters/ (RDMA transport: retries, timeouts, out of sequence): exported,
  // not judged, since how fast they may grow depends on the workload.
  std::vector<std::pair<std::string, unsigned long long>> hw_values;
  std::string error;  // the counters directory could not be listed
  std::string subject() const { return hca + ":" + std::to_string(port); }
};

struct IbCounterFacts {
  bool class_present = false;
  std::vector<IbPortCounters> ports;  // of the selected HCAs only
  std::string state_note;
  // Whether this run's counts are kept for the next one (not under --fs-root without
  // --state-dir): only then is a first read a "baseline".
  bool state_kept = true;
};

struct IbCounterOutcome {
  CheckResult result;
  nlohmann::json state;  // {"ports": {"mlx5_0:1": {"symbol_error": 0, ...}}}
};

// Pure. `previous`: what the last run stored, null if none.
IbCounterOutcome evaluate_ibcounters(const IbCounterFacts& facts, const nlohmann::json& previous,
                                     const IbCounterSettings& cfg);
IbCounterFacts read_ibcounter_facts(const CheckContext& ctx);
CheckResult run_ibcounters_check(const CheckContext& ctx);

}  // namespace gpudiag
