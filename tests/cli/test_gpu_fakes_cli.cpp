// The GPU path without a GPU: the real gpudiag-health runs the real gpudiag-gpu-probe,
// which loads fake NVML, CUDA driver and NCCL libraries (tests/fakes, set through
// gpu.libraries) that simulate 8 H100s and the failures named in each test
// (environment variables, listed in tests/fakes/fake_driver.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "run_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kHealth = GPUDIAG_HEALTH_BIN;
const std::string kProbe = GPUDIAG_PROBE_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;

const char* const kFakeVars[] = {"FAKE_GPUS",       "FAKE_CUDA_GPUS",     "FAKE_CUDA_ORDER", "FAKE_NVLINKS",
                                 "FAKE_NVLINK_DOWN", "FAKE_NVLINK_UNSUPPORTED", "FAKE_NVLINK_NOCAP", "FAKE_P2P_STATUS",
                                 "FAKE_ECC",        "FAKE_REMAPPED",      "FAKE_MIG",           "FAKE_FABRIC",     "FAKE_SLOW_PAIR",
                                 "FAKE_FAIL",       "FAKE_HANG",          "FAKE_NCCL_LAST_ERROR", "NCCL_DEBUG",
                                 "FAKE_THROTTLE",   "FAKE_TEMP",          "FAKE_SLOWDOWN_TEMP", "FAKE_REPLAY"};

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpudiag-fakes-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    clear_env();
  }
  void TearDown() override {
    clear_env();
    fs::remove_all(dir_);
  }
  static void clear_env() {
    for (const char* v : kFakeVars) ::unsetenv(v);
  }
  static void env(const std::map<std::string, std::string>& vars) {
    for (const auto& [k, v] : vars) ::setenv(k.c_str(), v.c_str(), 1);
  }
  // The fixture tree has 8 H100s on PCI; the probe is the real one, its libraries fakes.
  std::string config(const std::string& cuda = GPUDIAG_FAKE_CUDA, const std::string& extra = "",
                     const std::string& timeout = "20s") {
    fs::path p = dir_ / "gpudiag.yaml";
    std::ofstream(p) << "gpu:\n  count: 8\n  probe: " << kProbe << "\n  probe_timeout: " << timeout
                     << "\n  libraries:\n    nvml: " << GPUDIAG_FAKE_NVML << "\n    cuda: " << cuda
                     << "\n    nccl: " << GPUDIAG_FAKE_NCCL << "\nnccl:\n  bytes: 1M\n  iters: 2\n  warmup: 1\n"
                     << extra;
    return p.string();
  }
  json health(const std::string& checks, const std::string& cfg, int* exit_code = nullptr) {
    auto r = run_process({kHealth, "--fs-root", kFixtures + "/healthy", "--config", cfg, "--checks", checks, "--format",
                          "json"});
    if (exit_code) *exit_code = r.exit_code;
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out << r.err;
    return j;
  }
  fs::path dir_;
};

json check(const json& report, const std::string& name) {
  if (report.is_object() && report.contains("checks"))
    for (const auto& c : report["checks"])
      if (c["name"] == name) return c;
  return json::object();
}

// Every finding's message and hint, one per line, for searching and for failure output.
std::string text(const json& c) {
  std::string out;
  if (c.contains("findings"))
    for (const auto& f : c["findings"])
      out += f["status"].get<std::string>() + " " + f["message"].get<std::string>() + " | " +
             f.value("hint", std::string()) + "\n";
  return out;
}

bool has(const json& c, const std::string& needle) { return text(c).find(needle) != std::string::npos; }

TEST_F(FakeDriver, HealthyNodeIsOkThroughTheRealProbe) {
  int rc = -1;
  json r = health("gpu,p2p,nccl", config(), &rc);
  EXPECT_EQ(rc, 0) << r.dump(2);
  EXPECT_EQ(check(r, "gpu")["summary"], "8 of 8 GPUs on PCI, 8 seen by driver 570.86.15");
  EXPECT_EQ(check(r, "p2p")["summary"], "28 of 28 GPU pairs with P2P read and write");
  const std::string nccl = check(r, "nccl")["summary"];
  EXPECT_EQ(nccl.rfind("NCCL 2.28.9, 8 x NVIDIA H100 80GB HBM3: busbw ", 0), 0u) << nccl;
  EXPECT_NE(nccl.find("results correct"), std::string::npos) << nccl;
}

