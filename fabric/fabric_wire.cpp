#include "fabric/fabric_wire.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "util/control_bytes.h"

namespace gpudiag::fabric {
namespace {

using nlohmann::json;

constexpr const char* kTag = "gpudiag-fabric";
constexpr std::size_t kWordMax = 255;
constexpr std::size_t kValueMax = 4096;
constexpr std::size_t kListMax = 256;
constexpr std::uint32_t kCountMax = 1u << 20;

// A decimal number as the formatters write it: digits, no leading zero.
std::optional<std::uint64_t> number(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 19 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  if (!std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); })) return std::nullopt;
  const std::uint64_t v = std::stoull(s);
  if (v > max) return std::nullopt;
  return v;
}

// A name that reaches the user's terminal: one printable word.
bool word(const std::string& s) {
  return !s.empty() && s.size() <= kWordMax && is_one_printable_line(s) && s.find(' ') == std::string::npos;
}

bool env_name(const std::string& s) {
  return !s.empty() && s.size() <= 128 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isupper(c) || std::isdigit(c) || c == '_'; });
}

bool numeric_addr(const std::string& s) {
  unsigned char buf[16];
  return ::inet_pton(AF_INET, s.c_str(), buf) == 1 || ::inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

std::vector<std::string> split_spaces(const std::string& line, std::size_t n) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (out.size() < n) {
    std::size_t sp = out.size() + 1 == n ? std::string::npos : line.find(' ', start);
    out.push_back(line.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
    if (sp == std::string::npos) break;
    start = sp + 1;
  }
  if (out.size() != n) out.clear();
  return out;
}

std::uint32_t count(const json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > kCountMax) throw std::runtime_error(key);
  return v.get<std::uint32_t>();
}

std::string text(const json& j, const char* key, bool must_be_word) {
  const auto& v = j.at(key);
  if (!v.is_string()) throw std::runtime_error(key);
  std::string s = v.get<std::string>();
  if (s.empty() && !must_be_word) return s;
  if (must_be_word ? !word(s) : (s.size() > kValueMax || !is_one_printable_line(s))) throw std::runtime_error(key);
  return s;
}

std::vector<std::string> words(const json& j, const char* key) {
  const auto& v = j.at(key);
  if (!v.is_array() || v.size() > kListMax) throw std::runtime_error(key);
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string() || !word(e.get<std::string>())) throw std::runtime_error(key);
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

std::string format_endpoint(const Endpoint& e) { return std::to_string(e.port) + ":" + e.token + ":" + e.proof; }

std::optional<Endpoint> parse_endpoint(const std::string& value) {
  const auto colon = value.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto second = value.find(':', colon + 1);
  if (second == std::string::npos) return std::nullopt;
  auto port = number(value.substr(0, colon), 65535);
  const std::string token = value.substr(colon + 1, second - colon - 1), proof = value.substr(second + 1);
  if (!port || *port == 0 || !is_step_token(token) || !is_step_token(proof)) return std::nullopt;
  return Endpoint{static_cast<int>(*port), token, proof};
}

std::string format_srun_proof(const std::string& proof) { return "srun " + proof + "\n"; }

bool is_srun_proof(const std::string& line, const std::string& proof) {
  return line.size() == 5 + proof.size() && line.compare(0, 5, "srun ") == 0 && same_token(line.substr(5), proof);
}

std::string format_hello(const std::string& token, const TaskHello& h) {
  json j = {{"rank", h.rank},           {"node_id", h.node_id},     {"nnodes", h.nnodes},
            {"local_rank", h.local_rank}, {"local_tasks", h.local_tasks}, {"node", h.node},
            {"launcher", h.launcher},   {"env", h.env},             {"injected", h.injected},
            {"listen_addr", h.listen_addr}, {"listen_port", h.listen_port}, {"listen_error", h.listen_error},
            {"rdma_hca", h.rdma_hca},   {"rdma_none", h.rdma_none},     {"nccl", h.nccl},
            {"nccl_none", h.nccl_none}};
  if (h.facts) {
    const NodeFacts& f = *h.facts;
    j["facts"] = {{"driver", f.driver}, {"kernel", f.kernel}, {"rdma_core", f.rdma_core}, {"hcas", f.hcas},
                  {"interfaces", f.interfaces}};
  }
  // ensure_ascii: the line stays printable whatever a value holds.
  return std::string(kTag) + " " + token + " hello " + j.dump(-1, ' ', true, json::error_handler_t::replace) + "\n";
}

