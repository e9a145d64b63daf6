// `scontrol show node` output, and the drain decision made from it. The input also
// serves as a finding's message, so the drain reason built from hostile text (a
// GPU name, a path from sysfs) is checked too: one line, no control bytes, bounded.
// And as `scontrol listpids` output, which decides whose stacks `gpudiag stacks` takes.
#include "fuzz/fuzz_input.h"
#include "healthcheck/drain_policy.h"
#include "healthcheck/slurm_node.h"
#include "util/control_bytes.h"
#include "stacks/step_processes.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto node = gpudiag::parse_scontrol_node(text, "gpu001");

  gpudiag::Report report;
  report.node = "gpu001";
  gpudiag::CheckResult ib{"ib"};
  ib.status = gpudiag::Status::critical;
  ib.findings.push_back({std::string(text.substr(0, 40)), gpudiag::Status::critical, std::string(text), "hint"});
  report.add(ib);
  auto reason = gpudiag::drain_reason(report, "gpudiag:");
  GPUDIAG_FUZZ_CHECK(reason.size() <= gpudiag::kMaxDrainReason);
  GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(reason));

  if (node) {
    auto d = gpudiag::decide_drain(report, *node, true, true, "gpudiag:");
    if (d.action == gpudiag::NodeAction::drain)
      GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(d.reason));
    auto standing = gpudiag::node_standing(*node, "gpudiag:");
    // Never touch a node someone else took out (or Slurm is busy with), nor a drain
    // someone else set; resume only our own drain.
    if (node->drain && !gpudiag::drained_by_us(*node, "gpudiag:"))
      GPUDIAG_FUZZ_CHECK(d.action == gpudiag::NodeAction::none);
    if (standing.kind == gpudiag::NodeStanding::not_ours) GPUDIAG_FUZZ_CHECK(d.action == gpudiag::NodeAction::none);
    if (d.action == gpudiag::NodeAction::resume)
      GPUDIAG_FUZZ_CHECK(standing.kind == gpudiag::NodeStanding::drained_by_us && node->drain &&
                         node->reason.rfind("gpudiag:", 0) == 0);
    // The base state is what State= starts with; the reason is one line.
    GPUDIAG_FUZZ_CHECK(node->state.rfind(node->base, 0) == 0);
    GPUDIAG_FUZZ_CHECK(node->reason.find('\n') == std::string::npos);
  }

  // Only pids Slurm listed for the job become task roots.
  if (auto listed = gpudiag::parse_listpids(text)) {
    gpudiag::ProcTable table;
    for (const auto& p : *listed) {
      GPUDIAG_FUZZ_CHECK(p.pid >= 0 && p.global_id >= -1);
      table[p.pid] = {p.pid, "x", 'S', 1, 0};
    }
    for (const auto& t : gpudiag::step_task_roots(*listed, table, {"1", std::nullopt}, "")) {
      bool slurms = false;
      for (const auto& p : *listed) slurms |= p.pid == t.pid && p.job == "1";
      GPUDIAG_FUZZ_CHECK(slurms);
    }
  }
  return 0;
}
