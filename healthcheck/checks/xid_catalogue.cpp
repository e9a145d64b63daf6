#include "healthcheck/checks/xid_catalogue.h"

namespace gpudiag {
namespace {

constexpr const char* kAppFix =
    "the job's own fault (its code or its data): nothing to do on the node unless it repeats across jobs";
constexpr const char* kMemoryFix =
    "drain the node, reset the GPU (`nvidia-smi -r -i <bus id>`) or reboot so the driver remaps the bad memory "
    "rows; if `nvidia-smi -q -d ROW_REMAPPER` shows a remapping failure or it recurs, replace the GPU";
constexpr const char* kResetFix =
    "drain the node and reset the GPU (`nvidia-smi -r -i <bus id>`) or reboot; if it recurs, run "
    "`dcgmi diag -r 3` and have the GPU replaced";

constexpr XidInfo kCatalogue[] = {
    {8, XidClass::application, "GPU stopped processing (channel idle timeout)", kAppFix},
    {13, XidClass::application, "graphics engine exception", kAppFix},
    {31, XidClass::application, "GPU memory page fault", kAppFix},
    {38, XidClass::attention, "driver firmware error", "update the driver and GPU firmware if it recurs"},
    {43, XidClass::application, "GPU stopped processing (channel reset)", kAppFix},
    {45, XidClass::application, "preemptive cleanup after earlier errors", kAppFix},
    {46, XidClass::hardware, "GPU stopped processing", kResetFix},
    {48, XidClass::hardware, "double-bit ECC error (uncorrectable memory error)", kMemoryFix},
    {61, XidClass::attention, "internal micro-controller breakpoint/warning",
     "watch for Xid 62 on the same GPU; reset it if the jobs on it misbehave"},
    {62, XidClass::hardware, "internal micro-controller halt", kResetFix},
    {63, XidClass::attention, "ECC page retirement or row remapping recorded",
     "reset the GPU when it is idle (`nvidia-smi -r -i <bus id>`) so the pending remap takes effect"},
    {64, XidClass::hardware, "ECC page retirement or row remapping failed", kMemoryFix},
    {69, XidClass::application, "graphics engine class error", kAppFix},
    {74, XidClass::hardware, "NVLink error",
     "drain the node, look at `nvidia-smi nvlink -s` and `-e` for the link, reset the GPUs or reboot; if it "
     "recurs, have the GPU baseboard or NVSwitch tray checked"},
    {79, XidClass::hardware, "GPU has fallen off the bus",
     "drain the node and reboot it; if it recurs, check the GPU's power and PCIe riser/retimer and have the GPU "
     "replaced"},
    {92, XidClass::hardware, "high single-bit ECC error rate", kMemoryFix},
    {94, XidClass::hardware, "contained ECC error", kMemoryFix},
    {95, XidClass::hardware, "uncontained ECC error", kMemoryFix},
    {109, XidClass::attention, "context switch timeout", "reset the GPU if jobs on it keep hanging"},
    {119, XidClass::hardware, "GSP RPC timeout (GPU firmware not answering)", kResetFix},
    {120, XidClass::hardware, "GSP error (GPU firmware)", kResetFix},
    {121, XidClass::attention, "C2C link corrected error", "watch for it repeating; have the link checked if it does"},
    {140, XidClass::hardware, "unrecovered ECC error", kMemoryFix},
    {143, XidClass::hardware, "GPU initialization failure", kResetFix},
    {154, XidClass::hardware, "GPU recovery action changed (reset or reboot required)",
     "do what the driver's message says (GPU reset or node reboot) and drain the node until then"},
};

}  // namespace

std::optional<XidInfo> find_xid(int xid) {
  for (const auto& e : kCatalogue)
    if (e.xid == xid) return e;
  return std::nullopt;
}

std::vector<int> catalogued_xids() {
  std::vector<int> out;
  for (const auto& e : kCatalogue) out.push_back(e.xid);
  return out;
}

}  // namespace gpudiag