std::optional<TaskHello> parse_hello(const std::string& line, const std::string& token) {
  if (line.size() >= kHelloMax) return std::nullopt;
  auto f = split_spaces(line, 4);
  if (f.empty() || f[0] != kTag || !same_token(f[1], token) || f[2] != "hello") return std::nullopt;
  try {
    const json j = json::parse(f[3]);
    if (!j.is_object()) return std::nullopt;
    TaskHello h;
    h.rank = count(j, "rank");
    h.node_id = count(j, "node_id");
    h.nnodes = count(j, "nnodes");
    h.local_rank = count(j, "local_rank");
    h.local_tasks = count(j, "local_tasks");
    if (h.nnodes == 0 || h.node_id >= h.nnodes || h.local_tasks == 0 || h.local_rank >= h.local_tasks)
      return std::nullopt;
    h.node = text(j, "node", true);
    h.launcher = text(j, "launcher", false);
    if (!h.launcher.empty() && h.launcher != "torchrun") return std::nullopt;
    const json& env = j.at("env");
    if (!env.is_object() || env.size() > kListMax) return std::nullopt;
    for (const auto& [k, v] : env.items()) {
      if (!env_name(k) || !v.is_string()) return std::nullopt;
      const std::string value = v.get<std::string>();
      if (value.size() > kValueMax || !is_one_printable_line(value)) return std::nullopt;
      h.env[k] = value;
    }
    for (const auto& name : words(j, "injected")) {
      if (!env_name(name)) return std::nullopt;
      h.injected.insert(name);
    }
    h.listen_addr = text(j, "listen_addr", false);
    if (!h.listen_addr.empty() && !numeric_addr(h.listen_addr)) return std::nullopt;
    const auto& port = j.at("listen_port");
    if (!port.is_number_integer() || port.get<long long>() < 0 || port.get<long long>() > 65535) return std::nullopt;
    h.listen_port = port.get<int>();
    h.listen_error = text(j, "listen_error", false);
    // Optional: a task of an older plugin says nothing of RDMA.
    if (j.contains("rdma_hca")) h.rdma_hca = text(j, "rdma_hca", false);
    if (j.contains("rdma_none")) h.rdma_none = text(j, "rdma_none", false);
    if (h.rdma_hca.size() > kWordMax || h.rdma_hca.find(' ') != std::string::npos) return std::nullopt;
    if (j.contains("nccl")) {
      if (!j.at("nccl").is_boolean()) return std::nullopt;
      h.nccl = j.at("nccl").get<bool>();
    }
    if (j.contains("nccl_none")) h.nccl_none = text(j, "nccl_none", false);
    if (j.contains("facts")) {
      const json& fj = j.at("facts");
      if (!fj.is_object()) return std::nullopt;
      NodeFacts nf;
      nf.driver = text(fj, "driver", false);
      nf.kernel = text(fj, "kernel", false);
      nf.rdma_core = text(fj, "rdma_core", false);
      nf.hcas = words(fj, "hcas");
      nf.interfaces = words(fj, "interfaces");
      h.facts = nf;
    }
    return h;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

// "PEER ok[ REST]" or "PEER err TEXT" after a report's or order's verb.
std::string outcome(std::uint32_t peer, const std::string& error, const std::string& rest) {
  return std::to_string(peer) + (error.empty() ? " ok" + (rest.empty() ? "" : " " + rest) : " err " + error);
}

// Splits "PEER ok[ REST]" / "PEER err TEXT"; false for anything else.
bool parse_outcome(const std::string& s, std::uint32_t& peer, std::string& error, std::string& rest) {
  auto sp = s.find(' ');
  auto p = number(s.substr(0, sp), kCountMax);
  if (!p || sp == std::string::npos) return false;
  peer = static_cast<std::uint32_t>(*p);
  const std::string tail = s.substr(sp + 1);
  if (tail == "ok") return true;
  if (tail.rfind("ok ", 0) == 0) {
    rest = tail.substr(3);
    return !rest.empty();
  }
  if (tail.rfind("err ", 0) != 0 || tail.size() == 4) return false;
  error = tail.substr(4);
  return true;
}

}  // namespace

std::string format_test_report(const TestReport& r) {
  switch (r.kind) {
    case TestReport::kReceived:
      return "rx " + std::to_string(r.peer) + " " + std::to_string(r.bytes) + " " + std::to_string(r.usec) + "\n";
    case TestReport::kSent: return "tx " + outcome(r.peer, r.error, "") + "\n";
    case TestReport::kQp: return "qp " + outcome(r.peer, r.error, r.error.empty() ? format_qp_info(r.qp) : "") + "\n";
    case TestReport::kReady: return "ready " + outcome(r.peer, r.error, "") + "\n";
    case TestReport::kWritten:
      return "wtx " +
             outcome(r.peer, r.error, r.error.empty() ? std::to_string(r.bytes) + " " + std::to_string(r.usec) : "") +
             "\n";
    case TestReport::kNcclId: return "nid " + outcome(r.peer, r.error, r.error.empty() ? r.nccl_id : "") + "\n";
    case TestReport::kNcclDone:
      return "nrx " +
             outcome(r.peer, r.error, r.error.empty() ? std::to_string(r.bytes) + " " + std::to_string(r.usec) : "") +
             "\n";
  }
  return "\n";
}

std::optional<TestReport> parse_test_report(const std::string& line) {
  if (line.size() >= kLineMax || !is_one_printable_line(line)) return std::nullopt;
  TestReport r;
  if (line.rfind("rx ", 0) == 0) {
    auto f = split_spaces(line, 4);
    if (f.empty()) return std::nullopt;
    auto peer = number(f[1], kCountMax), bytes = number(f[2], 1ull << 50), usec = number(f[3], 1ull << 40);
    if (!peer || !bytes || !usec) return std::nullopt;
    r.peer = static_cast<std::uint32_t>(*peer);
    r.bytes = *bytes;
    r.usec = *usec;
    return r;
  }
  const auto sp = line.find(' ');
  if (sp == std::string::npos) return std::nullopt;
  const std::string verb = line.substr(0, sp);
  std::string rest;
  if (!parse_outcome(line.substr(sp + 1), r.peer, r.error, rest)) return std::nullopt;
  if (verb == "tx" || verb == "ready") {
    r.kind = verb == "tx" ? TestReport::kSent : TestReport::kReady;
    return rest.empty() ? std::optional<TestReport>(r) : std::nullopt;
  }
  if (verb == "qp") {
    r.kind = TestReport::kQp;
    if (!r.error.empty()) return r;
    auto q = parse_qp_info(rest);
    if (!q) return std::nullopt;
    r.qp = *q;
    return r;
  }
  if (verb == "nid") {
    r.kind = TestReport::kNcclId;
    if (!r.error.empty()) return r;
    if (rest.size() != kNcclIdHex || !std::all_of(rest.begin(), rest.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }))
      return std::nullopt;
    r.nccl_id = rest;
    return r;
  }
  if (verb == "wtx" || verb == "nrx") {
    r.kind = verb == "wtx" ? TestReport::kWritten : TestReport::kNcclDone;
    if (!r.error.empty()) return r;
    auto f = split_spaces(rest, 2);
    if (f.empty()) return std::nullopt;
    auto bytes = number(f[0], 1ull << 50), usec = number(f[1], 1ull << 40);
    if (!bytes || !usec) return std::nullopt;
    r.bytes = *bytes;
    r.usec = *usec;
    return r;
  }
  return std::nullopt;
}

