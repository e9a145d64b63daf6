#include "healthcheck/checks/check_iommu.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "nodeinfo/sysfs_text.h"

namespace gpudiag {
namespace {

bool translating(const std::string& type) { return type == "DMA" || type == "DMA-FQ"; }

bool cmdline_wants_passthrough(const std::vector<std::string>& args) {
  return std::find(args.begin(), args.end(), "iommu=pt") != args.end() ||
         std::find(args.begin(), args.end(), "iommu.passthrough=1") != args.end();
}

}  // namespace

std::vector<std::string> iommu_cmdline_args(const std::string& cmdline) {
  std::vector<std::string> out;
  std::istringstream in(cmdline);
  std::string word;
  while (in >> word) {
    if (word.rfind("intel_iommu=", 0) == 0 || word.rfind("amd_iommu=", 0) == 0 || word.rfind("iommu=", 0) == 0 ||
        word.rfind("iommu.", 0) == 0)
      out.push_back(word);
  }
  return out;
}

std::string iommu_mode(const IommuFacts& facts) {
  if (std::any_of(facts.group_types.begin(), facts.group_types.end(), translating)) return "translated";
  if (!facts.group_types.empty()) return "passthrough";
  if (facts.units == 0) return "off";
  // Units but no groups yet: only the command line can tell.
  return cmdline_wants_passthrough(iommu_cmdline_args(facts.cmdline)) ? "passthrough" : "translated";
}

CheckResult evaluate_iommu(const IommuFacts& facts, const IommuSettings& settings) {
  CheckResult out;
  out.name = "iommu";
  for (const auto& err : facts.errors)
    out.add({"iommu", Status::unknown, "cannot read IOMMU state: " + err,
             "check that /sys and /proc are mounted and readable"});

  const std::string mode = iommu_mode(facts);
  const auto args = iommu_cmdline_args(facts.cmdline);
  std::string cmd;
  for (const auto& a : args) cmd += (cmd.empty() ? "" : " ") + a;
  std::map<std::string, int> types;
  for (const auto& t : facts.group_types) ++types[t];
  std::string groups;
  for (const auto& [t, n] : types) groups += fmt::format("{}{} group(s) {}", groups.empty() ? "" : ", ", n, t);

  std::string message = fmt::format("IOMMU is {}", mode);
  if (!groups.empty()) message += " (" + groups + ")";
  message += cmd.empty() ? "; no IOMMU options on the kernel command line" : "; kernel command line: " + cmd;

  const bool allowed = std::find(settings.allow.begin(), settings.allow.end(), mode) != settings.allow.end();
  if (allowed) {
    out.add({"iommu", Status::ok, message, ""});
  } else {
    std::string hint;
    if (mode == "translated")
      hint = "GPUDirect RDMA and P2P lose bandwidth under DMA translation: add iommu=pt to the kernel command "
             "line and reboot, or disable the IOMMU in the BIOS; where translation is required (VMs), add "
             "'translated' to iommu.allow";
    else
      hint = fmt::format("the site expects the IOMMU to be {}: fix the kernel command line or BIOS, or change "
                         "iommu.allow",
                         [&] {
                           std::string s;
                           for (const auto& a : settings.allow) s += (s.empty() ? "" : " or ") + a;
                           return s;
                         }());
    out.add({"iommu", policy_status(settings.policy), message, hint});
  }
  const bool asks_on = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "intel_iommu=on" || a == "amd_iommu=on";
  });
  if (mode == "off" && asks_on)
    out.add({"iommu", Status::ok,
             "the kernel command line enables an IOMMU but none is active (VT-d/AMD-Vi off in the BIOS?)", ""});
  out.summary = "mode " + mode;
  return out;
}

IommuFacts read_iommu_facts(const RootedFs& fs) {
  IommuFacts f;
  if (auto units = fs.list_dir("/sys/class/iommu")) f.units = static_cast<int>(units->size());
  if (auto groups = fs.list_dir("/sys/kernel/iommu_groups")) {
    for (const auto& g : *groups) {
      const std::string path = "/sys/kernel/iommu_groups/" + g + "/type";
      auto raw = fs.read_file(path, 64);
      // Kernels before 5.11 have no type file; the mode then comes from the command line.
      if (!raw && !fs.lexists(path)) continue;
      auto text = raw ? attribute_text(*raw, path, 32) : Result<std::string>::failure(raw.error());
      if (text) f.group_types.push_back(*text);
      else f.errors.push_back(text.error());
    }
  }
  if (auto raw = fs.read_file("/proc/cmdline", 16384)) {
    auto text = attribute_text(*raw, "/proc/cmdline", 16384);
    if (text) f.cmdline = *text;
    else if (!raw->empty()) f.errors.push_back(text.error());
  } else {
    f.errors.push_back(raw.error());
  }
  return f;
}

CheckResult run_iommu_check(const CheckContext& ctx) {
  return evaluate_iommu(read_iommu_facts(ctx.fs), ctx.cfg.iommu);
}

}  // namespace gpudiag
