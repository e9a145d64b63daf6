#include "healthcheck/checks/check_p2p.h"

#include <fmt/format.h>

#include "healthcheck/checks/cuda_nvml_join.h"
#include "healthcheck/checks/gpu_probe.h"
#include "healthcheck/checks/p2p_matrix.h"
#include "probe/probe_json.h"

namespace gpudiag {
namespace {

// A square matrix of ints, or nullopt when the probe's answer is not one.
std::optional<P2pMatrix> read_matrix(const nlohmann::json& data, const char* key, std::size_t n) {
  if (!data.contains(key) || !data[key].is_array() || data[key].size() != n) return std::nullopt;
  P2pMatrix m;
  for (const auto& row : data[key]) {
    if (!row.is_array() || row.size() != n) return std::nullopt;
    std::vector<int> r;
    for (const auto& v : row) r.push_back(v.is_number_integer() ? v.get<int>() : -1);
    m.push_back(std::move(r));
  }
  return m;
}

std::string hint_for(int status) {
  switch (status) {
    case 1:
    case 3:
      return "the PCIe path between them does not allow P2P: check ACS (`gpudiag-health --checks acs`) and the IOMMU "
             "mode; in a VM this may be expected (p2p.expect: any)";
    case 2: return "this GPU model does not support P2P here; set p2p.expect: any if that is expected";
    case 4: return "a driver registry key (NVreg_RegistryDwords) disables P2P: remove it from the nvidia module options";
    default: return "compare with `nvidia-smi topo -p2p r` and `nvidia-smi topo -m`";
  }
}

void add_bandwidth(CheckResult& out, const nlohmann::json& bw, const P2pSettings& s, std::size_t n) {
  if (auto e = read_probe_error(bw)) {
    bool gpu = e->kind == probe_json::kKindGpu;
    out.add({"bandwidth", gpu ? Status::critical : Status::unknown,
             "P2P bandwidth not measured: " + (e->message.empty() ? "?" : e->message),
             e->hint});
    return;
  }
  if (!bw.contains(probe_json::kGbps) || !bw[probe_json::kGbps].is_array() || bw[probe_json::kGbps].size() != n) {
    out.add({"bandwidth", Status::unknown, "the GPU probe's bandwidth matrix is unreadable", ""});
    return;
  }
  add_cuda_nvml_gaps(out, bw);
  double lowest = -1;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      const auto& row = bw[probe_json::kGbps][i];
      if (!row.is_array() || row.size() != n || !row[j].is_number()) continue;
      double v = row[j].get<double>();
      if (lowest < 0 || v < lowest) lowest = v;
      if (s.min_bandwidth_gbps > 0 && v < s.min_bandwidth_gbps)
        out.add({fmt::format("GPU{}-GPU{}", i, j), Status::critical,
                 fmt::format("GPU{}-GPU{}: copy bandwidth {:.1f} GB/s, below p2p.min_bandwidth {:g}", i, j, v,
                             s.min_bandwidth_gbps),
                 "a slow link or P2P through the CPU: see `nvidia-smi topo -m` and the acs check"});
    }
  if (lowest >= 0) out.add({"bandwidth", Status::ok, fmt::format("lowest GPU-to-GPU copy bandwidth {:.1f} GB/s", lowest), ""});
}

}  // namespace

