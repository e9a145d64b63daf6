#include "nccllog/nccl_log_analyzer.h"

#include <charconv>

#include <algorithm>

#include "nccllog/nccl_log_facts.h"
#include "nccllog/nccl_log_line.h"
#include "util/control_bytes.h"

namespace gpudiag {
namespace {

// Pointers and addresses differ on every rank: blank them so that one problem on
// many ranks is one group.
std::string normalise_warning(std::string_view msg) {
  std::string out;
  out.reserve(std::min<std::size_t>(msg.size(), 240));
  for (std::size_t i = 0; i < msg.size() && out.size() < 240; ++i) {
    if (msg[i] == '0' && i + 1 < msg.size() && msg[i + 1] == 'x') {
      out += "0x?";
      i += 2;
      while (i < msg.size() && std::isxdigit(static_cast<unsigned char>(msg[i]))) ++i;
      --i;
    } else if (std::size_t n = control_length(msg, i)) {
      out += ' ';
      i += n - 1;
    } else {
      out += msg[i];
    }
  }
  return out;
}

void add_unique(std::vector<std::string>& v, std::string s) {
  if (std::find(v.begin(), v.end(), s) == v.end() && v.size() < 64) v.push_back(std::move(s));
}

// Not every log holds "Using network X" (it depends on NCCL_DEBUG_SUBSYS and the
// version): the channels, then the devices NCCL opened, say which network it used.
std::string inferred_network(const NcclProcess& p) {
  bool ib_chan = false, sock_chan = false;
  for (const auto& [t, n] : p.transports) {
    ib_chan |= t.rfind("NET/IB", 0) == 0;
    sock_chan |= t.rfind("NET/Socket", 0) == 0;
  }
  if (ib_chan != sock_chan) return ib_chan ? "IB" : "Socket";
  if (!p.ib_devices.empty()) return "IB";
  if (!p.socket_devices.empty()) return "Socket";
  return "";
}

// NCCL_DEBUG_FILE=nccl.%h.%p.log (what --diag sets) names the process that wrote it.
std::pair<std::string, std::string> origin_from_file_name(const std::string& source) {
  std::string base = source.substr(source.rfind('/') == std::string::npos ? 0 : source.rfind('/') + 1);
  if (base.rfind("nccl.", 0) == 0 && base.size() > 9 && base.compare(base.size() - 4, 4, ".log") == 0) {
    std::string mid = base.substr(5, base.size() - 9);
    std::size_t dot = mid.rfind('.');
    if (dot != std::string::npos && dot > 0 && dot + 1 < mid.size() &&
        mid.find_first_not_of("0123456789", dot + 1) == std::string::npos)
      return {mid.substr(0, dot), mid.substr(dot + 1)};
  }
  return {base, "?"};
}

}  // namespace

const CommInfo* NcclProcess::world() const {
  const CommInfo* best = nullptr;
  for (const auto& [ptr, c] : comms)
    if (!best || c.nranks > best->nranks) best = &c;
  return best;
}

std::string NcclProcess::label() const {
  const CommInfo* w = world();
  return w && w->rank >= 0 ? host + ":" + std::to_string(w->rank) : host + ":pid" + pid;
}

NcclProcess* NcclLogAnalyzer::process(std::string_view host, std::string_view pid, std::string_view source) {
  key_.assign(host);
  key_ += ':';
  key_.append(pid);
  auto it = procs_.find(key_);
  if (it != procs_.end()) return &it->second;
  if (procs_.size() >= kMaxProcesses) return nullptr;
  NcclProcess p;
  p.host = std::string(host);
  p.pid = std::string(pid);
  p.source = std::string(source);
  return &procs_.emplace(key_, std::move(p)).first->second;
}

void NcclLogAnalyzer::note_warning(std::string_view msg, const std::string& key) {
  std::string text = normalise_warning(msg);
  auto it = warns_.find(text);
  if (it == warns_.end()) {
    if (warns_.size() >= kMaxWarnGroups) {
      ++out_.warn_groups_dropped;
      return;
    }
    it = warns_.emplace(text, WarnGroup{text, 0, {}, {}}).first;
  }
  ++it->second.count;
  if (it->second.keys.size() < 4096) it->second.keys.insert(key);
}

void NcclLogAnalyzer::note_collective(NcclProcess& p, const std::string& key, std::string_view name,
                                      std::string_view op_count, std::string_view comm) {
  auto counted = p.collectives.find(name);
  if (counted == p.collectives.end()) counted = p.collectives.emplace(std::string(name), 0).first;
  ++counted->second;
  // Only calls on one communicator are comparable. commId names it across ranks (NCCL
  // 2.13+); before that, the comm's size does when the process has one comm that size.
  auto c = p.comms.find(comm);
  if (c == p.comms.end()) return;
  // opCount is hex and grows per comm: the highest one is where this rank got to.
  std::uint64_t op = 0;
  auto [end, ec] = std::from_chars(op_count.data(), op_count.data() + op_count.size(), op, 16);
  if (ec == std::errc() && end == op_count.data() + op_count.size() &&
      (c->second.last_coll.empty() || op >= c->second.last_op)) {
    c->second.last_op = op;
    c->second.last_coll = std::string(name);
  }
  std::string group = c->second.comm_id;
  if (group.empty()) {
    int same = 0;
    for (const auto& [ptr, other] : p.comms) same += other.nranks == c->second.nranks;
    if (same != 1) return;
    group = "nranks=" + std::to_string(c->second.nranks);
  }
  auto op_key = std::make_pair(group, std::string(op_count));
  auto it = ops_.find(op_key);
  if (it == ops_.end()) {
    if (ops_.size() >= kMaxTrackedOps) ops_.erase(ops_.begin());
    ops_.emplace(op_key, std::make_pair(key, std::string(name)));
    return;
  }
  if (it->second.second == name || it->second.first == key) return;
  auto& m = mismatches_[op_key];
  if (m.calls.empty()) {
    m.group = group;
    m.op_count = std::string(op_count);
    m.calls.emplace_back(it->second.first, it->second.second);
  }
  if (m.calls.size() < 64) m.calls.emplace_back(key, std::string(name));
}

void NcclLogAnalyzer::add_line(std::string_view line, std::string_view source) {
  ++out_.lines;
  auto parsed = parse_nccl_line(line);
  if (!parsed) {
    if (auto v = bare_nccl_version_of(line)) {
      ++out_.nccl_lines;
      auto it = bare_versions_.find(source);
      if (it == bare_versions_.end()) bare_versions_.emplace(std::string(source), std::string(*v));
      else if (it->second != *v) it->second.clear();
    }
    return;
  }
  ++out_.nccl_lines;
  const NcclLine& l = *parsed;
  NcclProcess* kept = process(l.host, l.pid, source);
  if (!kept) {
    ++out_.process_lines_dropped;
    return;
  }
  NcclProcess& p = *kept;
  const std::string& key = key_;
  ++p.lines;
  const std::string_view m = l.msg;
  if (l.level == NcclLevel::warn) {
    ++p.warnings;
    note_warning(m, key);
  }
  if (auto v = nccl_version_of(m)) {
    p.version = std::string(*v);
  } else if (auto n = network_of(m)) {
    p.network = std::string(*n);
  } else if (auto u = net_using_of(m)) {
    for (const auto& d : u->devices)
      add_unique(u->ib ? p.ib_devices : p.socket_devices, u->ib ? d.name + ":" + d.port + "/" + d.link_layer : d.name);
    if (!u->oob.empty()) p.oob = u->oob;
  } else if (is_ib_no_device(m)) {
    p.ib_no_device = true;
  } else if (auto ifn = socket_ifname_of(m)) {
    p.socket_ifname = std::string(ifn->substr(0, 256));
  } else if (auto hca = ib_hca_of(m)) {
    p.ib_hca = std::string(hca->substr(0, 256));
  } else if (is_no_socket_interface(m)) {
    p.no_socket_iface = true;
  } else if (auto g = gdr_disabled_hca_of(m)) {
    add_unique(p.gdr_disabled, std::string(*g));
  } else if (is_ib_disabled_by_env(m)) {
    p.ib_disabled_by_env = true;
  } else if (auto b = bootstrap_iface_of(m)) {
    if (p.oob.empty()) p.oob = std::string(*b);
  } else if (auto pl = net_plugin_of(m)) {
    p.plugin = *pl;
  } else if (auto t = channel_transport_of(m)) {
    ++p.transports[*t];
  } else if (auto ci = comm_init_of(m)) {
    CommInfo& c = p.comms[ci->comm];
    if (!ci->comm_id.empty()) c.comm_id = ci->comm_id;
    c.rank = ci->rank;
    c.nranks = ci->nranks;
    c.started |= ci->start;
    c.complete |= ci->complete;
  } else if (auto coll = collective_of(m)) {
    note_collective(p, key, coll->name, coll->op_count, coll->comm);
  }
  // The failures below are WARN lines (P2P also has an INFO form); scanning only those
  // keeps the per-line cost of a COLL-heavy log low.
  if (l.level == NcclLevel::warn) {
    if (auto e = ib_completion_error_of(m)) ++p.ib_errors[*e];
    if (is_shm_failure(m)) p.shm_failed = true;
    if (is_reg_mr_failure(m)) p.reg_mr_failed = true;
    if (is_duplicate_gpu(m)) p.duplicate_gpu = true;
  }
  if ((l.level == NcclLevel::warn || (!m.empty() && (m[0] == 'N' || m[0] == 'P'))) && is_p2p_disabled(m))
    p.p2p_disabled = true;
}

// A bare version line carries no host:pid: it belongs to the processes of its file
// that logged no version of their own, or, alone in its file, to the file's writer.
void NcclLogAnalyzer::apply_bare_versions() {
  for (const auto& [source, version] : bare_versions_) {
    if (version.empty()) continue;
    bool any = false;
    for (auto& [key, p] : procs_) {
      if (p.source != source) continue;
      any = true;
      if (p.version.empty()) p.version = version;
    }
    if (any) continue;
    auto [host, pid] = origin_from_file_name(source);
    NcclProcess* p = process(host, pid, source);
    if (p && p->version.empty()) p->version = version;
  }
  bare_versions_.clear();
}

NcclLogAnalysis NcclLogAnalyzer::finish() {
  apply_bare_versions();
  for (auto& [key, p] : procs_)
    if (p.network.empty()) p.network = inferred_network(p);
  NcclLogAnalysis out = std::move(out_);
  std::map<std::string, std::string> labels;
  for (auto& [key, p] : procs_) labels[key] = p.label();
  for (auto& [key, p] : procs_) out.processes.push_back(std::move(p));
  std::sort(out.processes.begin(), out.processes.end(), [](const NcclProcess& a, const NcclProcess& b) {
    const CommInfo* wa = a.world();
    const CommInfo* wb = b.world();
    int ra = wa ? wa->rank : 1 << 30, rb = wb ? wb->rank : 1 << 30;
    if (ra != rb) return ra < rb;
    if (a.host != b.host) return a.host < b.host;
    return a.pid < b.pid;
  });
  for (auto& [text, w] : warns_) {
    for (const auto& k : w.keys) w.who.insert(labels.count(k) ? labels[k] : k);
    w.keys.clear();
    out.warnings.push_back(std::move(w));
  }
  std::stable_sort(out.warnings.begin(), out.warnings.end(),
                   [](const WarnGroup& a, const WarnGroup& b) { return a.count > b.count; });
  for (auto& [op, m] : mismatches_) {
    for (auto& c : m.calls) c.first = labels.count(c.first) ? labels[c.first] : c.first;
    out.mismatches.push_back(std::move(m));
  }
  procs_.clear();
  warns_.clear();
  ops_.clear();
  mismatches_.clear();
  out_ = NcclLogAnalysis{};
  return out;
}

}  // namespace gpudiag
