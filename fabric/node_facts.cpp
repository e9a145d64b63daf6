#include "fabric/node_facts.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <sstream>

#include "nodeinfo/rooted_fs.h"
#include "util/control_bytes.h"

namespace gpudiag::fabric {
namespace {

std::vector<std::string> names_in(const RootedFs& fs, const char* dir) {
  auto list = fs.list_dir(dir);
  std::vector<std::string> out;
  if (!list) return out;
  for (const auto& n : *list)
    if (is_one_printable_line(n) && n.find(' ') == std::string::npos && out.size() < 64) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

// rdma-core installs libibverbs.so.1 -> libibverbs.so.1.VERSION; the version names the
// rdma-core release (1.14.44.0: rdma-core 44).
std::string libibverbs_version() {
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"}) {
    char target[PATH_MAX];
    const std::string link = std::string(dir) + "/libibverbs.so.1";
    ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = 0;
    std::string t(target);
    const std::string stem = "libibverbs.so.";
    auto at = t.rfind(stem);
    if (at == std::string::npos) continue;
    std::string v = t.substr(at + stem.size());
    if (is_one_printable_line(v) && v.size() < 32 && v.find(' ') == std::string::npos) return "libibverbs " + v;
  }
  return "";
}

}  // namespace

std::string driver_version(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  auto at = line.find("Kernel Module");
  if (at == std::string::npos) return "";
  std::istringstream words(line.substr(at + 13));
  std::string w;
  while (words >> w)
    if (!w.empty() && std::isdigit(static_cast<unsigned char>(w[0]))) return is_one_printable_line(w) ? w : "";
  return "";
}

NodeFacts gather_node_facts(const std::string& fs_root) {
  NodeFacts f;
  RootedFs fs(fs_root.empty() ? "/" : fs_root);
  if (auto v = fs.read_file("/proc/driver/nvidia/version")) f.driver = driver_version(*v);
  utsname u{};
  if (::uname(&u) == 0 && is_one_printable_line(u.release)) f.kernel = u.release;
  f.rdma_core = libibverbs_version();
  f.hcas = names_in(fs, "/sys/class/infiniband");
  f.interfaces = names_in(fs, "/sys/class/net");
  return f;
}

}  // namespace gpudiag::fabric