CheckResult evaluate_p2p(const nlohmann::json& data, const P2pSettings& s) {
  CheckResult out;
  out.name = "p2p";
  if (auto na = probe_field<std::string>(data, probe_json::kNotApplicable)) {
    out.add({"p2p", Status::ok, "P2P does not apply: " + *na, ""});
    out.summary = "not applicable: " + *na;
    return out;
  }
  const std::size_t n = data.contains("gpus") && data["gpus"].is_array() ? data["gpus"].size() : 0;
  auto read = read_matrix(data, probe_json::kP2pRead, n), write = read_matrix(data, probe_json::kP2pWrite, n),
       nvlink = read_matrix(data, probe_json::kP2pNvlink, n);
  if (n == 0 || !read || !write || !nvlink) {
    out.add({"probe", Status::unknown, "the GPU probe's P2P matrix is missing or malformed", "this is a gpudiag bug"});
    out.summary = "unreadable";
    return out;
  }
  if (n == 1) {
    out.add({"GPU0", Status::ok, "one GPU: no pairs to check", ""});
    out.summary = "1 GPU, no pairs";
    return out;
  }
  int bad_pairs = 0, unknown_pairs = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) {
      // Both directions: P2P status need not be symmetric.
      std::vector<std::string> problems, unread;
      int worst = 0;
      auto look = [&](const P2pMatrix& m, const char* kind) {
        for (auto [a, b] : {std::pair{i, j}, std::pair{j, i}}) {
          int st = m[a][b];
          if (st == 0) continue;
          if (st < 0) {
            // The query failed: nothing is known about the pair, which is not a fault.
            unread.push_back(kind);
            continue;
          }
          std::string text = fmt::format("{} {} ({})", kind, p2p_code(st), p2p_meaning(st));
          if (a != i) text += fmt::format(" from GPU{}", a);
          problems.push_back(text);
          if (worst == 0) worst = st;
          return;  // one direction is enough to name the pair
        }
      };
      if (s.expect != "any") {
        look(*read, "READ");
        look(*write, "WRITE");
      }
      if (s.expect == "nvlink") look(*nvlink, "NVLINK");
      if (problems.empty() && !unread.empty()) {
        ++unknown_pairs;
        if (unknown_pairs <= 8) {
          std::string why;
          const nlohmann::json* errors = data.contains(probe_json::kQueryErrors) ? &data[probe_json::kQueryErrors] : nullptr;
          if (errors && errors->is_array() && !errors->empty() && (*errors)[0].is_string())
            why = " (" + (*errors)[0].get<std::string>() + ")";
          out.add({fmt::format("GPU{}-GPU{}", i, j), Status::unknown,
                   fmt::format("GPU{}-GPU{}: P2P status could not be read{}", i, j, why),
                   "NVML could not answer for this pair: compare with `nvidia-smi topo -p2p r`; the gpu check "
                   "reports GPUs that NVML cannot reach"});
        }
        continue;
      }
      if (problems.empty()) continue;
      ++bad_pairs;
      std::string list;
      for (const auto& p : problems) list += (list.empty() ? "" : ", ") + p;
      out.add({fmt::format("GPU{}-GPU{}", i, j), Status::critical, fmt::format("GPU{}-GPU{}: P2P {}", i, j, list),
               hint_for(worst)});
    }
  std::string text = "READ\n" + format_p2p_matrix(*read) + "\nWRITE\n" + format_p2p_matrix(*write) + "\nNVLINK\n" +
                     format_p2p_matrix(*nvlink) + "\n" + p2p_legend();
  out.text = text;
  out.details["read"] = *read;
  out.details["write"] = *write;
  out.details["nvlink"] = *nvlink;
  if (data.contains(probe_json::kBandwidth)) {
    add_bandwidth(out, data[probe_json::kBandwidth], s, n);
    out.details[probe_json::kBandwidth] = data[probe_json::kBandwidth];
  }
  const std::size_t pairs = n * (n - 1) / 2;
  out.summary = s.expect == "any" ? fmt::format("{} GPUs, {} pairs (p2p.expect: any)", n, pairs)
                                  : fmt::format("{} of {} GPU pairs {}", pairs - bad_pairs - unknown_pairs, pairs,
                                                s.expect == "nvlink" ? "with NVLink P2P" : "with P2P read and write");
  if (unknown_pairs) out.summary += fmt::format(", {} unread", unknown_pairs);
  return out;
}

CheckResult run_p2p_check(const CheckContext& ctx) {
  std::vector<std::string> args;
  if (ctx.cfg.p2p.bandwidth) args = {"--bandwidth", "--copy-bytes", std::to_string(ctx.cfg.p2p.copy_bytes)};
  ProbeOutcome probe = run_probe(ctx, "p2p", args);
  if (!probe.ok()) {
    CheckResult out;
    out.name = "p2p";
    out.add(*probe.failure);
    out.summary = probe.failure->status == Status::ok ? "no GPUs expected" : "not measured";
    return out;
  }
  return evaluate_p2p(probe.data, ctx.cfg.p2p);
}

}  // namespace gpudiag
