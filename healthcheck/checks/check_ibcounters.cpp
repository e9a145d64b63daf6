#include "healthcheck/checks/check_ibcounters.h"
#include "healthcheck/checks/inventory_cache.h"

#include <fmt/format.h>

#include <algorithm>

#include "healthcheck/checks/ib_selection.h"
#include "healthcheck/state/run_state.h"
#include "nodeinfo/ib_discovery.h"
#include "nodeinfo/sysfs_text.h"
#include "util/text_lists.h"

namespace gpudiag {
namespace {

constexpr const char* kFlap = "link_downed";

const nlohmann::json* previous_port(const nlohmann::json& prev, const std::string& subject) {
  if (!prev.is_object()) return nullptr;
  auto ports = prev.find("ports");
  if (ports == prev.end() || !ports->is_object()) return nullptr;
  auto p = ports->find(subject);
  return p != ports->end() && p->is_object() ? &*p : nullptr;
}

std::string cable_hint(const IbPortCounters& p, const std::string& counter) {
  return fmt::format("check the cable and transceiver of {} port {} (`mlxlink -d {} -p {} -c`, the switch side "
                     "too) and reseat or replace it; if this fabric is known to be noisy, raise "
                     "ibcounters.max_growth.{}",
                     p.hca, p.port, p.hca, p.port, counter);
}

// One port against its previous values; a counter that went down means a reset.
void judge_port(const IbPortCounters& p, const nlohmann::json& before, const IbCounterSettings& cfg,
                CheckResult& r, int& reset, int& grew) {
  const std::string who = fmt::format("{} port {}", p.hca, p.port);
  bool was_reset = false;
  for (const auto& [name, now] : p.values) {
    auto it = before.find(name);
    if (it == before.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0) continue;
    const auto then = it->get<unsigned long long>();
    if (now < then) {
      was_reset = true;
      continue;
    }
    const unsigned long long growth = now - then;
    if (growth == 0) continue;
    if (name == kFlap) {
      ++grew;
      const bool critical = growth > cfg.flap_critical;
      r.add({p.subject(), critical ? Status::critical : Status::warning,
             fmt::format("{} flapped: the link went down {} times since the last run (link_downed {} -> {})", who,
                         growth, then, now),
             fmt::format("a flapping link drops NCCL connections: check the cable, transceiver and switch port "
                         "(`mlxlink -d {} -p {} -c`), and the switch's log for the port",
                         p.hca, p.port)});
      continue;
    }
    const auto allowed = cfg.max_growth_for(name);
    if (growth > allowed) {
      ++grew;
      r.add({p.subject(), Status::warning,
             fmt::format("{}: {} grew by {} since the last run ({} -> {}), more than the {} allowed", who, name, growth,
                         then, now, allowed),
             cable_hint(p, name)});
    }
  }
  if (was_reset) {
    ++reset;
    r.add({p.subject(), Status::ok,
           fmt::format("{}: counters went down since the last run (reset or driver reload): baseline recorded again",
                       who),
           ""});
  }
}

}  // namespace

IbCounterOutcome evaluate_ibcounters(const IbCounterFacts& f, const nlohmann::json& previous,
                                     const IbCounterSettings& cfg) {
  IbCounterOutcome out;
  CheckResult& r = out.result;
  r.name = "ibcounters";
  nlohmann::json ports = nlohmann::json::object();
  if (!f.class_present || f.ports.empty()) {
    r.summary = "no InfiniBand ports";
    out.state = {{"ports", ports}};
    return out;
  }
  int baselined = 0, reset = 0, grew = 0, compared = 0, uncounted = 0;
  for (const auto& p : f.ports) {
    if (!p.error.empty()) {
      ++uncounted;
      r.add({p.subject(), Status::ok, fmt::format("{} port {}: no error counters: {}", p.hca, p.port, p.error), ""});
      continue;
    }
    nlohmann::json now = nlohmann::json::object();
    for (const auto& [name, v] : p.values) {
      r.metrics.push_back({"gpudiag_ib_port_counter", "An InfiniBand port counter as the kernel reports it.",
                           {{"hca", p.hca}, {"port", std::to_string(p.port)}, {"counter", name}},
                           static_cast<double>(v)});
      // Only the judged counters are kept: data counters change all the time.
      // A named copy: lambdas may not capture structured bindings before C++20 (clang).
      const std::string& counter = name;
      if (std::any_of(cfg.max_growth.begin(), cfg.max_growth.end(), [&](const auto& e) { return e.first == counter; }))
        now[name] = v;
    }
    for (const auto& [name, v] : p.hw_values)
      r.metrics.push_back({"gpudiag_ib_port_hw_counter",
                           "A driver's hw_counters value as the kernel reports it (mlx5: RDMA transport; efa: traffic and drops).",
                           {{"hca", p.hca}, {"port", std::to_string(p.port)}, {"counter", name}},
                           static_cast<double>(v)});
    ports[p.subject()] = now;
    const nlohmann::json* before = previous_port(previous, p.subject());
    if (!before) {
      ++baselined;
      r.add({p.subject(), Status::ok,
             fmt::format("{} port {}: {}", p.hca, p.port, f.state_kept ? "baseline recorded" : "counters read, not kept"),
             ""});
      continue;
    }
    ++compared;
    const std::size_t findings = r.findings.size();
    judge_port(p, *before, cfg, r, reset, grew);
    if (r.findings.size() == findings)
      r.add({p.subject(), Status::ok, fmt::format("{} port {}: no error counter grew beyond its limit", p.hca, p.port),
             ""});
  }
  if (baselined && !f.state_note.empty()) r.add({"run-state", Status::ok, f.state_note, ""});
  std::vector<std::string> parts;
  if (compared) parts.push_back(fmt::format("{} ports compared with the last run", compared));
  if (grew) parts.push_back(fmt::format("{} counters grew too much", grew));
  if (reset) parts.push_back(fmt::format("{} reset", reset));
  if (baselined && f.state_kept) parts.push_back(fmt::format("baseline recorded for {} ports", baselined));
  if (baselined && !f.state_kept)
    parts.push_back(fmt::format("{} ports read; nothing kept to compare the next run with", baselined));
  // EFA has no PMA counters/ directory: only its hw_counters, exported above.
  if (uncounted) parts.push_back(fmt::format("{} ports without error counters", uncounted));
  r.summary = join(parts);
  out.state = {{"ports", ports}};
  return out;
}

namespace {

std::vector<std::pair<std::string, unsigned long long>> read_counters(const RootedFs& fs, const std::string& dir,
                                                                      const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, unsigned long long>> out;
  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    auto raw = fs.read_file(path, 64);
    if (!raw) continue;  // some counters refuse reads on some link layers
    auto v = parse_int_attr(*raw, path);
    if (v && *v >= 0) out.emplace_back(name, static_cast<unsigned long long>(*v));
  }
  return out;
}

}  // namespace

