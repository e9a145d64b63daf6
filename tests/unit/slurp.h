#pragma once
// A whole file's bytes ("" when it cannot be read), for the unit tests of every room.
#include <fstream>
#include <sstream>
#include <string>

namespace gpudiag::test {

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace gpudiag::test
