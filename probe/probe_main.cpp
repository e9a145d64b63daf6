// gpudiag-gpu-probe: does every GPU operation for gpudiag-health, in a process of its
// own (ARCHITECTURE §6): CUDA does not survive fork, and a wedged GPU can hang cuInit or an
// NVML call forever, so the checker must be able to kill the whole thing at a deadline.
// It links nothing but libc and libstdc++; NVML, the CUDA driver and NCCL are dlopen'd.
// It prints one JSON object on stdout and exits 0; a section that cannot run says why
// in {"error": {"kind", "message", "hint"}}. Exit 64 is a usage error. Nothing else
// reaches stdout: NCCL logs there when NCCL_DEBUG is set, so the JSON goes out on a
// private copy of the descriptor, and fd 1 points at stderr while the libraries run.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/duration.h"
#include "util/text_lists.h"
#include "probe/cuda_api.h"
#include "probe/probe_allreduce.h"
#include "probe/probe_pair.h"
#include "probe/probe_devices.h"
#include "probe/probe_json.h"

namespace {

constexpr int kUsage = 64;

std::vector<unsigned long long> parse_sizes(const std::string& list) {
  std::vector<unsigned long long> out;
  for (const std::string& item : gpudiag::split_list(list)) {
    auto v = gpudiag::parse_size(item);
    if (!v || *v < 4 || *v > (64ull << 30)) throw CLI::ValidationError("--sizes", "'" + item + "' is not a size from 4 to 64G");
    out.push_back(*v / 4 * 4);
  }
  if (out.empty()) throw CLI::ValidationError("--sizes", "'" + list + "' names no size");
  return out;
}

// The JSON's descriptor: stdout as it was, close-on-exec so that nothing NCCL starts
// inherits it. Then fd 1 is stderr, for whatever the libraries print, line-buffered:
// NCCL's debug log goes through stdio without flushing, and on a real H100 the last
// 4 KiB of it (Init COMPLETE included) were lost at _exit, or at the kill of a hung probe.
int private_stdout() {
  std::fflush(stdout);
  int fd = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return STDOUT_FILENO;
  ::dup2(STDERR_FILENO, STDOUT_FILENO);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return fd;
}

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpudiag-gpu-probe: GPU queries and tests for gpudiag-health; prints JSON"};
  app.require_subcommand(1);
  gpudiag::probe::ProbeOptions opts;
  std::string sizes = "1G", copy_bytes = "256M";
  double wait_limit = 0;
  app.add_option("--nvml", opts.nvml_path, "NVML library to load (default: libnvidia-ml.so.1 and standard places)");
  app.add_option("--cuda", opts.cuda_path, "CUDA driver library to load (default: libcuda.so.1 and standard places)");
  app.add_option("--nccl", opts.nccl_path, "NCCL library to load (default: libnccl.so.2 and standard places)");
  app.add_option("--wait-limit", wait_limit,
                 "seconds after which waiting on a GPU stops and is reported as a stuck kernel (default: no limit)")
      ->check(CLI::Range(0.0, 86400.0));
  auto* devices = app.add_subcommand("devices", "GPUs seen by NVML, with ECC, retired/remapped rows and NVLink states");
  auto* p2p = app.add_subcommand("p2p", "NVML P2P status matrix for READ, WRITE and NVLINK");
  p2p->add_flag("--bandwidth", opts.bandwidth, "also time cuMemcpyPeer between every pair of GPUs");
  p2p->add_option("--copy-bytes", copy_bytes, "bytes per peer copy (default 256M)");
  auto* allreduce = app.add_subcommand("allreduce", "NCCL all_reduce across all local GPUs, in one process");
  allreduce->add_option("--sizes", sizes, "comma list of bytes per rank, e.g. 8M,1G (default 1G)");
  allreduce->add_option("--iters", opts.iters, "timed iterations (default 20)")->check(CLI::Range(1, 100000));
  allreduce->add_option("--warmup", opts.warmup, "untimed iterations first (default 5)")->check(CLI::Range(0, 100000));
  int pair_rank = 0;
  std::string pair_id, pair_bytes = "8M";
  auto* pair = app.add_subcommand("pair", "one rank of a two-node NCCL all_reduce (the fabric test); rank 0 prints "
                                          "the unique id first, rank 1 takes it from $GPUDIAG_NCCL_PAIR_ID (never "
                                          "from its command line, which every user can read)");
  pair->add_option("--rank", pair_rank, "0 or 1")->check(CLI::Range(0, 1));
  pair->add_option("--bytes", pair_bytes, "bytes per rank (default 8M)");
  pair->add_option("--iters", opts.iters, "timed iterations (default 20)")->check(CLI::Range(1, 100000));
  pair->add_option("--warmup", opts.warmup, "untimed iterations first (default 5)")->check(CLI::Range(0, 100000));
  try {
    app.parse(argc, argv);
    opts.sizes = parse_sizes(pair->parsed() ? pair_bytes : sizes);
    if (const char* id = std::getenv(gpudiag::probe_json::kNcclPairIdEnv); pair->parsed() && pair_rank == 1 && id)
      pair_id = id;
    auto cb = gpudiag::parse_size(copy_bytes);
    if (!cb || *cb < 4 || *cb > (16ull << 30)) throw CLI::ValidationError("--copy-bytes", "must be a size from 4 to 16G");
    opts.copy_bytes = *cb;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gpudiag-gpu-probe: %s (see --help)\n", e.what());
    return kUsage;
  }
  // The node's view, not a job's: rows in PCI order (as NVML and nvidia-smi number
  // them) and every GPU, whatever the caller's CUDA_VISIBLE_DEVICES says.
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  if (wait_limit > 0)
    opts.deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(wait_limit));
  const int json_fd = private_stdout();

  nlohmann::json out;
  try {
    if (*pair)
      out = gpudiag::probe::probe_pair(opts, pair_rank, pair_id, [json_fd](const std::string& id) {
        write_all(json_fd, nlohmann::json{{"id", id}}.dump() + "\n");
      });
    else if (*devices) out = gpudiag::probe::probe_devices(opts);
    else if (*p2p) out = gpudiag::probe::probe_p2p(opts);
    else out = gpudiag::probe::probe_allreduce(opts);
  } catch (const std::exception& e) {
    out = gpudiag::probe::probe_error("gpu", std::string("the probe failed: ") + e.what());
  } catch (const gpudiag::probe::GpuCallError& e) {
    out = gpudiag::probe::probe_error("gpu", e.message);
  }
  out[gpudiag::probe_json::kSection] =
      pair->parsed() ? "pair" : devices->parsed() ? "devices" : p2p->parsed() ? "p2p" : "allreduce";
  std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  write_all(json_fd, text);
  // Libraries' stdio (NCCL_DEBUG_FILE too) is flushed: that is memory, not the driver.
  std::fflush(nullptr);
  // Skip static destructors and anything else that would call into the driver: after
  // a failure, freeing memory or destroying a communicator can block on a stuck
  // kernel, and the diagnosis is already out.
  ::_exit(0);
}
