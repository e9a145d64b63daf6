#pragma once
// What an Xid means and what to do about it, after NVIDIA's Xid catalogue
// (docs.nvidia.com/deploy/xid-errors, "Resolution Bucket"), reduced to what a node
// check needs: does the GPU itself need a reset or a replacement, or was it the job.
#include <optional>
#include <string>
#include <vector>

namespace gpudiag {

enum class XidClass {
  hardware,     // the GPU or its memory must be reset or replaced: CRITICAL
  attention,    // worth a look, the GPU may still be fine: WARNING
  application,  // the job's own fault (bad address, killed kernel): a note only
};

struct XidInfo {
  int xid = 0;
  XidClass cls = XidClass::attention;
  const char* meaning = "";
  const char* fix = "";
};

// The entry for a known Xid, nullopt for one the catalogue here does not list.
std::optional<XidInfo> find_xid(int xid);
// Every Xid number listed (tests, docs).
std::vector<int> catalogued_xids();

}  // namespace gpudiag
