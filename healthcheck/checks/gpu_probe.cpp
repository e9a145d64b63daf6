#include "healthcheck/checks/gpu_probe.h"
#include "probe/probe_json.h"
#include "util/control_bytes.h"
#include "util/text_lists.h"
#include "util/this_host.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gpudiag {
namespace {

Finding probe_finding(Status s, std::string message, std::string hint) {
  return Finding{"probe", s, std::move(message), std::move(hint)};
}

std::string signal_text(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  const char* desc = ::sigdescr_np(sig);
  return fmt::format("SIG{} ({})", abbrev ? abbrev : std::to_string(sig).c_str(), desc ? desc : "unknown signal");
}

}  // namespace

ProbeOutcome interpret_probe(const CommandResult& run, const std::string& probe, double timeout_s,
                             const GpuExpect& expect) {
  ProbeOutcome out;
  if (!run.started) {
    out.failure = probe_finding(Status::unknown, fmt::format("cannot run the GPU probe {}: {}", probe, run.error),
                                "reinstall gpudiag, or point gpu.probe at gpudiag-gpu-probe");
    return out;
  }
  if (run.timed_out) {
    // Where it hung is in what NCCL or CUDA logged last (NCCL_DEBUG=INFO, on stderr).
    std::string last = escape_control(last_line(run.err));
    out.failure = probe_finding(Status::critical,
                                fmt::format("GPU probe timed out after {:g} s{}", timeout_s,
                                            last.empty() ? "" : "; it last said: " + last),
                                "a GPU or the driver hangs: look for Xid errors in `dmesg` and try `nvidia-smi`; "
                                "reset the GPU or reboot the node");
    return out;
  }
  if (run.signal) {
    out.failure = probe_finding(Status::critical, fmt::format("GPU probe was killed by {}", signal_text(run.signal)),
                                "the driver or a GPU library crashed: look for Xid errors in `dmesg`");
    return out;
  }
  if (run.exit_code != 0) {
    std::string why = first_line(run.err);
    out.failure = probe_finding(Status::unknown,
                                fmt::format("GPU probe exited {}{}", run.exit_code, why.empty() ? "" : ": " + why),
                                "run the probe by hand to see more: " + probe + " devices");
    return out;
  }
  nlohmann::json data = nlohmann::json::parse(run.out, nullptr, /*allow_exceptions=*/false);
  if (!data.is_object()) {
    out.failure = probe_finding(Status::unknown,
                                fmt::format("GPU probe printed something that is not its JSON: \"{}\"", first_line(run.out)),
                                "check that gpu.probe points at gpudiag-gpu-probe");
    return out;
  }
  if (auto e = read_probe_error(data)) {
    const std::string& kind = e->kind;
    std::string message = e->message;
    const std::string& hint = e->hint;
    if (message.empty()) message = "the GPU probe reported an error without a message";
    if (kind == probe_json::kKindGpu || kind == probe_json::kKindDriverFault) {
      // A GPU call failed, or the driver is installed but broken (fabric manager down,
      // library and module of different versions): the node needs an admin.
      out.failure = probe_finding(Status::critical, message, hint);
    } else if (expect.expects_none()) {
      // A CPU node: no driver and no GPU is what the config says it should have.
      out.failure = probe_finding(Status::ok, "no GPU expected (gpu.count: 0): " + message, "");
    } else {
      out.failure = probe_finding(Status::unknown, message, hint);
    }
    out.data = std::move(data);
    return out;
  }
  out.data = std::move(data);
  return out;
}

std::string locate_probe(const GpuExpect& expect, std::vector<std::string>& looked) {
  std::vector<std::string> candidates;
  if (!expect.probe.empty()) {
    candidates.push_back(expect.probe);
  } else {
    std::string dir = self_exe_dir();
    if (!dir.empty()) candidates.push_back(dir + "/../libexec/gpudiag/gpudiag-gpu-probe");
    candidates.push_back(std::string(GPUDIAG_LIBEXEC_DIR) + "/gpudiag/gpudiag-gpu-probe");
  }
  for (const auto& c : candidates) {
    looked.push_back(c);
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

ProbeOutcome run_probe(const CheckContext& ctx, const std::string& section, const std::vector<std::string>& args) {
  const GpuExpect& expect = ctx.cfg.gpu;
  ProbeOutcome out;
  if (ctx.fs.root() != "/" && expect.probe.empty()) {
    out.failure = probe_finding(Status::unknown,
                                "the GPU probe does not run under --fs-root: the driver cannot be redirected to a "
                                "copy of /sys",
                                "drop --fs-root, or set gpu.probe to a stand-in that prints canned JSON");
    return out;
  }
  std::vector<std::string> looked;
  std::string probe = locate_probe(expect, looked);
  if (probe.empty()) {
    std::string where;
    for (const auto& l : looked) where += (where.empty() ? "" : ", ") + l;
    out.failure = probe_finding(Status::unknown, "GPU probe not found (looked at " + where + ")",
                                "reinstall gpudiag, or set gpu.probe in gpudiag.yaml");
    return out;
  }
  double left = std::chrono::duration<double>(ctx.deadline - std::chrono::steady_clock::now()).count();
  // Half a second is kept to kill, reap and report before the run's own budget ends.
  double timeout = std::min(expect.probe_timeout_s, left - 0.5);
  if (timeout < 0.5) {
    out.failure = probe_finding(Status::unknown, "not run: the time budget ran out before the GPU probe",
                                "raise health.timeout or --timeout");
    return out;
  }
  std::vector<std::string> argv = {probe};
  if (!expect.libraries.nvml.empty()) argv.insert(argv.end(), {"--nvml", expect.libraries.nvml});
  if (!expect.libraries.cuda.empty()) argv.insert(argv.end(), {"--cuda", expect.libraries.cuda});
  if (!expect.libraries.nccl.empty()) argv.insert(argv.end(), {"--nccl", expect.libraries.nccl});
  // The probe stops waiting on the GPU a little before it would be killed, so that a
  // stuck kernel comes back with its diagnosis instead of as a bare timeout.
  argv.insert(argv.end(), {"--wait-limit", fmt::format("{:g}", timeout - std::min(2.0, timeout / 4))});
  argv.push_back(section);
  argv.insert(argv.end(), args.begin(), args.end());
  CommandResult run = run_command(argv, timeout, 8 << 20);
  return interpret_probe(run, probe, timeout, expect);
}

}  // namespace gpudiag
