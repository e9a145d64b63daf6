// gpudiag-health's GPU checks end to end: the real checker with a stand-in probe
// (canned JSON, a hang, a crash), and the real probe on whatever this machine has.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "run_process.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kHealth = GPUDIAG_HEALTH_BIN;
const std::string kProbe = GPUDIAG_PROBE_BIN;
const std::string kStandin = GPUDIAG_SOURCE_DIR "/tests/cli/standin_probe.sh";
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;

class StandinProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpudiag-standin-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    ::setenv("GPUDIAG_STANDIN_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void answer(const std::string& section, const std::string& text) { std::ofstream(dir_ / (section + ".json")) << text; }
  std::string args_of(const std::string& section) {
    std::ifstream in(dir_ / (section + ".args"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // The fixture tree has 8 H100s on PCI; the config points gpu.probe at the stand-in.
  std::string config(const std::string& extra = "") {
    fs::path p = dir_ / "gpudiag.yaml";
    std::ofstream(p) << "gpu:\n  count: 8\n  probe: " << kStandin << "\n  probe_timeout: 2s\n"
                     << "nccl:\n  bytes: 256M\n  min_bandwidth:\n    - {model: '*H100*', gpus: 8, busbw: 360}\n"
                     << extra;
    return p.string();
  }
  ProcessResult health(const std::string& checks, const std::string& cfg) {
    return run_process({kHealth, "--fs-root", kFixtures + "/healthy", "--config", cfg, "--checks", checks, "--format",
                        "json"});
  }
  fs::path dir_;
};

json gpus8() {
  json g = json::array();
  for (int i = 0; i < 8; ++i)
    g.push_back({{"index", i}, {"name", "NVIDIA H100 80GB HBM3"}, {"pci_bus_id", "00000000:1" + std::to_string(i) + ":00.0"},
                 {"ecc_uncorrected_volatile", 0}, {"retired_pages_pending", false}, {"nvlink", json::array()},
                 {"errors", json::array()}});
  return g;
}

json check(const json& report, const std::string& name) {
  for (const auto& c : report["checks"])
    if (c["name"] == name) return c;
  return nullptr;
}

TEST_F(StandinProbe, HealthyEightGpuNodeIsOk) {
  answer("devices", json{{"driver_version", "570.86"}, {"gpus", gpus8()}}.dump());
  json ok = json::array();
  for (int i = 0; i < 8; ++i) ok.push_back(json::array({0, 0, 0, 0, 0, 0, 0, 0}));
  answer("p2p", json{{"gpus", gpus8()}, {"read", ok}, {"write", ok}, {"nvlink", ok}}.dump());
  // 256 MiB in 1 ms: algbw 268.4 GB/s, busbw 469.8 GB/s.
  answer("allreduce", json{{"nccl_version", "2.28.9"}, {"gpus", gpus8()},
                           {"results", json::array({{{"bytes", 268435456}, {"time_us", 1000.0}, {"correct", true}}})}}
                          .dump());
  auto r = health("gpu,p2p,nccl", config());
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json report = json::parse(r.out);
  EXPECT_EQ(check(report, "gpu")["summary"], "8 of 8 GPUs on PCI, 8 seen by driver 570.86");
  EXPECT_EQ(check(report, "p2p")["summary"], "28 of 28 GPU pairs with P2P read and write");
  EXPECT_EQ(check(report, "nccl")["summary"],
            "NCCL 2.28.9, 8 x NVIDIA H100 80GB HBM3: busbw 469.8 GB/s, algbw 268.4 GB/s at 256 MiB, results correct");
  // The checker passes the config's size and iterations on.
  // The probe stops waiting on the GPU before it would be killed (probe_timeout 2 s).
  EXPECT_EQ(args_of("allreduce"), "--wait-limit 1.5 allreduce --sizes 268435456 --iters 20 --warmup 5 ");
}

// --format prometheus: ECC counts per GPU from the devices answer, busbw and algbw from
// the all_reduce.
TEST_F(StandinProbe, PrometheusHasEccPerGpuAndMeasuredBandwidth) {
  json g = gpus8();
  g[2]["ecc_uncorrected_volatile"] = 3;
  g[2]["remapped_rows"] = {{"correctable", 1}, {"uncorrectable", 2}, {"pending", false}, {"failure", false}};
  answer("devices", json{{"driver_version", "570.86"}, {"gpus", g}}.dump());
  answer("allreduce", json{{"nccl_version", "2.28.9"}, {"gpus", gpus8()},
                           {"results", json::array({{{"bytes", 268435456}, {"time_us", 1000.0}, {"correct", true}}})}}
                          .dump());
  auto r = run_process({kHealth, "--fs-root", kFixtures + "/healthy", "--config", config(), "--checks", "gpu,nccl",
                        "--format", "prometheus"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;  // the ECC errors
  for (const char* want : {
           "gpudiag_gpu_ecc_uncorrected_volatile{gpu=\"00000000:10:00.0\"} 0\n",
           "gpudiag_gpu_ecc_uncorrected_volatile{gpu=\"00000000:12:00.0\"} 3\n",
           "gpudiag_gpu_remapped_rows{gpu=\"00000000:12:00.0\",cause=\"uncorrectable\"} 2\n",
           "gpudiag_nccl_allreduce_busbw_gbytes_per_second{model=\"NVIDIA H100 80GB HBM3\",gpus=\"8\",bytes=\"268435456\"} 469.7",
           "gpudiag_nccl_allreduce_algbw_gbytes_per_second{model=\"NVIDIA H100 80GB HBM3\",gpus=\"8\",bytes=\"268435456\"} 268.4",
       })
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST_F(StandinProbe, SlowAllReduceAndALostGpuAreCritical) {
  json g = gpus8();
  g.erase(g.begin() + 3);
  answer("devices", json{{"gpus", g}}.dump());
  answer("allreduce", json{{"nccl_version", "2.28.9"}, {"gpus", gpus8()},
                           {"results", json::array({{{"bytes", 268435456}, {"time_us", 2000.0}, {"correct", true}}})}}
                          .dump());
  auto r = health("gpu,nccl", config());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("the driver sees 7 GPU(s) but 8 are on PCI"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("all_reduce busbw 234.9 GB/s at 256 MiB on 8 x NVIDIA H100 80GB HBM3, below 360"),
            std::string::npos)
      << r.out;
}

TEST_F(StandinProbe, HungProbeIsKilledWithItsChildrenAndIsCritical) {
  answer("allreduce", "hang");
  auto t0 = std::chrono::steady_clock::now();
  auto r = health("nccl", config());
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("GPU probe timed out after 2 s"), std::string::npos) << r.out;
  EXPECT_LT(s, 15) << "the deadline was not enforced";
  // The probe's whole process group died with it.
  auto left = run_process({"/usr/bin/pgrep", "-f", "gpudiag-standin-sleeper-" + dir_.filename().string()});
  EXPECT_NE(left.exit_code, 0) << "a child of the hung probe survived: " << left.out;
}

TEST_F(StandinProbe, CrashedProbeNamesTheSignal) {
  answer("p2p", "crash");
  auto r = health("p2p", config());
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("GPU probe was killed by SIGSEGV (Segmentation fault)"), std::string::npos) << r.out;
}

TEST_F(StandinProbe, NhcLineForAProbeTimeout) {
  answer("devices", "hang");
  auto r = run_process({kHealth, "--fs-root", kFixtures + "/healthy", "--config", config(), "--checks", "gpu", "--format",
                        "nhc"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "gpudiag: GPU probe timed out after 2 s\n");
}

// The probe on this machine, whatever it has. Without a driver (CI) every GPU check is
// a clean UNKNOWN that names the library and where the probe looked, quickly.
TEST(RealProbe, NoDriverGivesACleanUnknownFast) {
  auto nvml = run_process({kProbe, "devices"});
  ASSERT_EQ(nvml.exit_code, 0) << nvml.err;
  json devices = json::parse(nvml.out);
  if (!devices.contains("error") || devices["error"]["kind"] != "library")
    GTEST_SKIP() << "this machine has an NVIDIA driver; RealGpu tests cover it";
  auto t0 = std::chrono::steady_clock::now();
  auto r = run_process({kHealth, "--checks", "gpu,p2p,nccl", "--format", "json"});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
  json report = json::parse(r.out);
  for (const char* name : {"p2p", "nccl"}) {
    EXPECT_EQ(check(report, name)["status"], "unknown") << report.dump(2);
    std::string msg = check(report, name)["findings"][0]["message"];
    if (std::string(name) == "p2p") {
      EXPECT_NE(msg.find("libnvidia-ml.so.1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("/usr/local/nvidia/lib64"), std::string::npos) << msg;
    } else {
      // The first library the all_reduce needs that is not here: libcuda.so.1, or, where
      // a CUDA driver library is installed without NCCL (Debian 13's root), libnccl.so.2.
      EXPECT_TRUE(msg.find("libcuda.so.1") != std::string::npos || msg.find("libnccl.so.2") != std::string::npos)
          << msg;
      EXPECT_NE(msg.find("cannot load"), std::string::npos) << msg;
    }
  }
  EXPECT_EQ(r.exit_code, 3);
}

// A node with no GPU and no driver (the demo's CPU-only machine): the gpu check is OK and
// says so in words that read as OK, not the probe's "cannot load NVML: tried ...".
TEST(RealProbe, NoGpuNoDriverReadsAsOk) {
  auto r = run_process({kHealth, "--checks", "gpu", "--format", "json"});
  json gpu = check(json::parse(r.out), "gpu");
  if (gpu["summary"] != "0 GPUs on PCI") GTEST_SKIP() << "this machine has a GPU on PCI: " << gpu["summary"];
  EXPECT_EQ(gpu["status"], "ok") << gpu.dump();
  for (const auto& f : gpu["findings"]) EXPECT_EQ(f["message"].get<std::string>().find("cannot"), std::string::npos) << f;
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(RealProbe, LinksOnlyLibcAndLibstdcxx) {
  auto r = run_process({"/usr/bin/readelf", "-d", kProbe});
  ASSERT_EQ(r.exit_code, 0);
  std::size_t pos = 0;
  while ((pos = r.out.find("Shared library: [", pos)) != std::string::npos) {
    pos += 17;
    std::string lib = r.out.substr(pos, r.out.find(']', pos) - pos);
    // A sanitizer build adds its runtimes; nothing else may appear.
    bool sanitizer = lib.rfind("libasan.so", 0) == 0 || lib.rfind("libubsan.so", 0) == 0;
    EXPECT_TRUE(lib == "libc.so.6" || lib == "libstdc++.so.6" || lib == "libgcc_s.so.1" || lib == "libm.so.6" ||
                sanitizer)
        << lib;
  }
}

TEST(RealProbe, StubDriverIsADriverErrorAndUsageErrorsExit64) {
  auto r = run_process({kProbe, "--cuda", "/usr/local/cuda/lib64/stubs/libcuda.so", "allreduce"});
  ASSERT_EQ(r.exit_code, 0);
  json j = json::parse(r.out);
  if (j.contains("error") && j["error"]["kind"] == "library" &&
      j["error"]["message"].get<std::string>().find("NCCL") != std::string::npos)
    GTEST_SKIP() << "no libnccl.so.2 on this machine: " << j.dump();
  ASSERT_TRUE(j.contains("error")) << j.dump();
  EXPECT_EQ(j["error"]["kind"], "driver") << j.dump();
  EXPECT_EQ(run_process({kProbe, "allreduce", "--sizes", "lots"}).exit_code, 64);
  EXPECT_EQ(run_process({kProbe}).exit_code, 64);
}

// On a machine with a GPU (the device runs these), the real thing.
TEST(RealGpu, AllReduceIsCorrect) {
  auto d = run_process({kProbe, "devices"});
  json devices = json::parse(d.out);
  if (devices.contains("error")) GTEST_SKIP() << "no usable GPU here: " << devices["error"]["message"];
  auto r = run_process({kProbe, "allreduce", "--sizes", "64M", "--iters", "5", "--warmup", "2"});
  json j = json::parse(r.out);
  ASSERT_FALSE(j.contains("error")) << j.dump(2);
  EXPECT_EQ(j["results"][0]["correct"], true) << j.dump(2);
  EXPECT_GT(j["results"][0]["algbw_gbps"].get<double>(), 0);
  auto p = run_process({kProbe, "p2p"});
  EXPECT_FALSE(json::parse(p.out).contains("error")) << p.out;
}

}  // namespace