TEST_F(FakeDriver, EccAndRowRemappingReachTheReport) {
  env({{"FAKE_ECC", "2:5"}, {"FAKE_REMAPPED", "3:pending,5:failure"}});
  json c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "critical GPU2 (NVIDIA H100 80GB HBM3, 00000000:39:00.0): 5 uncorrected ECC error(s)")) << text(c);
  EXPECT_TRUE(has(c, "warning GPU3 (NVIDIA H100 80GB HBM3, 00000000:49:00.0): a memory row remapping is pending")) << text(c);
  EXPECT_TRUE(has(c, "critical GPU5 (NVIDIA H100 80GB HBM3, 00000000:69:00.0): row remapping failed")) << text(c);
}

// 3.1: NCCL logs on stdout when NCCL_DEBUG is set; the probe's JSON must survive it.
TEST_F(FakeDriver, NcclDebugOutputDoesNotBreakTheJson) {
  env({{"NCCL_DEBUG", "INFO"}});
  json r = health("nccl", config());
  EXPECT_EQ(check(r, "nccl")["status"], "ok") << text(check(r, "nccl"));
}

// Found on a real H100: NCCL writes its log through stdio and never flushes it, so the
// probe's _exit lost the last 4 KiB (Init COMPLETE included). The fake NCCL does not flush
// either. A hung probe's log is kept up to its last line, and the report quotes it.
TEST_F(FakeDriver, NcclsLogSurvivesTheProbesExitAndItsKill) {
  env({{"NCCL_DEBUG", "INFO"}});
  auto r = run_process({kProbe, "--nvml", GPUDIAG_FAKE_NVML, "--cuda", GPUDIAG_FAKE_CUDA, "--nccl", GPUDIAG_FAKE_NCCL,
                        "allreduce", "--sizes", "1M", "--iters", "1", "--warmup", "0"});
  EXPECT_TRUE(json::parse(r.out, nullptr, false).is_object()) << r.out;
  EXPECT_NE(r.err.find("NCCL INFO Init COMPLETE"), std::string::npos) << r.err;

  env({{"FAKE_HANG", "ncclAllReduce"}});
  json c = check(health("nccl", config(GPUDIAG_FAKE_CUDA, "", "3s")), "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "GPU probe timed out after 3 s; it last said: fakehost:")) << text(c);
  EXPECT_TRUE(has(c, "NCCL INFO Init COMPLETE")) << text(c);
}

// 3.2: 8 GPUs in NVML, 7 in CUDA: the all_reduce left one out.
TEST_F(FakeDriver, GpuMissingFromCudaFailsTheNcclCheck) {
  env({{"FAKE_CUDA_GPUS", "7"}});
  json r = health("nccl", config());
  json c = check(r, "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "GPU7 (00000000:89:00.0) is seen by NVML but not by CUDA")) << text(c);
}

// 3.3: a driver that is installed but broken takes the node out of service.
TEST_F(FakeDriver, BrokenDriverIsCriticalWithItsOwnFix) {
  env({{"FAKE_FAIL", "cuInit=802"}});
  json c = check(health("nccl", config()), "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "NVSwitch fabric is not initialised | start nvidia-fabricmanager")) << text(c);

  env({{"FAKE_FAIL", "cuInit=803"}});
  c = check(health("nccl", config()), "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "libcuda and the kernel module are different versions")) << text(c);

  env({{"FAKE_FAIL", "nvmlInit=18"}});
  c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "the driver was upgraded without a reboot: reboot the node")) << text(c);

  env({{"FAKE_FAIL", ""}, {"FAKE_FABRIC", "1:0"}});
  c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "NVSwitch fabric registration has not started")) << text(c);
}

// 3.8: a P2P query that fails says nothing about the pair.
TEST_F(FakeDriver, FailedP2pQueryIsUnknown) {
  env({{"FAKE_FAIL", "nvmlDeviceGetP2PStatus=999"}});
  json c = check(health("p2p", config()), "p2p");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "GPU0-GPU1: P2P status could not be read (GPU0-GPU1 read: Unknown Error (999))")) << text(c);
}

// 3.10: NO_PERMISSION is a GPU that a job's cgroup hides, not a broken one.
TEST_F(FakeDriver, GpuHiddenByACgroupIsNotAccessibleNotBroken) {
  env({{"FAKE_FAIL", "nvmlDeviceGetHandleByIndex@3=4"}});
  json c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "GPU3: not accessible here (nvmlDeviceGetHandleByIndex failed: Insufficient Permissions (4))"))
      << text(c);
}

