#include "healthcheck/checks/p2p_matrix.h"

#include <fmt/format.h>

namespace gpudiag {
namespace {

struct Code {
  const char* code;
  const char* meaning;
};
constexpr Code kCodes[] = {{"OK", "status OK"},           {"CNS", "chipset not supported"},
                           {"GNS", "GPU not supported"},  {"TNS", "topology not supported"},
                           {"DR", "disabled by regkey"},  {"NS", "not supported"},
                           {"U", "unknown"}};

const Code& lookup(int status) { return status >= 0 && status <= 6 ? kCodes[status] : kCodes[6]; }

}  // namespace

const char* p2p_code(int status) { return lookup(status).code; }
const char* p2p_meaning(int status) { return lookup(status).meaning; }

std::string format_p2p_matrix(const P2pMatrix& m) {
  std::string out = " \t";
  for (std::size_t j = 0; j < m.size(); ++j) out += fmt::format("GPU{}\t", j);
  out += "\n";
  for (std::size_t i = 0; i < m.size(); ++i) {
    out += fmt::format(" GPU{}\t", i);
    for (std::size_t j = 0; j < m.size(); ++j) out += std::string(i == j ? "X" : j < m[i].size() ? p2p_code(m[i][j]) : "U") + "\t";
    out += "\n";
  }
  return out;
}

std::string p2p_legend() {
  std::string out = "Legend:\n\n  X    = Self\n";
  for (const auto& c : kCodes) {
    std::string meaning = c.meaning;
    meaning[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(meaning[0])));
    out += fmt::format("  {:<4} = {}\n", c.code, meaning);
  }
  return out;
}

}  // namespace gpudiag
