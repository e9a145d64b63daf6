#include "healthcheck/checks/check_xid.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "healthcheck/checks/xid_catalogue.h"
#include "healthcheck/state/run_state.h"
#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

bool listed(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

struct Seen {
  int count = 0;
  std::string last_detail;
  bool held = false;  // reported by an earlier run of this boot, no new event since
};

// Where this run starts reading: after the last run's last record on the same boot,
// else at the beginning of what the kernel still holds.
struct Window {
  std::uint64_t after_seq = 0;
  bool since_last_run = false;
  std::string why;  // for the summary when it is since boot
};

Window window_for(const XidFacts& f, const nlohmann::json& prev) {
  Window w;
  const bool usable = prev.is_object() && prev.contains("boot_id") && prev["boot_id"].is_string() &&
                      prev.contains("last_seq") && prev["last_seq"].is_number_integer() &&
                      prev["last_seq"].get<std::int64_t>() >= 0;
  if (!usable) {
    w.why = f.state_note.empty() ? "no previous run" : f.state_note;
    return w;
  }
  if (f.boot_id.empty() || prev["boot_id"].get<std::string>() != f.boot_id) {
    w.why = f.boot_id.empty() ? "the boot id is unreadable" : "the node rebooted since the last run";
    return w;
  }
  w.after_seq = prev["last_seq"].get<std::uint64_t>();
  w.since_last_run = true;
  return w;
}

Status status_for(int xid, XidClass cls, const XidSettings& cfg) {
  if (listed(cfg.ignore, xid)) return Status::ok;
  if (listed(cfg.critical, xid)) return Status::critical;
  switch (cls) {
    case XidClass::hardware: return Status::critical;
    case XidClass::attention: return Status::warning;
    case XidClass::application: return Status::ok;
  }
  return Status::warning;
}

}  // namespace