IbCounterFacts read_ibcounter_facts(const CheckContext& ctx) {
  IbCounterFacts f;
  const IbInventory& inv = ib_inventory(ctx);
  f.class_present = inv.class_present;
  if (ctx.state) {
    f.state_note = ctx.state->note();
    f.state_kept = ctx.state->enabled();
  }
  for (const auto& hca : inv.hcas) {
    if (!ib_hca_selected(ctx.cfg.ib, hca.name)) continue;
    for (const auto& port : hca.ports) {
      IbPortCounters pc;
      pc.hca = hca.name;
      pc.port = port.number;
      const std::string dir = fmt::format("/sys/class/infiniband/{}/ports/{}/counters", hca.name, port.number);
      auto names = ctx.fs.list_dir(dir);
      if (!names) pc.error = names.error();
      else pc.values = read_counters(ctx.fs, dir, *names);
      const std::string hw = fmt::format("/sys/class/infiniband/{}/ports/{}/hw_counters", hca.name, port.number);
      if (auto hw_names = ctx.fs.list_dir(hw)) pc.hw_values = read_counters(ctx.fs, hw, *hw_names);
      f.ports.push_back(std::move(pc));
    }
  }
  return f;
}

CheckResult run_ibcounters_check(const CheckContext& ctx) {
  IbCounterFacts facts = read_ibcounter_facts(ctx);
  auto out = evaluate_ibcounters(facts, ctx.state ? ctx.state->previous("ibcounters") : nlohmann::json(),
                                 ctx.cfg.ibcounters);
  if (ctx.state) ctx.state->set("ibcounters", out.state);
  return std::move(out.result);
}

}  // namespace gpudiag
