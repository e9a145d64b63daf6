#pragma once
// Device-name patterns in the config ("mlx5_[0-7]", "mlx5_bond_*"), matched with
// fnmatch(3) so admins get the shell globbing they already know.
#include <string>
#include <string_view>
#include <vector>

namespace gpudiag {

bool has_glob(std::string_view pattern);
bool matches(std::string_view pattern, const std::string& name);
bool matches_any(const std::vector<std::string>& patterns, const std::string& name);

}  // namespace gpudiag