// 3.4: links after a gap are still read; unwired links are not "down".
TEST_F(FakeDriver, NvlinkAfterAGapIsReadAndUnwiredLinksAreSkipped) {
  env({{"FAKE_NVLINKS", "18"}, {"FAKE_NVLINK_UNSUPPORTED", "2"}, {"FAKE_NVLINK_DOWN", "4:7"}});
  json c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "NVLink 7 down (16 of 17 active)")) << text(c);

  // An NVL-style board: links 0-5 wired, 6-17 without P2P capability.
  env({{"FAKE_NVLINK_UNSUPPORTED", ""}, {"FAKE_NVLINK_DOWN", ""}, {"FAKE_NVLINK_NOCAP", "6,7,8,9,10,11,12,13,14,15,16,17"}});
  c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "ok") << text(c);
}

// 3.7: with MIG on, P2P and a whole-GPU all_reduce do not apply.
TEST_F(FakeDriver, MigModeMakesP2pAndNcclNotApplicable) {
  env({{"FAKE_MIG", "1"}});
  json r = health("gpu,p2p,nccl", config());
  EXPECT_EQ(check(r, "p2p")["status"], "ok") << text(check(r, "p2p"));
  EXPECT_EQ(check(r, "p2p")["summary"], "not applicable: MIG mode is on (GPU0, GPU1, GPU2, GPU3, GPU4, GPU5, GPU6, GPU7)");
  EXPECT_EQ(check(r, "nccl")["status"], "ok") << text(check(r, "nccl"));
  EXPECT_TRUE(has(check(r, "gpu"), "healthy, MIG mode on")) << text(check(r, "gpu"));
}

// 3.5: after a failed all_reduce, kernels that never finish must not swallow the
// diagnosis: no cuMemFree or ncclCommDestroy on the way out, NCCL's own error text.
TEST_F(FakeDriver, FailedAllReduceWithStuckKernelsStillReportsNcclsError) {
  env({{"FAKE_FAIL", "ncclAllReduce=1"},
       {"FAKE_HANG", "kernel"},
       {"FAKE_NCCL_LAST_ERROR", "Cuda failure 'unspecified launch failure'"}});
  json c = check(health("nccl", config(GPUDIAG_FAKE_CUDA, "", "6s")), "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "ncclAllReduce failed: unhandled cuda error")) << text(c);
  EXPECT_TRUE(has(c, "NCCL: Cuda failure 'unspecified launch failure'")) << text(c);
}

TEST_F(FakeDriver, StuckKernelIsReportedBeforeTheProbeIsKilled) {
  env({{"FAKE_HANG", "kernel"}});
  json c = check(health("nccl", config(GPUDIAG_FAKE_CUDA, "", "4s")), "nccl");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "did not finish in time: a kernel is stuck")) << text(c);
  EXPECT_FALSE(has(c, "GPU probe timed out")) << text(c);
}

// 3.6: CUDA numbers GPUs its own way; the bandwidth matrix is reported in NVML's.
TEST_F(FakeDriver, PeerBandwidthIsReportedInNvmlOrder) {
  env({{"FAKE_CUDA_ORDER", "reverse"}, {"FAKE_SLOW_PAIR", "1,2"}});
  json c = check(health("p2p", config(GPUDIAG_FAKE_CUDA, "p2p:\n  bandwidth: true\n  min_bandwidth: 50\n  copy_bytes: 1M\n")),
                 "p2p");
  EXPECT_EQ(c["status"], "critical") << text(c);
  std::vector<std::string> slow;
  for (const auto& f : c["findings"])
    if (f["status"] == "critical") slow.push_back(f["subject"]);
  EXPECT_EQ(slow, (std::vector<std::string>{"GPU1-GPU2", "GPU2-GPU1"})) << text(c);

  // The all_reduce joins the lists too: reordered, nothing is missing.
  json n = check(health("nccl", config()), "nccl");
  EXPECT_EQ(n["status"], "ok") << text(n);
}

