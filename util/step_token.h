#pragma once
// The secret a step's own processes show each other on a TCP connection (the preflight
// barrier, the fabric test): 32 lowercase hex digits from getrandom, handed to the tasks
// through the step's environment, which another user cannot read.
#include <optional>
#include <string>

namespace gpudiag {

inline constexpr std::size_t kStepTokenHex = 32;

std::optional<std::string> new_step_token();  // nullopt: no randomness (errno says why)
bool is_step_token(const std::string& s);      // the shape new_step_token makes
bool same_token(const std::string& a, const std::string& b);  // constant time

}  // namespace gpudiag
