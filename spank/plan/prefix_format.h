#pragma once
// The tag of a task's lines (plugin.prefix_format): the plan expands it, the relay
// (relay/line_prefixer.h) writes it in front of each line.
#include <string>
#include <string_view>

namespace gpudiag {

// Expands {host}, {rank} and {local_rank} in a prefix format such as "[{host}:{rank}]".
std::string expand_prefix_format(std::string_view format, std::string_view host, int rank, int local_rank);

}  // namespace gpudiag
