// /proc/PID/stat lines, which the hang watchdog reads for every process of a step. A
// process names itself (comm may hold spaces, ')' and newlines), so this is user input.
#include "fuzz/fuzz_input.h"
#include "nodeinfo/proc_tree.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto st = gpudiag::parse_proc_stat(gpudiag::fuzz::as_text(data, size));
  if (st) GPUDIAG_FUZZ_CHECK(st->comm.size() <= size);
  return 0;
}
