// The plugin's config cache (config/config_cache.h, config_tree.h): root writes it, but
// srun and slurmstepd read whatever bytes are there. Any bytes must give a tree or
// nothing, and a tree must give a Config or an error that starts with "gpudiag:"; a tree
// read back is the one its bytes encode (one form per tree: nothing else decodes).
#include <sys/stat.h>

#include "config/config.h"
#include "config/config_cache.h"
#include "config/config_tree.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (auto tree = gpudiag::tree_from_bytes(bytes)) {
    GPUDIAG_FUZZ_CHECK(gpudiag::tree_to_bytes(*tree) == bytes);
    auto cfg = gpudiag::read_config(*tree, "fuzz.yaml");
    if (!cfg) GPUDIAG_FUZZ_CHECK(cfg.error().rfind("gpudiag: ", 0) == 0);
  }
  struct stat st {};
  const auto id = gpudiag::identity_of("/etc/gpudiag/gpudiag.yaml", st);
  if (auto inner = gpudiag::cached_tree(bytes, id)) GPUDIAG_FUZZ_CHECK(inner->size() <= size);
  // The same bytes as a cache of the right file: what a reader after the header sees.
  const std::string wrapped = gpudiag::encode_cache(id, bytes);
  auto again = gpudiag::cached_tree(wrapped, id);
  GPUDIAG_FUZZ_CHECK(again && *again == bytes);
  return 0;
}