XidOutcome evaluate_xid(const XidFacts& f, const nlohmann::json& previous, const XidSettings& cfg) {
  XidOutcome out;
  CheckResult& r = out.result;
  r.name = "xid";
  if (!f.kmsg.error.empty()) {
    r.add({"kmsg", Status::unknown, fmt::format("cannot read the kernel log: {}", f.kmsg.error),
           f.kmsg.denied ? "run gpudiag-health as root: reading /dev/kmsg needs CAP_SYSLOG while "
                           "kernel.dmesg_restrict=1"
                         : "check that /dev/kmsg exists and is readable (under --fs-root, DIR/dev/kmsg must be a "
                           "regular file of kmsg records)"});
    r.summary = "kernel log unreadable";
    return out;  // state unchanged: the next run looks at what this one could not
  }
  const auto& log = f.kmsg.log;
  if (log.records.empty() && log.malformed > 0) {
    r.add({"kmsg", Status::unknown,
           fmt::format("the kernel log holds no readable record ({} lines of something else)", log.malformed),
           "under --fs-root, DIR/dev/kmsg must hold records such as `6,1234,5678,-;message`; on a host, "
           "/dev/kmsg must be the kernel's character device"});
    r.summary = "kernel log unreadable";
    return out;
  }

  const Window w = window_for(f, previous);
  std::map<std::pair<std::string, int>, Seen> seen;
  std::uint64_t last_seq = w.after_seq;
  for (const auto& rec : log.records) {
    last_seq = std::max(last_seq, rec.seq);
    if (w.since_last_run && rec.seq <= w.after_seq) continue;
    auto e = parse_xid_record(rec);
    if (!e) continue;
    auto& s = seen[{e->gpu, e->xid}];
    ++s.count;
    s.last_detail = e->detail;
  }
  // A GPU that needs a reset stays reported until the node reboots: otherwise the next
  // run is OK and `--resume` would put a node with a broken GPU back into service.
  if (w.since_last_run && previous.contains("held") && previous["held"].is_array())
    for (const auto& h : previous["held"]) {
      if (!h.is_object() || !h.contains("gpu") || !h["gpu"].is_string() || !h.contains("xid") ||
          !h["xid"].is_number_integer())
        continue;
      auto [it, fresh] = seen.try_emplace({h["gpu"].get<std::string>(), h["xid"].get<int>()});
      if (fresh) {
        it->second.held = true;
        it->second.count =
            h.contains("count") && h["count"].is_number_integer() ? std::max(1, h["count"].get<int>()) : 1;
        if (h.contains("detail") && h["detail"].is_string())
          it->second.last_detail = h["detail"].get<std::string>().substr(0, 240);
      }
    }

  int bad = 0, events = 0, held = 0;
  std::vector<std::string> gpus;
  nlohmann::json still_held = nlohmann::json::array();
  for (const auto& [key, s] : seen) {
    const auto& [gpu, xid] = key;
    (s.held ? held : events) += s.count;
    if (!s.held && std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
    auto info = find_xid(xid);
    const XidClass cls = info ? info->cls : XidClass::attention;
    const Status st = status_for(xid, cls, cfg);
    const std::string meaning = info ? info->meaning : "not in gpudiag's Xid catalogue";
    std::string times = s.count > 1 ? fmt::format(" ({} times)", s.count) : "";
    std::string msg = fmt::format("GPU {}: Xid {}, {}{}{}: {}", gpu, xid, meaning, times,
                                  s.held ? " (seen by an earlier run; held until the node reboots)" : "",
                                  s.last_detail);
    std::string hint;
    if (listed(cfg.ignore, xid)) msg += " (ignored by xid.ignore)";
    else if (info) hint = info->fix;
    else
      hint = "look it up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors) and add it to xid.critical "
             "or xid.ignore";
    if (st == Status::critical) {
      still_held.push_back({{"gpu", gpu}, {"xid", xid}, {"count", s.count}, {"detail", s.last_detail}});
      if (s.held && !f.state_path.empty())
        hint += fmt::format("; once the GPU was reset without a reboot, remove {} to clear this", f.state_path);
    }
    if (st != Status::ok) ++bad;
    r.add({gpu, st, msg, hint});
    r.metrics.push_back({"gpudiag_xid_events",
                         "Xid events per GPU since the last run (or boot); ones that need a reset count until reboot.",
                         {{"gpu", gpu}, {"xid", std::to_string(xid)}}, static_cast<double>(s.count)});
  }
  if (log.malformed > 0)
    r.add({"kmsg", Status::ok,
           fmt::format("{} lines of the kernel log are not kmsg records and were skipped", log.malformed), ""});
  // The ring buffer wrapped since the last run: what was logged in between is gone.
  const bool gap = w.since_last_run && !log.records.empty() && log.records.front().seq > w.after_seq + 1;
  if (log.overwritten || gap)
    r.add({"kmsg", Status::ok,
           "older kernel log records were overwritten before they were read: Xids in them are not seen",
           gap ? "run gpudiag-health more often, or enlarge the kernel log buffer (log_buf_len=)" : ""});

  const std::string since = w.since_last_run ? "since the last run" : "since boot (" + w.why + ")";
  r.summary = events == 0 ? "no Xid " + since
                          : fmt::format("{} Xid event(s) on {} GPU(s) {}{}", events, gpus.size(), since,
                                        bad ? "" : ", none that needs the node looked at");
  if (held) r.summary += fmt::format("; {} earlier one(s) held until reboot", held);
  if (!w.since_last_run && !f.state_note.empty())
    r.add({"run-state", Status::ok, f.state_note, ""});
  out.state = {{"boot_id", f.boot_id}, {"last_seq", last_seq}, {"held", still_held}};
  return out;
}

XidFacts read_xid_facts(const CheckContext& ctx) {
  XidFacts f;
  f.kmsg = read_kmsg(ctx.fs);
  constexpr const char* kBootId = "/proc/sys/kernel/random/boot_id";
  if (auto raw = ctx.fs.read_file(kBootId, 256))
    if (auto id = attribute_text(*raw, kBootId)) f.boot_id = *id;
  if (ctx.state) {
    f.state_note = ctx.state->note();
    if (ctx.state->enabled()) f.state_path = ctx.state->path();
  }
  return f;
}

CheckResult run_xid_check(const CheckContext& ctx) {
  XidFacts facts = read_xid_facts(ctx);
  auto out = evaluate_xid(facts, ctx.state ? ctx.state->previous("xid") : nlohmann::json(), ctx.cfg.xid);
  if (ctx.state && !out.state.is_null()) ctx.state->set("xid", out.state);
  return std::move(out.result);
}

}  // namespace gpudiag
