#include "fabric/fabric_report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace gpudiag::fabric {
namespace {

std::string gbps_text(double g) {
  char buf[32];
  std::snprintf(buf, sizeof buf, g >= 10 ? "%.1f" : (g >= 0.1 ? "%.2f" : "%.3f"), g);
  return buf;
}

std::string name_of(const std::vector<NodeEntry>& nodes, int id) {
  return id >= 0 && static_cast<std::size_t>(id) < nodes.size() && !nodes[id].name.empty()
             ? nodes[id].name
             : "node " + std::to_string(id);
}

std::string pair_name(const std::vector<NodeEntry>& nodes, const Pair& p) {
  return name_of(nodes, p.a) + "-" + name_of(nodes, p.b);
}

std::string figure_text(const PairFigure& f, const std::vector<NodeEntry>& nodes) {
  auto way = [](const std::optional<double>& g) { return g ? gbps_text(*g) : std::string("?"); };
  return way(f.ab_gbps) + " Gb/s " + name_of(nodes, f.pair.a) + "->" + name_of(nodes, f.pair.b) + ", " +
         way(f.ba_gbps) + " back";
}

}  // namespace

std::optional<double> TestRecord::gbps() const {
  if (!error.empty() || usec == 0 || reach) return std::nullopt;
  return static_cast<double>(bytes) * 8 / static_cast<double>(usec) / 1000.0;
}

std::vector<Measurement> measurements(const std::vector<TestRecord>& tests, const std::string& transport) {
  std::vector<Measurement> out;
  for (const auto& t : tests)
    if (t.transport == transport) out.push_back(Measurement{t.from, t.to, t.reach, t.gbps(), t.error});
  return out;
}

std::vector<Finding> pair_findings(const std::vector<NodeEntry>& nodes, const std::vector<TestRecord>& tests,
                                   const PairJudgement& j, int rendezvous_port, const std::string& transport) {
  std::vector<Finding> out;
  const bool rdma = transport == "rdma", nccl = transport == "nccl";
  const std::string over = rdma ? " over RDMA" : (nccl ? " over NCCL" : "");
  // Unreachable: each failed direction once (a re-test that worked does not erase it:
  // a port that refuses sometimes is a finding too).
  std::vector<std::pair<int, int>> said;
  std::vector<int> cannot_reach_first;
  for (const auto& t : tests) {
    if (t.error.empty() || t.transport != transport) continue;
    if (std::find(said.begin(), said.end(), std::make_pair(t.from, t.to)) != said.end()) continue;
    said.emplace_back(t.from, t.to);
    const std::string to = name_of(nodes, t.to);
    const bool to_ok = t.to >= 0 && static_cast<std::size_t>(t.to) < nodes.size();
    const std::string where = to + ":" + std::to_string(to_ok ? nodes[t.to].port : 0) + "/tcp";
    Finding f;
    f.kind = "unreachable";
    f.fatal = true;
    f.subject = name_of(nodes, t.from) + "->" + to;
    if (t.reach) cannot_reach_first.push_back(t.from);
    if (rdma) {
      f.kind = "rdma_failed";
      f.subject = name_of(nodes, t.from) + "->" + to + " rdma";
      f.message = "RDMA from " + name_of(nodes, t.from) + " to " + to + " failed: " + t.error +
                  " - NCCL over IB/RoCE would fail or hang there: check the HCAs (ibv_devinfo, ibstat) and the "
                  "switch path, or NCCL_IB_HCA / NCCL_IB_GID_INDEX";
      out.push_back(f);
      continue;
    }
    if (nccl) {
      f.kind = "nccl_failed";
      f.subject = name_of(nodes, t.from) + "->" + to + " nccl";
      f.message = "NCCL all_reduce of " + name_of(nodes, t.from) + " with " + to + " failed: " + t.error +
                  " - run it with NCCL_DEBUG=INFO, or check the GPU (gpudiag-health) and the network settings";
      out.push_back(f);
      continue;
    }
    f.message = name_of(nodes, t.from) + " cannot reach " + where +
                (t.reach ? " (the rendezvous port" + (rendezvous_port ? " " + std::to_string(rendezvous_port) : "") +
                               ")"
                         : "") +
                ": " + t.error +
                (t.error.find("reset") != std::string::npos
                     ? " - its listener dropped the connection: another process flooding that port? run again, or "
                       "look for it on " + to
                     : " - a firewall? allow TCP between the nodes on the rendezvous port and 1024-65535");
    out.push_back(f);
  }
  for (int n : j.bad_nodes) {
    std::string figs;
    for (const auto& p : j.pairs)
      if (p.slow && (p.pair.a == n || p.pair.b == n)) figs += (figs.empty() ? "" : "; ") + figure_text(p, nodes);
    const std::string name = name_of(nodes, n);
    out.push_back(Finding{"slow_node", true, name,
                          name + " is slow with every partner" + over + " (" + figs + "; median node " +
                              gbps_text(j.reference_gbps) + " Gb/s): check its link (ethtool, cable, port)"});
  }
  for (const Pair& p : j.bad_links) {
    for (const auto& f : j.pairs) {
      if (!(f.pair == p)) continue;
      out.push_back(Finding{"slow_link", true, pair_name(nodes, p),
                            "the link " + pair_name(nodes, p) + " is slow" + over + " (" + figure_text(f, nodes) + "; both nodes " +
                                "are fast with others, median node " + gbps_text(j.reference_gbps) +
                                " Gb/s): check the switch path between them"});
    }
  }
  for (const Pair& p : j.unsure) {
    for (const auto& f : j.pairs) {
      if (!(f.pair == p)) continue;
      out.push_back(Finding{"slow_pair", true, pair_name(nodes, p),
                            pair_name(nodes, p) + " is slow" + over + " (" + figure_text(f, nodes) + ", below " +
                                gbps_text(j.threshold_gbps) + " Gb/s) and no node is fast with another to tell "
                                "node from link: test with more nodes"});
    }
  }
  return out;
}

