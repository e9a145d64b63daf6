#include "spank/slurm/slurm_node_addr.h"

#include <dlfcn.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdint>

namespace gpudiag {
namespace {

// 22.05 and 24.11: int slurm_conf_get_addr(const char*, slurm_addr_t*, uint16_t flags),
// slurm_addr_t being struct sockaddr_storage. Releases before 20.11 took no flags and a
// smaller address: a sockaddr_storage holds either, and the ignored third argument is
// harmless in the x86-64 and aarch64 calling conventions.
using GetAddr = int (*)(const char*, struct sockaddr_storage*, std::uint16_t);
// char *slurm_conf_get_hostname(const char *node_name), xmalloc'ed.
using GetHostname = char* (*)(const char*);
// void slurm_xfree_ptr(void *), libslurm's free for xmalloc'ed memory.
using XfreePtr = void (*)(void*);

template <class F>
F lookup(const char* name) {
  return reinterpret_cast<F>(::dlsym(RTLD_DEFAULT, name));
}

}  // namespace

std::optional<SlurmNodeAddr> slurm_node_addr(const std::string& node_name) {
  if (node_name.empty()) return std::nullopt;
  auto get_addr = lookup<GetAddr>("slurm_conf_get_addr");
  auto get_hostname = lookup<GetHostname>("slurm_conf_get_hostname");
  if (!get_addr && !get_hostname) return std::nullopt;
  SlurmNodeAddr out;
  if (get_addr) {
    struct sockaddr_storage ss {};
    if (get_addr(node_name.c_str(), &ss, 0) == 0 && (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
      char host[NI_MAXHOST] = {};
      const socklen_t len = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
      if (::getnameinfo(reinterpret_cast<struct sockaddr*>(&ss), len, host, sizeof host, nullptr, 0,
                        NI_NUMERICHOST) == 0)
        out.address = host;
    }
  }
  if (get_hostname) {
    if (char* h = get_hostname(node_name.c_str())) {
      out.hostname = h;
      // Without libslurm's free, a few bytes once per step are left to slurmstepd's exit.
      if (auto xfree = lookup<XfreePtr>("slurm_xfree_ptr")) xfree(h);
    }
  }
  if (out.address.empty() && out.hostname.empty()) return std::nullopt;
  return out;
}

}  // namespace gpudiag
