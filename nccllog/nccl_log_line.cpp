#include "nccllog/nccl_log_line.h"

namespace gpudiag {
namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// "host:pid:tid" ending at `end` (exclusive); fills host, pid, tid.
bool split_origin(std::string_view token, NcclLine& out) {
  auto c2 = token.rfind(':');
  if (c2 == std::string_view::npos || c2 == 0) return false;
  auto c1 = token.rfind(':', c2 - 1);
  if (c1 == std::string_view::npos || c1 == 0) return false;
  out.host = token.substr(0, c1);
  out.pid = token.substr(c1 + 1, c2 - c1 - 1);
  out.tid = token.substr(c2 + 1);
  return all_digits(out.pid) && all_digits(out.tid);
}

}  // namespace

std::optional<NcclLine> parse_nccl_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  // " [dev] " follows the origin; try each " [" until one fits (a timestamp prefix
  // may hold brackets of its own).
  std::size_t from = 0;
  while (true) {
    std::size_t open = line.find(" [", from);
    if (open == std::string_view::npos || open > 512) return std::nullopt;
    from = open + 2;
    std::size_t close = line.find("] ", open + 2);
    if (close == std::string_view::npos) return std::nullopt;
    std::size_t start = line.rfind(' ', open - 1);
    start = start == std::string_view::npos ? 0 : start + 1;
    NcclLine out;
    if (open == 0 || !split_origin(line.substr(start, open - start), out)) continue;
    out.dev = line.substr(open + 2, close - open - 2);
    std::string_view rest = line.substr(close + 2);
    std::size_t nccl = rest.find("NCCL ");
    if (nccl == std::string_view::npos) return std::nullopt;
    if (nccl > 0) {
      std::string_view where = rest.substr(0, nccl);
      while (!where.empty() && where.back() == ' ') where.remove_suffix(1);
      // TRACE puts a time in front of func:line.
      auto sp = where.rfind(' ');
      out.where = sp == std::string_view::npos ? where : where.substr(sp + 1);
    }
    std::string_view lv = rest.substr(nccl + 5);
    struct L {
      std::string_view word;
      NcclLevel level;
    };
    for (const L& l : {L{"INFO", NcclLevel::info}, L{"WARN", NcclLevel::warn}, L{"TRACE", NcclLevel::trace}}) {
      if (lv.substr(0, l.word.size()) == l.word && (lv.size() == l.word.size() || lv[l.word.size()] == ' ')) {
        out.level = l.level;
        out.msg = lv.size() > l.word.size() ? lv.substr(l.word.size() + 1) : std::string_view{};
        return out;
      }
    }
    return std::nullopt;
  }
}

}  // namespace gpudiag