std::vector<Finding> rdma_findings(const std::vector<NodeEntry>& nodes, const RdmaSummary& r) {
  std::vector<Finding> out;
  std::vector<std::string> with, without;
  for (std::size_t n = 0; n < r.hca.size(); ++n)
    (r.hca[n].empty() ? without : with).push_back(name_of(nodes, static_cast<int>(n)));
  if (with.empty() || without.empty()) return out;  // all or none: nothing differs
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size() && i < 8; ++i) s += (i ? "," : "") + v[i];
    return s + (v.size() > 8 ? ",..." : "");
  };
  std::string why;
  for (std::size_t n = 0; n < r.hca.size() && why.empty(); ++n)
    if (r.hca[n].empty() && n < r.none.size()) why = r.none[n];
  out.push_back(Finding{"rdma_missing", false, list(without),
                        "RDMA: " + list(without) + " cannot use RDMA (" + why.substr(0, 200) + "), " + list(with) +
                            " can: NCCL falls back to sockets between them or fails; RDMA pairs ran among " +
                            list(with) + " only"});
  return out;
}

namespace {

// "lo-hi Gb/s over WHAT", or "" when no direction was measured.
std::string span_text(const PairJudgement& j, const char* what) {
  double lo = 0, hi = 0;
  bool any = false;
  for (const auto& p : j.pairs)
    for (const auto& g : {p.ab_gbps, p.ba_gbps}) {
      if (!g) continue;
      lo = any ? std::min(lo, *g) : *g;
      hi = any ? std::max(hi, *g) : *g;
      any = true;
    }
  return any ? gbps_text(lo) + "-" + gbps_text(hi) + " Gb/s over " + what : "";
}

// What the healthy line says of RDMA: the figures, or why there were none.
std::string rdma_text(const RdmaSummary* r) {
  if (!r || r->hca.empty()) return "";
  if (r->tested) {
    std::string hca;
    for (const auto& h : r->hca)
      if (!h.empty()) {
        hca = h;
        break;
      }
    const std::string span = span_text(r->judgement, "RDMA");
    return span.empty() ? "" : ", " + span + " (" + hca + ")";
  }
  std::string why;
  bool same = true;
  for (std::size_t n = 0; n < r->none.size(); ++n) {
    if (n == 0) why = r->none[n];
    else if (r->none[n] != why) same = false;
  }
  if (why.empty()) return "";
  return ", no RDMA (" + (same ? why.substr(0, 160) : "see fabric.json") + ")";
}

}  // namespace

std::string drain_command(const std::vector<std::string>& nodes) {
  // A node's name comes from its task's hello (the user's processes): an admin may paste
  // this line into a shell, so it carries only names a host could have.
  const auto shell_safe = [](const std::string& n) {
    return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '-' || c == '_' || c == '.';
    });
  };
  std::string list;
  for (const auto& n : nodes) {
    if (!shell_safe(n))
      return "to drain (an admin, after a look): a node whose name is not a host name (see fabric.json): "
             "drain it by hand with scontrol";
    list += (list.empty() ? "" : ",") + n;
  }
  return "to drain (an admin, after a look): scontrol update NodeName=" + list +
         " State=DRAIN Reason=\"gpudiag fabric: slow with every partner\"";
}

