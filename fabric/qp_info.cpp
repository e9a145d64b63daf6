#include "fabric/qp_info.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include "util/control_bytes.h"

namespace gpudiag::fabric {
namespace {

constexpr std::size_t kQpInfoMax = 400;
constexpr std::size_t kHcaMax = 64;
constexpr std::uint32_t kLengthMax = 64u << 20;  // what a test registers, at most

std::optional<std::uint64_t> decimal(const std::string& s, std::uint64_t max) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (unsigned char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t d = c - '0';
    if (d > max || v > (max - d) / 10) return std::nullopt;  // past max (or 2^64)
    v = v * 10 + d;
  }
  return v;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool hca_name(const std::string& s) {
  return !s.empty() && s.size() <= kHcaMax && is_one_printable_line(s) &&
         std::none_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == ','; });
}

}  // namespace

std::string format_qp_info(const QpInfo& q) {
  static const char* hex = "0123456789abcdef";
  std::string gid;
  for (auto b : q.gid) {
    gid += hex[b >> 4];
    gid += hex[b & 15];
  }
  std::ostringstream o;
  o << q.hca << ' ' << unsigned(q.port) << ' ' << q.lid << ' ' << q.qpn << ' ' << q.psn << ' ' << gid << ' '
    << (q.gid_index < 0 ? std::string("none") : std::to_string(q.gid_index)) << ' ' << unsigned(q.mtu) << ' '
    << q.rkey << ' ' << q.addr << ' ' << q.length;
  return o.str();
}

std::optional<QpInfo> parse_qp_info(const std::string& text) {
  if (text.size() > kQpInfoMax) return std::nullopt;
  std::vector<std::string> f;
  std::size_t start = 0;
  for (;;) {
    auto sp = text.find(' ', start);
    f.push_back(text.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
    if (sp == std::string::npos || f.size() > 11) break;
    start = sp + 1;
  }
  if (f.size() != 11 || !hca_name(f[0]) || f[5].size() != 32) return std::nullopt;
  QpInfo q;
  q.hca = f[0];
  auto port = decimal(f[1], 255), lid = decimal(f[2], 0xffff), qpn = decimal(f[3], 0xffffff),
       psn = decimal(f[4], 0xffffff), mtu = decimal(f[7], 5), rkey = decimal(f[8], 0xffffffffull),
       addr = decimal(f[9], ~0ull), length = decimal(f[10], kLengthMax);
  if (!port || *port == 0 || !lid || !qpn || !psn || !mtu || *mtu == 0 || !rkey || !addr || !length || *length == 0)
    return std::nullopt;
  for (std::size_t i = 0; i < 16; ++i) {
    const int hi = hex_digit(f[5][2 * i]), lo = hex_digit(f[5][2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    q.gid[i] = static_cast<std::uint8_t>(hi << 4 | lo);
  }
  if (f[6] != "none") {
    auto gi = decimal(f[6], 255);
    if (!gi) return std::nullopt;
    q.gid_index = static_cast<int>(*gi);
  }
  q.port = static_cast<std::uint8_t>(*port);
  q.lid = static_cast<std::uint16_t>(*lid);
  q.qpn = static_cast<std::uint32_t>(*qpn);
  q.psn = static_cast<std::uint32_t>(*psn);
  q.mtu = static_cast<std::uint8_t>(*mtu);
  q.rkey = static_cast<std::uint32_t>(*rkey);
  q.addr = *addr;
  q.length = static_cast<std::uint32_t>(*length);
  return q;
}

}  // namespace gpudiag::fabric
