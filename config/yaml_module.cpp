// gpudiag_yaml.so: yaml-cpp for the plugin, loaded only when its config cache misses
// (spank/slurm/plugin_config.cpp). Only bytes cross, through one C function: the module
// has the shared C++ runtime yaml-cpp needs, gpudiag.so a static copy of its own, and no
// C++ object or exception may pass between the two.
#include <cstdlib>
#include <cstring>
#include <string>

#include "config/config_tree.h"
#include "config/yaml_tree.h"

namespace {

char* copy_out(const std::string& s, std::size_t* len) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  *len = s.size();
  return p;
}

}  // namespace

// 0: *out holds the document's bytes (tree_to_bytes); 1: *out holds the error message;
// -1: no memory. *out is the caller's to free().
extern "C" __attribute__((visibility("default"))) int gpudiag_yaml_tree_v1(const char* text, std::size_t len,
                                                                         const char* source, char** out,
                                                                         std::size_t* out_len) noexcept {
  *out = nullptr;
  *out_len = 0;
  try {
    auto tree = gpudiag::yaml_to_tree(std::string_view(text, len), source);
    *out = copy_out(tree ? gpudiag::tree_to_bytes(*tree) : tree.error(), out_len);
    if (!*out) return -1;
    return tree ? 0 : 1;
  } catch (...) {
    return -1;
  }
}
