#include "spank/plan/rendezvous_verdict.h"

#include <cstdio>

#include "util/control_bytes.h"

namespace gpudiag {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

std::string resolve_fix(const RendezvousTarget& t) {
  if (t.user_set)
    return "set " + t.var + " to a name or address that resolves on every node of the step (or unset it: gpudiag "
           "then sets it), or fix name resolution (/etc/hosts, DNS)";
  return "set plugin.master_addr: address in gpudiag.yaml (the node's NodeAddr), or fix name resolution "
         "(/etc/hosts, DNS)";
}

std::string problem(const RendezvousFacts& f, const std::string& node_name, double deadline_s) {
  const RendezvousTarget& t = f.target;
  const std::string node = escape_control(node_name);
  // The user's text reaches their terminal: no escape sequence rides along.
  const std::string who = t.var + " " + escape_control(t.host);
  if (f.timed_out)
    return "gpudiag: " + who + " did not resolve on " + node + " within " + seconds(deadline_s) +
           " s (the resolver does not answer); " + resolve_fix(t);
  if (!f.resolve_error.empty())
    return "gpudiag: " + who + " does not resolve on " + node + ": " + f.resolve_error + "; " + resolve_fix(t);
  if (!f.route_error.empty())
    return "gpudiag: " + who + " (" + f.addresses.front() + ") cannot be reached from " + node + ": " +
           f.route_error + "; check the node's routes (ip route) or set " + t.var +
           " to an address every node of the step can reach";
  if (!f.bind_error.empty())
    return "gpudiag: port " + std::to_string(t.port) + " for " + t.var + " cannot be bound on " + node + ": " +
           f.bind_error + " (torch's rendezvous listens there); set MASTER_PORT, or move " +
           "plugin.master_port_range in gpudiag.yaml away from ports in use";
  return "";
}

}  // namespace

RendezvousVerdict judge_rendezvous(const std::vector<RendezvousFacts>& facts, const std::string& node, bool enforce,
                                   double deadline_s) {
  RendezvousVerdict v;
  for (const auto& f : facts) {
    std::string p = problem(f, node, deadline_s);
    if (p.empty()) continue;
    if (enforce || f.target.user_set) {
      if (!v.fail) v.fail = p;
      continue;
    }
    v.warnings.push_back(p + " (the step goes on, but a torch.distributed rendezvous on it would hang; "
                             "--diag=preflight makes this an error)");
  }
  return v;
}

}  // namespace gpudiag
