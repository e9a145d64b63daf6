#include "healthcheck/checks/check_nccl.h"

#include <fmt/format.h>

#include "healthcheck/checks/bandwidth_rules.h"
#include "healthcheck/checks/cuda_nvml_join.h"
#include "healthcheck/checks/gpu_probe.h"
#include "probe/probe_json.h"
#include "util/bus_bandwidth.h"
#include "util/duration.h"

namespace gpudiag {

CheckResult evaluate_nccl(const nlohmann::json& data, const NcclCheckSettings& s, const GpuExpect& expect) {
  CheckResult out;
  out.name = "nccl";
  const AllreduceAnswer answer = read_allreduce_answer(data);
  if (const auto& na = answer.not_applicable) {
    out.add({"nccl", Status::ok, "the all_reduce test does not apply: " + *na, ""});
    out.summary = "not applicable: " + *na;
    return out;
  }
  const int ranks = answer.ranks;
  if (!answer.first_run || ranks == 0) {
    out.add({"probe", Status::unknown, "the GPU probe's all_reduce result is missing or malformed", "this is a gpudiag bug"});
    out.summary = "unreadable";
    return out;
  }
  const AllreduceRun& result = *answer.first_run;
  const auto bytes = result.bytes;
  const double seconds = result.time_us * 1e-6;
  const double algbw = algbw_gbps(static_cast<double>(bytes), seconds);
  const double busbw = allreduce_busbw_gbps(algbw, ranks);
  const std::string version = answer.nccl_version.value_or("?");
  const std::string model = answer.model.value_or("unknown");
  const std::string where = fmt::format("{} x {}", ranks, model);

  if (add_cuda_nvml_gaps(out, data) == 0 && expect.count && ranks < *expect.count)
    out.add({"ranks", Status::critical,
             fmt::format("all_reduce ran on {} GPU(s) where {} are expected (gpu.count)", ranks, *expect.count),
             "CUDA lists fewer GPUs than the node has: look for Xid errors in `dmesg` and compare `nvidia-smi -L`; "
             "reset the missing GPU or reboot"});

  if (!result.correct)
    out.add({"allreduce", Status::critical,
             fmt::format("all_reduce gave wrong results on {}: {}", where, result.mismatch.empty() ? "?" : result.mismatch),
             "a GPU or link corrupts data: run `dcgmi diag -r 3` and replace the GPU it names"});

  const BandwidthRule* rule = choose_bandwidth_rule(s.min_bandwidth, model, ranks);
  if (!rule) {
    out.add({"threshold", Status::ok,
             fmt::format("no nccl.min_bandwidth entry for {}: bandwidth is reported, not gated", where), ""});
  } else {
    const std::string src = fmt::format("nccl.min_bandwidth, config line {}", rule->line);
    bool gated = false;
    if (rule->busbw_gbps && ranks > 1) {
      gated = true;
      if (busbw < *rule->busbw_gbps)
        out.add({"busbw", Status::critical,
                 fmt::format("all_reduce busbw {:.1f} GB/s at {} on {}, below {:g} ({})", busbw, size_text(bytes), where,
                             *rule->busbw_gbps, src),
                 "a slow NVLink/NVSwitch or PCIe path: run the p2p check, look at `nvidia-smi nvlink -s` and "
                 "`nvidia-smi topo -m`, and check clocks and thermals"});
    }
    if (rule->algbw_gbps) {
      gated = true;
      if (algbw < *rule->algbw_gbps)
        out.add({"algbw", Status::critical,
                 fmt::format("all_reduce algbw {:.1f} GB/s at {} on {}, below {:g} ({})", algbw, size_text(bytes), where,
                             *rule->algbw_gbps, src),
                 "the GPUs or links are slower than expected: look at clocks, thermals and `nvidia-smi topo -m`"});
    }
    if (!gated)
      out.add({"threshold", Status::ok,
               fmt::format("the busbw threshold ({}) does not apply: busbw is undefined with one GPU; give algbw to gate "
                           "single-GPU nodes",
                           src),
               ""});
  }
  out.summary = ranks > 1 ? fmt::format("NCCL {}, {}: busbw {:.1f} GB/s, algbw {:.1f} GB/s at {}", version, where,
                                        busbw, algbw, size_text(bytes))
                          : fmt::format("NCCL {}, {}: algbw {:.1f} GB/s at {} (busbw is undefined with one GPU)",
                                        version, where, algbw, size_text(bytes));
  if (result.correct) out.summary += ", results correct";
  const std::vector<std::pair<std::string, std::string>> labels = {
      {"model", model}, {"gpus", std::to_string(ranks)}, {"bytes", std::to_string(bytes)}};
  out.metrics.push_back({"gpudiag_nccl_allreduce_algbw_gbytes_per_second",
                         "Measured NCCL all_reduce algorithm bandwidth (GB/s).", labels, algbw});
  if (ranks > 1)
    out.metrics.push_back({"gpudiag_nccl_allreduce_busbw_gbytes_per_second",
                           "Measured NCCL all_reduce bus bandwidth (GB/s, as nccl-tests).", labels, busbw});
  out.details = data;
  out.details[probe_json::kAlgbw] = algbw;
  out.details[probe_json::kBusbw] = ranks > 1 ? nlohmann::json(busbw) : nlohmann::json(nullptr);
  return out;
}

CheckResult run_nccl_check(const CheckContext& ctx) {
  const auto& s = ctx.cfg.nccl;
  ProbeOutcome probe = run_probe(ctx, "allreduce",
                                 {"--sizes", std::to_string(s.bytes), "--iters", std::to_string(s.iters), "--warmup",
                                  std::to_string(s.warmup)});
  if (!probe.ok()) {
    CheckResult out;
    out.name = "nccl";
    out.add(*probe.failure);
    out.summary = probe.failure->status == Status::ok ? "no GPUs expected" : "not measured";
    if (auto v = probe_field<std::string>(probe.data, probe_json::kNcclVersion)) out.summary += ", NCCL " + *v;
    return out;
  }
  return evaluate_nccl(probe.data, ctx.cfg.nccl, ctx.cfg.gpu);
}

}  // namespace gpudiag
