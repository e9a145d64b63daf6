#pragma once
// The GPU probe's JSON, defined once: gpudiag-gpu-probe writes it (probe/) and
// gpudiag-health reads it (healthcheck/), so a key cannot drift between the two sides.
//
// Every answer is one object on the probe's stdout. A section that could not run says
// why in {"error": {"kind", "message", "hint"?}}; one that does not apply (MIG) says so
// in {"not_applicable": "..."}; the probe adds {"probe": SECTION} last. The probe may be
// another version than the checker, or broken: a field of the wrong type reads as
// absent, never as an exception (nlohmann's value() and get() throw on a type mismatch,
// which would turn a bad answer into an internal error).
#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <type_traits>

namespace gpudiag {
namespace probe_json {

// `pair` (the fabric test's NCCL pair): rank 1 takes rank 0's unique id from this
// variable. The id holds rank 0's bootstrap address and magic, so it never goes on a
// command line (/proc/PID/cmdline is every user's to read; environ only its owner's).
inline constexpr char kNcclPairIdEnv[] = "GPUDIAG_NCCL_PAIR_ID";

// Keys any section may carry.
inline constexpr char kError[] = "error";
inline constexpr char kKind[] = "kind";
inline constexpr char kMessage[] = "message";
inline constexpr char kHint[] = "hint";
inline constexpr char kSection[] = "probe";
inline constexpr char kNotApplicable[] = "not_applicable";
inline constexpr char kGpus[] = "gpus";  // one object per GPU
inline constexpr char kGpuName[] = "name";

// Error kinds the checker judges: a failed call on a GPU that exists, and a driver that
// is installed but broken, are faults of the node (CRITICAL); the other kinds ("library",
// "driver", "no_gpu", "busy", "incompatible") are conditions of the install or the run.
inline constexpr char kKindGpu[] = "gpu";
inline constexpr char kKindDriverFault[] = "driver_fault";

// The allreduce section: {"nccl_version", "gpus", "results": [{"bytes", "iters",
// "warmup", "time_us", "algbw_gbps", "busbw_gbps"?, "correct", "mismatch"?}], ...}.
inline constexpr char kNcclVersion[] = "nccl_version";
inline constexpr char kResults[] = "results";
inline constexpr char kBytes[] = "bytes";
inline constexpr char kIters[] = "iters";
inline constexpr char kWarmup[] = "warmup";
inline constexpr char kTimeUs[] = "time_us";
inline constexpr char kAlgbw[] = "algbw_gbps";
inline constexpr char kBusbw[] = "busbw_gbps";
inline constexpr char kCorrect[] = "correct";
inline constexpr char kMismatch[] = "mismatch";

// The p2p section: NVML's P2P status matrices, one row per GPU in NVML order (-1: the
// query failed, the reason in "query_errors"), and with --bandwidth the timed copies:
// {"bandwidth": {"gpus", "bytes", "peer_access", "gbps", "missing_from_cuda"}}.
inline constexpr char kP2pRead[] = "read";
inline constexpr char kP2pWrite[] = "write";
inline constexpr char kP2pNvlink[] = "nvlink";
inline constexpr char kQueryErrors[] = "query_errors";
inline constexpr char kBandwidth[] = "bandwidth";
inline constexpr char kPeerAccess[] = "peer_access";
inline constexpr char kGbps[] = "gbps";

// The devices section: {"nvml_library", "driver_version", "gpus": [{"index", "name",
// "uuid", "pci_bus_id", "mig", "not_accessible"?, "errors": [...], "clocks_event_reasons",
// "temperature_c", "slowdown_temperature_c", "pcie_replay_count",
// "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows": {"correctable",
// "uncorrectable", "pending", "failure"}, "fabric": {"state", "status", "status_text"},
// "nvlink": [{"link", "active"}]}]}. A GPU CUDA cannot see is in "missing_from_cuda";
// one of CUDA's GPUs names its NVML row in "nvml_index" (null: none).
inline constexpr char kNvmlLibrary[] = "nvml_library";
inline constexpr char kDriverVersion[] = "driver_version";
inline constexpr char kIndex[] = "index";
inline constexpr char kUuid[] = "uuid";
inline constexpr char kPciBusId[] = "pci_bus_id";
inline constexpr char kMig[] = "mig";
inline constexpr char kNotAccessible[] = "not_accessible";
inline constexpr char kErrors[] = "errors";
inline constexpr char kClocksEventReasons[] = "clocks_event_reasons";
inline constexpr char kTemperatureC[] = "temperature_c";
inline constexpr char kSlowdownTemperatureC[] = "slowdown_temperature_c";
inline constexpr char kPcieReplayCount[] = "pcie_replay_count";
inline constexpr char kEccUncorrectedVolatile[] = "ecc_uncorrected_volatile";
inline constexpr char kRetiredPagesPending[] = "retired_pages_pending";
inline constexpr char kRemappedRows[] = "remapped_rows";
inline constexpr char kRowsCorrectable[] = "correctable";
inline constexpr char kRowsUncorrectable[] = "uncorrectable";
inline constexpr char kRowsPending[] = "pending";
inline constexpr char kRowsFailure[] = "failure";
inline constexpr char kFabric[] = "fabric";
inline constexpr char kFabricState[] = "state";
inline constexpr char kFabricStatus[] = "status";
inline constexpr char kFabricStatusText[] = "status_text";
inline constexpr char kNvlinks[] = "nvlink";
inline constexpr char kLink[] = "link";
inline constexpr char kLinkActive[] = "active";
inline constexpr char kMissingFromCuda[] = "missing_from_cuda";
inline constexpr char kNvmlIndex[] = "nvml_index";

}  // namespace probe_json

// A field of the probe's JSON, or nothing when it is absent or of another type.
template <class T>
std::optional<T> probe_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  const auto& v = *it;
  if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) return v.get<std::string>();
  } else {
    if (v.is_number_unsigned() || v.is_number_integer()) return v.get<T>();
  }
  return std::nullopt;
}

struct ProbeError {
  std::string kind, message, hint;  // "" where absent
};

// {"error": {"kind", "message", "hint"?}}: what the probe prints for a section that
// could not run.
nlohmann::json probe_error_json(const std::string& kind, const std::string& message, const std::string& hint = "");
// The answer's error when it has an "error" key (fields of the wrong type read as "").
std::optional<ProbeError> read_probe_error(const nlohmann::json& answer);

struct AllreduceRun {
  unsigned long long bytes = 0;  // per rank
  double time_us = 0;            // one call, the slowest rank
  bool correct = false;
  std::string mismatch;  // what was wrong, when not correct
};

// What the checker reads of an allreduce answer.
struct AllreduceAnswer {
  std::optional<std::string> not_applicable;
  std::optional<std::string> nccl_version;
  int ranks = 0;                          // GPUs in the all_reduce
  std::optional<std::string> model;       // the first GPU's name
  std::optional<AllreduceRun> first_run;  // nothing when missing or malformed
};
AllreduceAnswer read_allreduce_answer(const nlohmann::json& answer);

// One entry of "results", as the probe writes it; busbw only with more than one rank.
nlohmann::json allreduce_run_json(const AllreduceRun& run, int iters, int warmup, double algbw_gbps,
                                  std::optional<double> busbw_gbps);

}  // namespace gpudiag
