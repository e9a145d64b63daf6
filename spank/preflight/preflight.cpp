#include "spank/preflight/preflight.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/control_bytes.h"
#include "util/duration.h"
#include "util/name_patterns.h"
#include "nodeinfo/pci_devices.h"
#include "nodeinfo/rooted_fs.h"
#include "util/text_lists.h"
#include "util/visible_gpus.h"

namespace gpudiag {
namespace {

}  // namespace

std::vector<std::string> evaluate_preflight(const PreflightFacts& f) {
  std::vector<std::string> out;
  const std::string on = "gpudiag: preflight on " + f.host + ": ";

  // Expected IB HCAs: present, and every port up.
  if (!f.ib_expect.hcas.empty()) {
    for (const auto& want : f.ib_expect.hcas) {
      if (has_glob(want)) continue;
      bool found = false;
      for (const auto& h : f.ib.hcas) found |= h.name == want;
      if (!found) out.push_back(on + want + " is missing: check the HCA, its driver (mlx5_core) and ib_uverbs");
    }
    for (const auto& h : f.ib.hcas) {
      if (!matches_any(f.ib_expect.hcas, h.name) || matches_any(f.ib_expect.exclude, h.name)) continue;
      for (const auto& p : h.ports) {
        if (p.is_up()) continue;
        std::string state = p.state ? p.state->name : "unreadable";
        std::string phys = p.phys_state ? p.phys_state->name : "unreadable";
        out.push_back(on + h.name + " port " + std::to_string(p.number) + " is " + state + " (phys_state " + phys +
                      "): check the cable or switch port, or drain the node");
      }
    }
  }
  if (f.shm_bytes && *f.shm_bytes < f.shm_min)
    out.push_back(on + f.shm_path + " is " + size_text(*f.shm_bytes) + ", NCCL needs at least " +
                  size_text(f.shm_min) + ": give the container more (docker --shm-size=1g) or remount " +
                  f.shm_path + " larger");
  if (!f.shm_bytes)
    out.push_back(on + "cannot check " + f.shm_path + " (" + f.shm_error + "): NCCL needs it for intra-node transfers");
  if (f.check_memlock && !f.ib.hcas.empty() && f.memlock != RLIM_INFINITY)
    out.push_back(on + "the memlock ulimit is " + size_text(static_cast<unsigned long long>(f.memlock)) +
                  ", RDMA needs unlimited (ibv_reg_mr fails): set LimitMEMLOCK=infinity for slurmd and "
                  "PropagateResourceLimitsExcept=MEMLOCK in slurm.conf");
  if (f.gpus_requested > 0) {
    if (f.gpus_visible >= 0 && f.gpus_visible != f.gpus_requested)
      out.push_back(on + "the task sees " + std::to_string(f.gpus_visible) + " GPU(s) (CUDA_VISIBLE_DEVICES) but " +
                    std::to_string(f.gpus_requested) + " were allocated: do not override CUDA_VISIBLE_DEVICES, "
                    "or check gres.conf");
    if (f.gpus_on_pci < f.gpus_requested)
      out.push_back(on + "only " + std::to_string(f.gpus_on_pci) + " NVIDIA GPU(s) on PCI but " +
                    std::to_string(f.gpus_requested) + " allocated: a GPU fell off the bus; drain the node and run "
                    "gpudiag-health");
  }
  // Exact interface names (=eth0,ib0) must exist; prefixes and ^exclusions are NCCL's to match.
  // One line for all the missing names, at most kShownNames of them at most kShownNameBytes
  // each: the list is the user's, and a line per name let a 128 KiB variable write
  // thousands of lines to slurmd's log from each node (adversary review 17).
  if (!f.socket_ifname.empty() && f.socket_ifname[0] == '=') {
    constexpr std::size_t kShownNames = 8, kShownNameBytes = 64;
    std::string shown;
    std::size_t missing = 0;
    for (const auto& name : split_list(f.socket_ifname.substr(1))) {
      bool found = false;
      for (const auto& i : f.interfaces) found |= i == name;
      if (found) continue;
      if (++missing > kShownNames) continue;
      // The user's bytes, bound for slurmd's log: escaped, so they cannot forge a log line.
      shown += (shown.empty() ? "" : ", ") + escape_control(name.substr(0, kShownNameBytes)) +
               (name.size() > kShownNameBytes ? "..." : "");
    }
    if (missing > kShownNames) shown += " (and " + std::to_string(missing - kShownNames) + " more)";
    if (missing)
      out.push_back(on + "NCCL_SOCKET_IFNAME names " + shown + (missing == 1 ? ", which does not" : ", which do not") +
                    " exist here: fix the name or use a prefix (e.g. NCCL_SOCKET_IFNAME=ib)");
  }
  return out;
}

PreflightFacts gather_preflight(const PreflightSettings& s, const IbExpect& ib, const std::string& host,
                                const std::optional<std::string>& gpus_on_node,
                                const std::optional<std::string>& cuda_visible_devices,
                                const std::optional<std::string>& socket_ifname) {
  PreflightFacts f;
  f.host = host;
  RootedFs fs(s.fs_root);
  f.ib_expect = ib;
  if (!ib.hcas.empty() || s.memlock) f.ib = discover_ib(fs);
  f.shm_path = s.shm_path;
  f.shm_min = s.shm_min_bytes;
  struct statvfs v;
  if (::statvfs(s.shm_path.c_str(), &v) == 0)
    f.shm_bytes = static_cast<unsigned long long>(v.f_blocks) * v.f_frsize;
  else
    f.shm_error = std::strerror(errno);
  f.check_memlock = s.memlock;
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0) f.memlock = rl.rlim_cur;
  if (gpus_on_node) f.gpus_requested = std::atoi(gpus_on_node->c_str());
  f.gpus_visible = count_visible_gpus(cuda_visible_devices).value_or(-1);
  if (f.gpus_requested > 0)
    for (const auto& d : discover_pci(fs).devices) f.gpus_on_pci += d.is_nvidia_gpu();
  f.socket_ifname = socket_ifname.value_or("");
  if (!f.socket_ifname.empty() && f.socket_ifname[0] == '=') {
    auto names = fs.list_dir("/sys/class/net");
    if (names) f.interfaces = *names;
  }
  return f;
}

}  // namespace gpudiag
