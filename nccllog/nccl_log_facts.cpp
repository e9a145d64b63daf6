#include "nccllog/nccl_log_facts.h"

#include <charconv>

namespace gpudiag {
namespace {

bool starts(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool has(std::string_view s, std::string_view p) { return s.find(p) != std::string_view::npos; }

std::string_view token_at(std::string_view s, std::size_t pos) {
  std::size_t end = s.find_first_of(" ,;", pos);
  return s.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
}

// The token after " key " (or after "key " at the start).
std::optional<std::string_view> value_after(std::string_view msg, std::string_view key) {
  std::size_t pos = 0;
  while ((pos = msg.find(key, pos)) != std::string_view::npos) {
    bool at_word = pos == 0 || msg[pos - 1] == ' ';
    std::size_t after = pos + key.size();
    if (at_word && after < msg.size() && msg[after] == ' ') return token_at(msg, after + 1);
    pos = after;
  }
  return std::nullopt;
}

std::optional<int> to_int(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string_view> nccl_version_of(std::string_view msg) {
  if (!starts(msg, "NCCL version ")) return std::nullopt;
  std::string_view v = token_at(msg, 13);
  v = v.substr(0, v.find('+'));
  if (v.empty() || v[0] < '0' || v[0] > '9') return std::nullopt;
  return v;
}

std::optional<std::string_view> bare_nccl_version_of(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::size_t pos = 0;
  while ((pos = line.find("NCCL version ", pos)) != std::string_view::npos) {
    // At the start, or after a prefix that ends in a space ("[host:0] ", a timestamp).
    if (pos == 0 || line[pos - 1] == ' ') return nccl_version_of(line.substr(pos));
    pos += 13;
  }
  return std::nullopt;
}

std::optional<std::string_view> network_of(std::string_view msg) {
  if (!starts(msg, "Using network ")) return std::nullopt;
  std::string_view v = msg.substr(14);
  while (!v.empty() && (v.back() == ' ' || v.back() == '.')) v.remove_suffix(1);
  if (v.empty()) return std::nullopt;
  return v;
}

std::optional<NetUsing> net_using_of(std::string_view msg) {
  NetUsing out;
  std::string_view rest;
  if (starts(msg, "NET/IB : Using ") || starts(msg, "NET/IB: Using ")) {
    out.ib = true;
    rest = msg.substr(msg.find("Using ") + 6);
  } else if (starts(msg, "NET/Socket : Using ") || starts(msg, "NET/Socket: Using ")) {
    rest = msg.substr(msg.find("Using ") + 6);
  } else {
    return std::nullopt;
  }
  std::string_view devs = rest.substr(0, rest.find(';'));
  std::size_t pos = 0;
  while ((pos = devs.find('[', pos)) != std::string_view::npos) {
    std::size_t close = devs.find(']', pos);
    if (close == std::string_view::npos) break;
    std::string_view idx = devs.substr(pos + 1, close - pos - 1);
    pos = close + 1;
    if (!to_int(idx)) continue;  // "[RO]" and other flags
    std::string_view tok = token_at(devs, pos);
    NetDevice d;
    std::size_t colon = tok.find(':');
    d.name = std::string(tok.substr(0, colon));
    if (out.ib && colon != std::string_view::npos) {
      std::string_view pl = tok.substr(colon + 1);
      std::size_t slash = pl.find('/');
      d.port = std::string(pl.substr(0, slash));
      if (slash != std::string_view::npos) d.link_layer = std::string(pl.substr(slash + 1));
    }
    if (!d.name.empty()) out.devices.push_back(std::move(d));
  }
  if (auto oob = rest.find("OOB "); oob != std::string_view::npos) {
    std::string_view tok = token_at(rest, oob + 4);
    out.oob = std::string(tok.substr(0, tok.find(':')));
  }
  return out;
}

bool is_ib_no_device(std::string_view msg) {
  return (starts(msg, "NET/IB : ") || starts(msg, "NET/IB: ")) && has(msg, "No device found");
}

std::optional<std::string_view> gdr_disabled_hca_of(std::string_view msg) {
  if (!starts(msg, "NET/IB")) return std::nullopt;
  std::size_t p = msg.find("GPU Direct RDMA Disabled for HCA ");
  if (p == std::string_view::npos) return std::nullopt;
  std::size_t q1 = msg.find('\'', p);
  if (q1 == std::string_view::npos) return std::nullopt;
  std::size_t q2 = msg.find('\'', q1 + 1);
  if (q2 == std::string_view::npos || q2 == q1 + 1) return std::nullopt;
  return msg.substr(q1 + 1, q2 - q1 - 1);
}

bool is_ib_disabled_by_env(std::string_view msg) {
  if (!starts(msg, "NCCL_IB_DISABLE set by environment to ")) return false;
  std::string_view v = msg.substr(38);
  while (!v.empty() && (v.back() == '.' || v.back() == ' ')) v.remove_suffix(1);
  auto n = to_int(v);
  return n && *n != 0;
}

namespace {

// "NAME set by environment to VALUE" or "NAME set to VALUE", a trailing period dropped.
std::optional<std::string_view> env_setting_of(std::string_view msg, std::string_view name) {
  if (!starts(msg, name)) return std::nullopt;
  std::string_view rest = msg.substr(name.size());
  for (std::string_view form : {" set by environment to ", " set to "})
    if (starts(rest, form)) {
      std::string_view v = rest.substr(form.size());
      while (!v.empty() && (v.back() == '.' || v.back() == ' ' || v.back() == '\r')) v.remove_suffix(1);
      if (v.empty()) return std::nullopt;
      return v;
    }
  return std::nullopt;
}

}  // namespace

std::optional<std::string_view> socket_ifname_of(std::string_view msg) {
  return env_setting_of(msg, "NCCL_SOCKET_IFNAME");
}

std::optional<std::string_view> ib_hca_of(std::string_view msg) { return env_setting_of(msg, "NCCL_IB_HCA"); }

bool is_no_socket_interface(std::string_view msg) {
  return (starts(msg, "Bootstrap") && has(msg, "no socket interface found")) ||
         (starts(msg, "NET/Socket") && (has(msg, "No usable listening interface found") ||
                                        has(msg, "no usable listening interface found")));
}

std::optional<std::string_view> bootstrap_iface_of(std::string_view msg) {
  if (!starts(msg, "Bootstrap")) return std::nullopt;
  std::size_t u = msg.find("Using ");
  if (u == std::string_view::npos || u > 16) return std::nullopt;
  std::string_view tok = token_at(msg, u + 6);
  tok = tok.substr(0, tok.find(':'));
  if (tok.empty()) return std::nullopt;
  return tok;
}

std::optional<std::string> net_plugin_of(std::string_view msg) {
  if (!starts(msg, "NET/Plugin")) return std::nullopt;
  if (auto p = msg.find("Loaded net plugin "); p != std::string_view::npos) {
    std::string_view name = msg.substr(p + 18);
    name = name.substr(0, name.find(" ("));
    return std::string(name);
  }
  if (has(msg, "internal")) return std::string("internal");
  return std::nullopt;
}

std::optional<std::string> channel_transport_of(std::string_view msg) {
  if (!starts(msg, "Channel ")) return std::nullopt;
  std::size_t via = msg.find(" via ");
  if (via == std::string_view::npos) return std::nullopt;
  std::string_view t = token_at(msg, via + 5);
  std::string out;
  std::size_t pos = 0;
  while (pos <= t.size()) {
    std::size_t slash = t.find('/', pos);
    std::string_view part = t.substr(pos, slash == std::string_view::npos ? std::string_view::npos : slash - pos);
    if (!part.empty() && !to_int(part)) out += (out.empty() ? "" : "/") + std::string(part);
    if (slash == std::string_view::npos) break;
    pos = slash + 1;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<CommInit> comm_init_of(std::string_view msg) {
  CommInit c;
  c.start = has(msg, "Init START");
  c.complete = has(msg, "Init COMPLETE");
  if (!c.start && !c.complete) return std::nullopt;
  auto comm = value_after(msg, "comm");
  auto rank = value_after(msg, "rank");
  auto nranks = value_after(msg, "nranks");
  if (!comm || !rank || !nranks) return std::nullopt;
  auto r = to_int(*rank), n = to_int(*nranks);
  if (!r || !n || *r < 0 || *n <= 0 || *r >= *n) return std::nullopt;
  c.comm = std::string(*comm);
  c.rank = *r;
  c.nranks = *n;
  if (auto id = value_after(msg, "commId")) c.comm_id = std::string(*id);
  return c;
}

std::optional<CollCall> collective_of(std::string_view msg) {
  std::size_t colon = msg.find(": opCount ");
  if (colon == std::string_view::npos || colon == 0 || colon > 32) return std::nullopt;
  CollCall c;
  c.name = msg.substr(0, colon);
  for (char ch : c.name)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z'))) return std::nullopt;
  c.op_count = token_at(msg, colon + 10);
  if (auto comm = value_after(msg, "comm")) c.comm = *comm;
  return c;
}

std::optional<int> ib_completion_error_of(std::string_view msg) {
  if (!has(msg, "Got completion from peer")) return std::nullopt;
  std::string_view num;
  if (auto p = msg.find("with error "); p != std::string_view::npos) num = token_at(msg, p + 11);
  else if (auto q = msg.find("status="); q != std::string_view::npos) num = token_at(msg, q + 7);
  else return std::nullopt;
  return to_int(num);
}

bool is_shm_failure(std::string_view msg) {
  return has(msg, "/dev/shm") && (has(msg, "failed") || has(msg, "Error") || has(msg, "No space"));
}
bool is_reg_mr_failure(std::string_view msg) { return has(msg, "ibv_reg_mr") && has(msg, "failed"); }
bool is_p2p_disabled(std::string_view msg) {
  return has(msg, "P2P is disabled") || has(msg, "peer access is not supported") ||
         starts(msg, "NCCL_P2P_DISABLE set by environment to 1");
}
bool is_duplicate_gpu(std::string_view msg) { return has(msg, "Duplicate GPU detected"); }

}  // namespace gpudiag