// 3.9: conditions of this run or this install are not GPU faults.
TEST_F(FakeDriver, LocalConditionsAreUnknownWithTheirOwnFix) {
  env({{"FAKE_FAIL", "cuMemAlloc=2"}});
  json c = check(health("nccl", config()), "nccl");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "cuMemAlloc of 1 MiB on GPU 0 failed: out of memory (2) (another process holds the GPU's memory, or "
                     "the check asks for more than it has) | run the check while the node is idle")) << text(c);

  env({{"FAKE_FAIL", "cuDevicePrimaryCtxRetain@2=46"}});
  c = check(health("nccl", config()), "nccl");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "an exclusive-process GPU in use by another process")) << text(c);

  env({{"FAKE_FAIL", "ncclCommInitAll=1"},
       {"FAKE_NCCL_LAST_ERROR", "Cuda failure 35 'CUDA driver version is insufficient for CUDA runtime version'"}});
  c = check(health("nccl", config()), "nccl");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "this NCCL needs a newer driver) | install an NCCL built for the driver's CUDA version")) << text(c);
}

// 3.11: R535/R550 drivers lack cuEventElapsedTime_v2 and work; a driver too old to
// work is named as such, without a wrong CUDA version.
TEST_F(FakeDriver, OlderDriversWorkAndTooOldOnesSaySo) {
  json c = check(health("nccl", config(GPUDIAG_FAKE_CUDA_R535)), "nccl");
  EXPECT_EQ(c["status"], "ok") << text(c);

  c = check(health("nccl", config(GPUDIAG_FAKE_CUDA_ANCIENT)), "nccl");
  EXPECT_EQ(c["status"], "unknown") << text(c);
  EXPECT_TRUE(has(c, "lacks cuDevicePrimaryCtxRelease_v2")) << text(c);
  EXPECT_TRUE(has(c, "it needs R470, CUDA 11.4, or later; R535 and R550 work")) << text(c);
  EXPECT_FALSE(has(c, "12.8")) << text(c);
}

// Issue 19 item 5: what NVML says about clocks, temperature and the PCIe link, judged.
TEST_F(FakeDriver, HardwareThrottleHeatAndReplaysAreWarnings) {
  env({{"FAKE_THROTTLE", "2:0x8,3:0x5,6:0xc0"},
       {"FAKE_TEMP", "4:84,7:91"},
       {"FAKE_REPLAY", "1:500,5:12"}});
  json c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "warning") << text(c);
  EXPECT_TRUE(has(c, "warning GPU2 (NVIDIA H100 80GB HBM3, 00000000:39:00.0): clocks pulled down by the hardware: "
                     "HW slowdown (clocks event reasons 0x8) | HW slowdown: the board signals")) << text(c);
  EXPECT_TRUE(has(c, "warning GPU6 (NVIDIA H100 80GB HBM3, 00000000:79:00.0): clocks pulled down by the hardware: "
                     "HW thermal slowdown, HW power brake (clocks event reasons 0xc0)")) << text(c);
  // Idle and the software power cap are how a working GPU runs.
  EXPECT_FALSE(has(c, "warning GPU3")) << text(c);
  EXPECT_TRUE(has(c, "ok GPU3 (NVIDIA H100 80GB HBM3, 00000000:49:00.0): healthy")) << text(c);
  EXPECT_TRUE(has(c, "warning GPU4 (NVIDIA H100 80GB HBM3, 00000000:59:00.0): 84 C, within 5 C of its slowdown "
                     "temperature of 87 C")) << text(c);
  EXPECT_TRUE(has(c, "GPU7 (NVIDIA H100 80GB HBM3, 00000000:89:00.0): 91 C, at or above its slowdown temperature")) << text(c);
  EXPECT_TRUE(has(c, "warning GPU1 (NVIDIA H100 80GB HBM3, 00000000:29:00.0): 500 PCIe replays since the driver loaded "
                     "(gpu.pcie_replay_max 100)")) << text(c);
  EXPECT_TRUE(has(c, "ok GPU5 (NVIDIA H100 80GB HBM3, 00000000:69:00.0): 12 PCIe replay(s) since the driver loaded"))
      << text(c);
  EXPECT_EQ(c["details"]["driver"]["gpus"][5]["pcie_replay_count"], 12) << c["details"].dump();
}

