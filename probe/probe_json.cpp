#include "probe/probe_json.h"

namespace gpudiag {

nlohmann::json probe_error_json(const std::string& kind, const std::string& message, const std::string& hint) {
  nlohmann::json e = {{probe_json::kKind, kind}, {probe_json::kMessage, message}};
  if (!hint.empty()) e[probe_json::kHint] = hint;
  return {{probe_json::kError, e}};
}

std::optional<ProbeError> read_probe_error(const nlohmann::json& answer) {
  if (!answer.is_object() || !answer.contains(probe_json::kError)) return std::nullopt;
  const nlohmann::json& e = answer[probe_json::kError];
  return ProbeError{probe_field<std::string>(e, probe_json::kKind).value_or(""),
                    probe_field<std::string>(e, probe_json::kMessage).value_or(""),
                    probe_field<std::string>(e, probe_json::kHint).value_or("")};
}

AllreduceAnswer read_allreduce_answer(const nlohmann::json& answer) {
  using namespace probe_json;
  AllreduceAnswer out;
  out.not_applicable = probe_field<std::string>(answer, kNotApplicable);
  out.nccl_version = probe_field<std::string>(answer, kNcclVersion);
  if (!answer.is_object()) return out;
  if (auto g = answer.find(kGpus); g != answer.end() && g->is_array()) {
    out.ranks = static_cast<int>(g->size());
    if (!g->empty()) out.model = probe_field<std::string>((*g)[0], kGpuName);
  }
  auto results = answer.find(kResults);
  if (results == answer.end() || !results->is_array() || results->empty()) return out;
  const nlohmann::json& r = (*results)[0];
  if (!r.is_object()) return out;
  auto time_us = r.find(kTimeUs);
  auto bytes = probe_field<unsigned long long>(r, kBytes);
  if (time_us == r.end() || !time_us->is_number() || !bytes || !r[kBytes].is_number_unsigned()) return out;
  out.first_run = AllreduceRun{*bytes, time_us->get<double>(), probe_field<bool>(r, kCorrect).value_or(false),
                               probe_field<std::string>(r, kMismatch).value_or("")};
  return out;
}

nlohmann::json allreduce_run_json(const AllreduceRun& run, int iters, int warmup, double algbw_gbps,
                                  std::optional<double> busbw_gbps) {
  using namespace probe_json;
  nlohmann::json r = {{kBytes, run.bytes}, {kIters, iters},         {kWarmup, warmup},
                      {kTimeUs, run.time_us}, {kAlgbw, algbw_gbps}, {kCorrect, run.correct}};
  if (busbw_gbps) r[kBusbw] = *busbw_gbps;
  if (!run.mismatch.empty()) r[kMismatch] = run.mismatch;
  return r;
}

}  // namespace gpudiag
