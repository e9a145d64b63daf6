#include "healthcheck/drain/slurm_action.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "healthcheck/drain/drain_policy.h"
#include "util/control_bytes.h"
#include "util/run_command.h"

namespace gpudiag {
namespace {

SlurmOutcome outcome(std::string action, std::string explanation) {
  SlurmOutcome o;
  o.action = std::move(action);
  o.explanation = std::move(explanation);
  return o;
}

ActResult failed(const std::string& error) { return {outcome("failed", error), error}; }

// One syslog line per node held back (the hooks add none for exit 4).
ActResult held_back_because(SlurmPort& slurm, const std::string& node, const std::string& why) {
  slurm.syslog(fmt::format("{} is CRITICAL but not drained: {}", replace_control(node, '?'), why));
  return {outcome("held_back", "not drained: " + why), ""};
}

ActResult held_back(SlurmPort& slurm, const std::string& node, const BreakerVerdict& v, const std::string& prefix,
                    bool undone = false) {
  std::string why = held_back_text(node, v, prefix);
  if (undone) why = "its drain, made at the same moment as other nodes', was undone: " + why;
  ActResult r = held_back_because(slurm, node, why);
  SlurmOutcome& o = r.outcome;
  o.cap = v.cap;
  o.count = v.count;
  o.limit = v.limit;
  return r;
}

ActResult cannot_count(SlurmPort& slurm, const std::string& node, const std::string& why) {
  // The breaker's rule is "no count, no drain": a slurmctld that does not answer is
  // what a shared outage looks like.
  return held_back_because(slurm, node,
                           fmt::format("held back by the drain breaker, which cannot count the nodes gpudiag has "
                                       "drained: {}; to drain it anyway: gpudiag-health --drain --force",
                                       replace_control(why, ' ')));
}

const SlurmNodeRecord* find_node(const std::vector<SlurmNodeRecord>& all, const std::string& node) {
  for (const auto& n : all)
    if (n.name == node) return &n;
  return nullptr;
}

// Without the breaker: resume, a drain the breaker does not gate, or --force.
ActResult act_directly(const Report& report, const Config& cfg, const std::string& node, const ActOptions& opts,
                       SlurmPort& slurm, const SlurmNodeState& st) {
  auto d = decide_drain(report, st, opts.drain, opts.resume, cfg.health.drain_prefix);
  Result<bool> done = true;
  if (d.action == NodeAction::drain) done = slurm.drain(node, d.reason);
  else if (d.action == NodeAction::resume) done = slurm.resume(node);
  if (!done) return failed(done.error());
  std::string action = d.action == NodeAction::drain    ? "drained"
                       : d.action == NodeAction::resume ? "resumed"
                                                        : "unchanged";
  if (d.action == NodeAction::drain && opts.force) d.explanation += " (--force: the drain breaker was not asked)";
  return {outcome(action, d.explanation), ""};
}

}  // namespace

RealSlurm::RealSlurm(double scontrol_timeout_s)
    : sc_(scontrol_timeout_s), seed_(std::random_device{}()) {}
Result<SlurmNodeState> RealSlurm::show(const std::string& node) { return sc_.show(node); }
Result<std::vector<SlurmNodeRecord>> RealSlurm::show_all() { return sc_.show_all(); }
Result<bool> RealSlurm::drain(const std::string& node, const std::string& reason) { return sc_.drain(node, reason); }
Result<bool> RealSlurm::resume(const std::string& node) { return sc_.resume(node); }
Result<bool> RealSlurm::undrain(const std::string& node) { return sc_.undrain(node); }
void RealSlurm::sleep(double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}
double RealSlurm::random_unit() {
  std::mt19937_64 gen(seed_++);
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}
void RealSlurm::syslog(const std::string& line) {
  // GPUDIAG_SYSLOG_SOCKET is the hooks' own setting (root's environment, set by the
  // admin in the hook or its wrapper), for a syslog that does not listen on /dev/log.
  std::vector<std::string> argv = {"logger", "-t", "gpudiag"};
  if (const char* sock = std::getenv("GPUDIAG_SYSLOG_SOCKET"); sock && *sock) {
    argv.emplace_back("-u");
    argv.emplace_back(sock);
  }
  argv.emplace_back("--");
  argv.push_back(replace_control(line, ' '));
  run_command(argv, 5);  // best effort: the report and the exit code say it too
}

ActResult act_on_node(const Report& report, const Config& cfg, const std::string& node, const ActOptions& opts,
                      SlurmPort& slurm) {
  const std::string& prefix = cfg.health.drain_prefix;
  if (!opts.drain || report.status != Status::critical || opts.force) {
    auto st = slurm.show(node);
    if (!st) return failed(st.error());
    return act_directly(report, cfg, node, opts, slurm, *st);
  }
  // A drain of a node in service: through the breaker. Nodes deciding at once first
  // spread out, so that most see each other's drains before counting.
  slurm.sleep(slurm.random_unit() * cfg.drain.jitter_s);
  bool undid = false;  // this node's drain collided with others' and was undone
  for (int attempt = 1;; ++attempt) {
    auto all = slurm.show_all();
    if (!all) return cannot_count(slurm, node, all.error());
    const SlurmNodeRecord* self = find_node(*all, node);
    if (!self)
      return failed(fmt::format("gpudiag: node {} is not in scontrol show node's output (check --node or "
                                "health.node_name)",
                                replace_control(node, '?')));
    // Only a node in service adds to the count; one drained by gpudiag already gets
    // its new reason, one that is not ours is left alone.
    if (node_standing(self->state, prefix).kind != NodeStanding::in_service)
      return act_directly(report, cfg, node, opts, slurm, self->state);
    auto verdict = breaker_rule(count_drains(*all, node, prefix), cfg.drain);
    if (!verdict.allow) return held_back(slurm, node, verdict, prefix, undid);
    const std::string reason = drain_reason(report, prefix);
    if (auto done = slurm.drain(node, reason); !done) return failed(done.error());
    // Re-count after the drain: a node that drained at the same moment shows up here,
    // since slurmctld applies updates and answers reads one at a time.
    auto again = slurm.show_all();
    if (!again)
      return {outcome("drained",
                      fmt::format("drained: {}; the breaker could not re-count after the drain ({}), so this node "
                                  "may be one over its cap",
                                  reason, again.error())),
              ""};
    auto over = breaker_rule(count_drains(*again, node, prefix), cfg.drain);
    if (over.allow) return {outcome("drained", "drained: " + reason), ""};
    // Over the cap: this node is one of several that drained at once. Undo our own
    // drain, only while it is still ours exactly as we set it.
    const SlurmNodeRecord* now = find_node(*again, node);
    if (!now || !now->state.drain || now->state.reason != reason)
      return {outcome("unchanged",
                      "not drained by gpudiag: the breaker's re-count found its cap exceeded and the node changed "
                      "meanwhile (someone else drained or took it): left alone"),
              ""};
    if (auto undone = slurm.undrain(node); !undone)
      return failed(fmt::format("{} (it was drained and the breaker's cap was exceeded: undo it by hand with "
                                "scontrol update NodeName={} State=UNDRAIN)",
                                undone.error(), replace_control(node, '?')));
    undid = true;
    const int slot = retry_slot(over, node);
    if (slot == 0 || attempt >= kMaxTries || slot * kRetrySlotS > kMaxRetryWaitS)
      return held_back(slurm, node, over, prefix, true);
    slurm.sleep(slot * kRetrySlotS);
  }
}

}  // namespace gpudiag
