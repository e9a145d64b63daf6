#pragma once
// dlopen with a list of candidates, remembering why each one failed, so that "NVML is
// missing" can say exactly where the probe looked (and libibverbs, where the fabric test
// looked).
#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace gpudiag {

struct Library {
  void* handle = nullptr;
  std::string path;                // the file that was loaded
  std::vector<std::string> tried;  // "candidate: why it failed"
  explicit operator bool() const { return handle != nullptr; }
};

// A configured path is the only candidate; otherwise the list is tried in order.
Library load_library(const std::string& configured, const std::vector<std::string>& candidates);
// "tried libnvidia-ml.so.1 (cannot open ...), /usr/lib/... (...)"
std::string describe_attempts(const Library& lib);

// The first of `names` that the library exports, cast to F; nullptr if none.
template <class F>
bool resolve(const Library& lib, F& fn, std::initializer_list<const char*> names, std::string& missing) {
  for (const char* n : names) {
    if (void* p = ::dlsym(lib.handle, n)) {
      fn = reinterpret_cast<F>(p);
      return true;
    }
  }
  if (!missing.empty()) missing += ", ";
  missing += *names.begin();
  return false;
}

}  // namespace gpudiag