std::string format_order(const Order& o) {
  switch (o.kind) {
    case Order::kEnd: return o.ok ? "end ok\n" : "end fail\n";
    case Order::kSend:
      return "send " + std::to_string(o.peer) + " " + o.addr + " " + std::to_string(o.port) + " " +
             std::to_string(o.ms) + "\n";
    case Order::kQp: return "qp " + std::to_string(o.peer) + "\n";
    case Order::kConnect: return "connect " + std::to_string(o.peer) + " " + format_qp_info(o.qp) + "\n";
    case Order::kWrite: return "write " + std::to_string(o.peer) + " " + std::to_string(o.ms) + "\n";
    case Order::kNccl:
      return "nccl " + std::to_string(o.peer) + " " + std::to_string(o.rank) + (o.rank == 1 ? " " + o.nccl_id : "") +
             "\n";
  }
  return "\n";
}

std::optional<Order> parse_order(const std::string& line) {
  if (line == "end ok" || line == "end fail") return Order{Order::kEnd, 0, "", 0, 0, line == "end ok", {}};
  if (line.size() >= kLineMax) return std::nullopt;
  if (line.rfind("send ", 0) == 0) {
    auto f = split_spaces(line, 5);
    if (f.empty()) return std::nullopt;
    auto peer = number(f[1], kCountMax), port = number(f[3], 65535), ms = number(f[4], 60000);
    if (!peer || !port || *port == 0 || !ms || !numeric_addr(f[2])) return std::nullopt;
    return Order{Order::kSend, static_cast<std::uint32_t>(*peer), f[2], static_cast<int>(*port),
                 static_cast<std::uint32_t>(*ms), false, {}};
  }
  Order o;
  if (line.rfind("qp ", 0) == 0) {
    auto peer = number(line.substr(3), kCountMax);
    if (!peer) return std::nullopt;
    o.kind = Order::kQp;
    o.peer = static_cast<std::uint32_t>(*peer);
    return o;
  }
  if (line.rfind("write ", 0) == 0) {
    auto f = split_spaces(line, 3);
    if (f.empty()) return std::nullopt;
    auto peer = number(f[1], kCountMax), ms = number(f[2], 60000);
    if (!peer || !ms) return std::nullopt;
    o.kind = Order::kWrite;
    o.peer = static_cast<std::uint32_t>(*peer);
    o.ms = static_cast<std::uint32_t>(*ms);
    return o;
  }
  if (line.rfind("nccl ", 0) == 0) {
    auto f = split_spaces(line, 3);
    if (f.empty()) return std::nullopt;
    auto peer = number(f[1], kCountMax);
    if (!peer) return std::nullopt;
    o.kind = Order::kNccl;
    o.peer = static_cast<std::uint32_t>(*peer);
    if (f[2] == "0") return o;
    if (f[2].rfind("1 ", 0) != 0) return std::nullopt;
    o.rank = 1;
    o.nccl_id = f[2].substr(2);
    if (o.nccl_id.size() != kNcclIdHex || !std::all_of(o.nccl_id.begin(), o.nccl_id.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        }))
      return std::nullopt;
    return o;
  }
  if (line.rfind("connect ", 0) == 0) {
    auto f = split_spaces(line, 3);
    if (f.empty()) return std::nullopt;
    auto peer = number(f[1], kCountMax);
    auto q = parse_qp_info(f[2]);
    if (!peer || !q) return std::nullopt;
    o.kind = Order::kConnect;
    o.peer = static_cast<std::uint32_t>(*peer);
    o.qp = *q;
    return o;
  }
  return std::nullopt;
}

std::string format_data_header(const std::string& token, std::uint32_t from) {
  return std::string(kTag) + " " + token + " data " + std::to_string(from) + "\n";
}

std::optional<std::uint32_t> parse_data_header(const std::string& line, const std::string& token) {
  if (line.size() >= kLineMax) return std::nullopt;
  auto f = split_spaces(line, 4);
  if (f.empty() || f[0] != kTag || !same_token(f[1], token) || f[2] != "data") return std::nullopt;
  auto from = number(f[3], kCountMax);
  if (!from) return std::nullopt;
  return static_cast<std::uint32_t>(*from);
}

}  // namespace gpudiag::fabric
