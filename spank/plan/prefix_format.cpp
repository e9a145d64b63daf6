#include "spank/plan/prefix_format.h"

namespace gpudiag {

std::string expand_prefix_format(std::string_view format, std::string_view host, int rank, int local_rank) {
  std::string out;
  while (!format.empty()) {
    if (format.substr(0, 6) == "{host}") {
      out.append(host);
      format.remove_prefix(6);
    } else if (format.substr(0, 6) == "{rank}") {
      out.append(std::to_string(rank));
      format.remove_prefix(6);
    } else if (format.substr(0, 12) == "{local_rank}") {
      out.append(std::to_string(local_rank));
      format.remove_prefix(12);
    } else {
      out.push_back(format.front());
      format.remove_prefix(1);
    }
  }
  return out;
}

}  // namespace gpudiag