TEST_F(FakeDriver, ThrottlePolicyAndReplayLimitComeFromTheConfig) {
  env({{"FAKE_THROTTLE", "0:0x80"}, {"FAKE_REPLAY", "1:500"}});
  fs::path p = dir_ / "own.yaml";
  std::ofstream(p) << "gpu:\n  count: 8\n  probe: " << kProbe << "\n  throttle: critical\n  pcie_replay_max: 1000\n"
                   << "  libraries:\n    nvml: " << GPUDIAG_FAKE_NVML << "\n";
  json c = check(health("gpu", p.string()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "critical GPU0 (NVIDIA H100 80GB HBM3, 00000000:19:00.0): clocks pulled down by the hardware: "
                     "HW power brake (clocks event reasons 0x80)")) << text(c);
  EXPECT_FALSE(has(c, "500 PCIe replays since the driver loaded (gpu.pcie_replay_max")) << text(c);

  std::ofstream(p) << "gpu:\n  count: 8\n  probe: " << kProbe << "\n  throttle: ignore\n"
                   << "  libraries:\n    nvml: " << GPUDIAG_FAKE_NVML << "\n";
  env({{"FAKE_REPLAY", ""}});
  c = check(health("gpu", p.string()), "gpu");
  EXPECT_EQ(c["status"], "ok") << text(c);
}

// The integrator checks these raw values on a real H100: the probe prints them as NVML
// gave them, and leaves out what the driver does not support.
TEST_F(FakeDriver, ProbePrintsRawClockTemperatureAndReplayValues) {
  env({{"FAKE_THROTTLE", "2:0x48"}, {"FAKE_TEMP", "2:71"}, {"FAKE_REPLAY", "2:9"},
       {"FAKE_FAIL", "nvmlDeviceGetTemperatureThreshold@3=3,nvmlDeviceGetPcieReplayCounter@3=3"}});
  auto r = run_process({kProbe, "--nvml", GPUDIAG_FAKE_NVML, "devices"});
  json j = json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  const json& g2 = j["gpus"][2];
  EXPECT_EQ(g2["clocks_event_reasons"], 0x48) << g2.dump();
  EXPECT_EQ(g2["temperature_c"], 71) << g2.dump();
  EXPECT_EQ(g2["slowdown_temperature_c"], 87) << g2.dump();
  EXPECT_EQ(g2["pcie_replay_count"], 9) << g2.dump();
  const json& g3 = j["gpus"][3];
  EXPECT_FALSE(g3.contains("slowdown_temperature_c")) << g3.dump();
  EXPECT_FALSE(g3.contains("pcie_replay_count")) << g3.dump();
  EXPECT_EQ(g3["clocks_event_reasons"], 1) << g3.dump();
}

TEST_F(FakeDriver, TemperatureThrottleAndReplaysArePrometheusMetrics) {
  env({{"FAKE_TEMP", "4:84"}, {"FAKE_THROTTLE", "4:0x8"}, {"FAKE_REPLAY", "4:3"}});
  auto r = run_process({kHealth, "--fs-root", kFixtures + "/healthy", "--config", config(), "--checks", "gpu",
                        "--format", "prometheus"});
  EXPECT_NE(r.out.find("# TYPE gpudiag_gpu_temperature_celsius gauge\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpudiag_gpu_temperature_celsius{gpu=\"4\",bdf=\"00000000:59:00.0\"} 84\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpudiag_gpu_clocks_event_reasons{gpu=\"4\",bdf=\"00000000:59:00.0\"} 8\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gpudiag_gpu_pcie_replays{gpu=\"4\",bdf=\"00000000:59:00.0\"} 3\n"), std::string::npos) << r.out;
}

// Fabric states other than "not started" (already covered above) are judged too.
TEST_F(FakeDriver, FabricInProgressWarnsAndFailedRegistrationIsCritical) {
  env({{"FAKE_FABRIC", "2:0"}});
  json c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "warning") << text(c);
  EXPECT_TRUE(has(c, "NVSwitch fabric registration is still in progress")) << text(c);
  env({{"FAKE_FABRIC", "3:999"}});
  c = check(health("gpu", config()), "gpu");
  EXPECT_EQ(c["status"], "critical") << text(c);
  EXPECT_TRUE(has(c, "NVSwitch fabric registration failed: Unknown Error (999)")) << text(c);
}

// --baseline asks the probe for the model where it is allowed to (a configured probe).
TEST_F(FakeDriver, BaselineReadsTheGpuModelThroughTheProbe) {
  auto r = run_process({kHealth, "--baseline", "--fs-root", kFixtures + "/healthy", "--config", config()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n  model: \"*H100*\"\n"), std::string::npos) << r.out;

  env({{"FAKE_GPUS", "7"}});
  r = run_process({kHealth, "--baseline", "--fs-root", kFixtures + "/healthy", "--config", config()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("the driver sees 7 GPU(s) but 8 are on PCI"), std::string::npos) << r.err;
}

}  // namespace