FabricVerdict fabric_verdict(const std::vector<Finding>& findings, bool fail_action, const PairJudgement& j,
                             std::size_t node_count, const std::string& report_path, const RdmaSummary* rdma,
                             const PairJudgement* nccl) {
  FabricVerdict v;
  const std::string tag = "gpudiag: fabric: ";
  const bool fatal = std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.fatal; });
  v.start = !(fatal && fail_action);
  const std::string where = report_path.empty() ? "" : " (all figures: " + report_path + ")";
  if (findings.empty()) {
    const std::string tcp = span_text(j, "TCP");
    v.lines.push_back(tag + std::to_string(node_count) + " nodes, " + std::to_string(j.pairs.size()) + " pairs" +
                      (tcp.empty() ? "" : ", " + tcp) + rdma_text(rdma) +
                      (nccl && !span_text(*nccl, "NCCL").empty() ? ", " + span_text(*nccl, "NCCL") + " (bus bandwidth)"
                                                                 : "") +
                      ", nothing differs: ok" + where);
    return v;
  }
  // Fatal first, in the order found (unreachable, slow, differs, layout).
  std::vector<const Finding*> order;
  for (const auto& f : findings)
    if (f.fatal) order.push_back(&f);
  for (const auto& f : findings)
    if (!f.fatal) order.push_back(&f);
  v.lines.push_back(tag + (v.start ? (fatal ? "problems found; the step starts (fabric.action: warn)"
                                            : "the step starts; note")
                                   : "the step does not start: " + std::to_string(order.size()) +
                                         " problem(s) between the nodes") +
                    where);
  // The nodes to drain get a line of their own, always shown: the exact command for an
  // admin. gpudiag-health does not act on it: every figure came from the user's own
  // processes (srun, the tasks), so a user could forge one (SECURITY.md).
  std::vector<std::string> drain;
  for (const auto& f : findings)
    if (f.kind == "slow_node" && std::find(drain.begin(), drain.end(), f.subject) == drain.end())
      drain.push_back(f.subject);
  const std::size_t room = kMaxVerdictLines - 1 - (drain.empty() ? 0 : 1);
  for (std::size_t i = 0; i < order.size() && i < room; ++i) {
    if (i + 1 == room && order.size() > room) {
      v.lines.push_back(tag + order[i]->message.substr(0, 300) + " (and " + std::to_string(order.size() - room) +
                        " more in fabric.json)");
      break;
    }
    v.lines.push_back(tag + order[i]->message);
  }
  if (!drain.empty()) v.lines.push_back(tag + drain_command(drain));
  return v;
}

std::string fabric_json(const FabricReport& r) {
  using nlohmann::json;
  json nodes = json::array();
  for (std::size_t i = 0; i < r.nodes.size(); ++i)
    nodes.push_back({{"id", i}, {"name", r.nodes[i].name}, {"addr", r.nodes[i].addr}, {"port", r.nodes[i].port}});
  json tests = json::array();
  for (const auto& t : r.tests) {
    json e = {{"from", name_of(r.nodes, t.from)}, {"to", name_of(r.nodes, t.to)}, {"transport", t.transport},
              {"kind", t.reach ? "reach" : (t.retest ? "retest" : "pair")}, {"round", t.round}, {"bytes", t.bytes},
              {"usec", t.usec}};
    if (auto g = t.gbps()) e["gbps"] = *g;
    if (!t.error.empty()) e["error"] = t.error;
    tests.push_back(e);
  }
  json pairs = json::array();
  for (const auto* jt : {&r.judgement, &r.rdma.judgement, &r.nccl_judgement})
    for (const auto& p : jt->pairs) {
      json e = {{"a", name_of(r.nodes, p.pair.a)}, {"b", name_of(r.nodes, p.pair.b)}, {"slow", p.slow},
                {"transport", jt == &r.judgement ? "tcp" : (jt == &r.rdma.judgement ? "rdma" : "nccl")}};
      if (p.ab_gbps) e["a_to_b_gbps"] = *p.ab_gbps;
      if (p.ba_gbps) e["b_to_a_gbps"] = *p.ba_gbps;
      pairs.push_back(e);
    }
  json rdma_nodes = json::object();
  for (std::size_t n = 0; n < r.rdma.hca.size(); ++n)
    rdma_nodes[name_of(r.nodes, static_cast<int>(n))] =
        r.rdma.hca[n].empty() ? json{{"none", n < r.rdma.none.size() ? r.rdma.none[n] : ""}} : json{{"hca", r.rdma.hca[n]}};
  json findings = json::array();
  for (const auto& f : r.findings)
    findings.push_back({{"kind", f.kind}, {"fatal", f.fatal}, {"subject", f.subject}, {"message", f.message}});
  std::vector<std::string> bad;
  for (const auto* jt : {&r.judgement, &r.rdma.judgement, &r.nccl_judgement})
    for (int n : jt->bad_nodes)
      if (std::find(bad.begin(), bad.end(), name_of(r.nodes, n)) == bad.end()) bad.push_back(name_of(r.nodes, n));
  json j = {{"step", r.job_step},
            {"verdict", r.verdict.start ? (r.findings.empty() ? "ok" : "warn") : "fail"},
            {"lines", r.verdict.lines},
            {"nodes", nodes},
            {"rounds", r.rounds},
            {"seconds", r.seconds},
            {"reference_gbps", r.judgement.reference_gbps},
            {"threshold_gbps", r.judgement.threshold_gbps},
            {"rdma", {{"tested", r.rdma.tested},
                      {"reference_gbps", r.rdma.judgement.reference_gbps},
                      {"threshold_gbps", r.rdma.judgement.threshold_gbps},
                      {"nodes", rdma_nodes}}},
            {"nccl", {{"tested", r.nccl_tested}, {"reference_gbps", r.nccl_judgement.reference_gbps},
                      {"none", r.nccl_none}}},
            {"drain", bad},
            {"pairs", pairs},
            {"tests", tests},
            {"findings", findings}};
  return j.dump(2, ' ', true, json::error_handler_t::replace) + "\n";
}

}  // namespace gpudiag::fabric
