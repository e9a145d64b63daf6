// gpudiag-gpu-probe: does every GPU operation for gpudiag-health, in a process of its
// own (DESIGN §5): CUDA does not survive fork, and a wedged GPU can hang cuInit or an
// NVML call forever, so the checker must be able to kill the whole thing at a deadline.
// It links nothing but libc and libstdc++; NVML, the CUDA driver and NCCL are dlopen'd.
// It prints one JSON object on stdout and exits 0; a section that cannot run says why
// in {"error": {"kind", "message", "hint"}}. Exit 64 is a usage error.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "nodeinfo/duration.h"
#include "probe/probe_allreduce.h"
#include "probe/probe_devices.h"

namespace {

constexpr int kUsage = 64;

std::vector<unsigned long long> parse_sizes(const std::string& list) {
  std::vector<unsigned long long> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t comma = list.find(',', start);
    std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto v = gpudiag::parse_size(item);
    if (!v || *v < 4 || *v > (64ull << 30)) throw CLI::ValidationError("--sizes", "'" + item + "' is not a size from 4 to 64G");
    out.push_back(*v / 4 * 4);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpudiag-gpu-probe: GPU queries and tests for gpudiag-health; prints JSON"};
  app.require_subcommand(1);
  gpudiag::probe::ProbeOptions opts;
  std::string sizes = "1G", copy_bytes = "256M";
  app.add_option("--nvml", opts.nvml_path, "NVML library to load (default: libnvidia-ml.so.1 and standard places)");
  app.add_option("--cuda", opts.cuda_path, "CUDA driver library to load (default: libcuda.so.1 and standard places)");
  app.add_option("--nccl", opts.nccl_path, "NCCL library to load (default: libnccl.so.2 and standard places)");
  auto* devices = app.add_subcommand("devices", "GPUs seen by NVML, with ECC, retired/remapped rows and NVLink states");
  auto* p2p = app.add_subcommand("p2p", "NVML P2P status matrix for READ, WRITE and NVLINK");
  p2p->add_flag("--bandwidth", opts.bandwidth, "also time cuMemcpyPeer between every pair of GPUs");
  p2p->add_option("--copy-bytes", copy_bytes, "bytes per peer copy (default 256M)");
  auto* allreduce = app.add_subcommand("allreduce", "NCCL all_reduce across all local GPUs, in one process");
  allreduce->add_option("--sizes", sizes, "comma list of bytes per rank, e.g. 8M,1G (default 1G)");
  allreduce->add_option("--iters", opts.iters, "timed iterations (default 20)")->check(CLI::Range(1, 100000));
  allreduce->add_option("--warmup", opts.warmup, "untimed iterations first (default 5)")->check(CLI::Range(0, 100000));
  try {
    app.parse(argc, argv);
    opts.sizes = parse_sizes(sizes);
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

  nlohmann::json out;
  try {
    if (*devices) out = gpudiag::probe::probe_devices(opts);
    else if (*p2p) out = gpudiag::probe::probe_p2p(opts);
    else out = gpudiag::probe::probe_allreduce(opts);
  } catch (const std::exception& e) {
    out = gpudiag::probe::probe_error("gpu", std::string("the probe failed: ") + e.what());
  }
  out["probe"] = devices->parsed() ? "devices" : p2p->parsed() ? "p2p" : "allreduce";
  std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  // Skip static destructors: NCCL's and the driver's threads can hang at exit, and
  // the work is done.
  ::_exit(0);
}
