// `scontrol show node` output, and the drain decision made from it. The input also
// serves as a finding's message, so the drain reason built from hostile text (a
// GPU name, a path from sysfs) is checked too: one line, no control bytes, bounded.
// And as `scontrol listpids` output, which decides whose stacks `gpudiag stacks` takes.
// And as `scontrol show node` of every node, which the drain breaker counts: what it
// counts is only ever drained by gpudiag, and its verdict keeps every cap.
#include <set>

#include "fuzz/fuzz_input.h"
#include "healthcheck/drain/drain_breaker.h"
#include "healthcheck/drain/drain_policy.h"
#include "healthcheck/drain/slurm_node.h"
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

  if (auto all = gpudiag::parse_scontrol_nodes(text); all && !all->empty()) {
    std::set<std::string> names;
    for (const auto& n : *all) {
      GPUDIAG_FUZZ_CHECK(names.insert(n.name).second);
      GPUDIAG_FUZZ_CHECK(n.state.state.rfind(n.state.base, 0) == 0);
      GPUDIAG_FUZZ_CHECK(n.state.reason.find('\n') == std::string::npos);
    }
    const std::string self = all->front().name;
    auto counts = gpudiag::count_drains(*all, self, "gpudiag:");
    GPUDIAG_FUZZ_CHECK(counts.cluster.size == static_cast<int>(all->size()));
    auto scopes = counts.partitions;
    scopes.push_back(counts.cluster);
    for (const auto& scope : scopes) {
      GPUDIAG_FUZZ_CHECK(static_cast<int>(scope.drained.size()) < scope.size && scope.size <= counts.cluster.size);
      for (const auto& d : scope.drained) {
        GPUDIAG_FUZZ_CHECK(d != self);
        for (const auto& n : *all)
          if (n.name == d) GPUDIAG_FUZZ_CHECK(n.state.drain && n.state.reason.rfind("gpudiag:", 0) == 0);
      }
    }
    for (int nodes : {1, 3}) {
      gpudiag::DrainSettings caps;
      caps.max_nodes = nodes;
      caps.max_share_pct = nodes == 1 ? 50 : 10;
      auto v = gpudiag::breaker_rule(counts, caps);
      for (const auto& scope : scopes) {
        auto limit = gpudiag::scope_limit(scope, caps);
        GPUDIAG_FUZZ_CHECK(limit && *limit >= 1);
        if (v.allow) GPUDIAG_FUZZ_CHECK(static_cast<int>(scope.drained.size()) + 1 <= *limit);
      }
      if (!v.allow) {
        GPUDIAG_FUZZ_CHECK(v.count + 1 > v.limit);
        GPUDIAG_FUZZ_CHECK(gpudiag::retry_slot(v, self) <= v.limit);
        GPUDIAG_FUZZ_CHECK(gpudiag::is_one_printable_line(gpudiag::held_back_text(self, v, "gpudiag:")));
      }
    }
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
