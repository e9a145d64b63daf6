#include "util/this_host.h"

#include <unistd.h>

#include "util/task_path.h"

namespace gpudiag {

GPUDIAG_TASK_PATH std::string_view short_name_of(std::string_view name) { return name.substr(0, name.find('.')); }

std::string short_name(const std::string& name) { return std::string(short_name_of(name)); }

std::string hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

std::string short_hostname() {
  const std::string name = hostname();
  return name.empty() ? "localhost" : short_name(name);
}

std::string self_exe_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : "";
}

std::string self_exe_dir() {
  std::string path = self_exe_path();
  return path.substr(0, path.empty() ? 0 : path.rfind('/'));
}

}  // namespace gpudiag
