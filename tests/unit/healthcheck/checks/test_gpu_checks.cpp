// The GPU checks' pure logic: nccl-tests' bandwidth formulas, threshold choice, the
// P2P matrix, and how the checker reads the probe's JSON and its fate.
#include <gtest/gtest.h>

#include <csignal>

#include "healthcheck/checks/bandwidth_rules.h"
#include "healthcheck/checks/check_nccl.h"
#include "healthcheck/checks/check_p2p.h"
#include "healthcheck/checks/gpu_driver_view.h"
#include "healthcheck/checks/gpu_probe.h"
#include "healthcheck/checks/p2p_matrix.h"
#include "util/bus_bandwidth.h"
#include "tests/unit/healthcheck/checks/finding.h"

using namespace gpudiag;
using gpudiag::test::find;
using nlohmann::json;

namespace {

json gpus(int n, const std::string& name = "NVIDIA H100 80GB HBM3") {
  json g = json::array();
  for (int i = 0; i < n; ++i)
    g.push_back({{"index", i}, {"name", name}, {"pci_bus_id", "00000000:" + std::to_string(10 + i) + ":00.0"}});
  return g;
}

json square(int n, int value) {
  json m = json::array();
  for (int i = 0; i < n; ++i) {
    json row = json::array();
    for (int j = 0; j < n; ++j) row.push_back(i == j ? 0 : value);
    m.push_back(row);
  }
  return m;
}

json allreduce(int n, double time_us, bool correct = true, unsigned long long bytes = 1ull << 30,
               const std::string& name = "NVIDIA H100 80GB HBM3") {
  return {{"nccl_version", "2.28.9"},
          {"gpus", gpus(n, name)},
          {"ranks", n},
          {"results", json::array({{{"bytes", bytes}, {"time_us", time_us}, {"correct", correct}}})}};
}

}  // namespace

// nccl-tests: algbw = bytes / s / 1e9; busbw = algbw * 2(n-1)/n.
TEST(BusBandwidth, MatchesNcclTestsDefinitions) {
  EXPECT_DOUBLE_EQ(algbw_gbps(1e9, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(algbw_gbps(1073741824.0, 0.004), 268.435456);
  EXPECT_DOUBLE_EQ(allreduce_busbw_factor(8), 1.75);
  EXPECT_DOUBLE_EQ(allreduce_busbw_factor(2), 1.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw_factor(1), 0.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw_gbps(268.435456, 8), 469.762048);
  EXPECT_DOUBLE_EQ(algbw_gbps(1e9, 0.0), 0.0);
}

TEST(BandwidthRules, ExactCountWinsThenFirstForTheModel) {
  std::vector<BandwidthRule> rules(4);
  rules[0].model = "*A100*";
  rules[0].busbw_gbps = 220;
  rules[1].model = "*H100*";
  rules[1].busbw_gbps = 300;  // any count
  rules[2].model = "*H100*";
  rules[2].gpus = 8;
  rules[2].busbw_gbps = 360;
  rules[3].model = "*H100*";
  rules[3].busbw_gbps = 1;  // shadowed by rules[1]
  EXPECT_EQ(choose_bandwidth_rule(rules, "NVIDIA H100 80GB HBM3", 8), &rules[2]);
  EXPECT_EQ(choose_bandwidth_rule(rules, "NVIDIA H100 80GB HBM3", 4), &rules[1]);
  EXPECT_EQ(choose_bandwidth_rule(rules, "NVIDIA H200", 8), nullptr);
  EXPECT_EQ(choose_bandwidth_rule({}, "NVIDIA H200", 8), nullptr);
}

TEST(P2pMatrix, PrintsLikeNvidiaSmiWithLegend) {
  std::string text = format_p2p_matrix({{0, 0, 1}, {0, 0, 4}, {3, -1, 0}});
  EXPECT_EQ(text,
            " \tGPU0\tGPU1\tGPU2\t\n"
            " GPU0\tX\tOK\tCNS\t\n"
            " GPU1\tOK\tX\tDR\t\n"
            " GPU2\tTNS\tU\tX\t\n");
  for (const char* line : {"  X    = Self", "  OK   = Status OK", "  CNS  = Chipset not supported",
                           "  GNS  = GPU not supported", "  TNS  = Topology not supported", "  DR   = Disabled by regkey",
                           "  NS   = Not supported", "  U    = Unknown"})
    EXPECT_NE(p2p_legend().find(line), std::string::npos) << line << "\n" << p2p_legend();
  EXPECT_STREQ(p2p_code(5), "NS");
  EXPECT_STREQ(p2p_code(42), "U");
}

TEST(P2pCheck, AllOkIsOk) {
  json data = {{"gpus", gpus(4)}, {"read", square(4, 0)}, {"write", square(4, 0)}, {"nvlink", square(4, 0)}};
  auto r = evaluate_p2p(data, P2pSettings{});
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary, "6 of 6 GPU pairs with P2P read and write");
  EXPECT_NE(r.text.find("READ\n \tGPU0"), std::string::npos);
}

TEST(P2pCheck, ChipsetNotSupportedNamesThePair) {
  json read = square(4, 0);
  read[1][3] = 1;
  read[3][1] = 1;
  json data = {{"gpus", gpus(4)}, {"read", read}, {"write", square(4, 0)}, {"nvlink", square(4, 5)}};
  auto r = evaluate_p2p(data, P2pSettings{});
  EXPECT_EQ(r.status, Status::critical);
  const Finding* f = find(r, "GPU1-GPU3");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->message, "GPU1-GPU3: P2P READ CNS (chipset not supported)");
  EXPECT_NE(f->hint.find("ACS"), std::string::npos);
  EXPECT_EQ(r.summary, "5 of 6 GPU pairs with P2P read and write");
}

TEST(P2pCheck, NvlinkExpectationAndAsymmetry) {
  json nvlink = square(2, 0);
  nvlink[1][0] = 5;
  json data = {{"gpus", gpus(2)}, {"read", square(2, 0)}, {"write", square(2, 0)}, {"nvlink", nvlink}};
  P2pSettings s;
  EXPECT_EQ(evaluate_p2p(data, s).status, Status::ok);
  s.expect = "nvlink";
  auto r = evaluate_p2p(data, s);
  ASSERT_TRUE(find(r, "GPU0-GPU1"));
  EXPECT_EQ(find(r, "GPU0-GPU1")->message, "GPU0-GPU1: P2P NVLINK NS (not supported) from GPU1");
  s.expect = "any";
  data["read"] = square(2, 4);
  EXPECT_EQ(evaluate_p2p(data, s).status, Status::ok);
}

TEST(P2pCheck, OneGpuAndMalformedInput) {
  json one = {{"gpus", gpus(1)}, {"read", square(1, 0)}, {"write", square(1, 0)}, {"nvlink", square(1, 0)}};
  EXPECT_EQ(evaluate_p2p(one, P2pSettings{}).summary, "1 GPU, no pairs");
  for (json bad : {json::object(), json{{"gpus", gpus(2)}, {"read", "x"}},
                   json{{"gpus", gpus(2)}, {"read", square(3, 0)}, {"write", square(2, 0)}, {"nvlink", square(2, 0)}},
                   json{{"gpus", 7}}})
    EXPECT_EQ(evaluate_p2p(bad, P2pSettings{}).status, Status::unknown) << bad.dump();
}

TEST(P2pCheck, BandwidthBelowMinimumIsCritical) {
  json data = {{"gpus", gpus(2)}, {"read", square(2, 0)}, {"write", square(2, 0)}, {"nvlink", square(2, 0)}};
  data["bandwidth"] = {{"gbps", json::array({json::array({nullptr, 350.0}), json::array({12.5, nullptr})})}};
  P2pSettings s;
  s.min_bandwidth_gbps = 100;
  auto r = evaluate_p2p(data, s);
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_TRUE(find(r, "GPU1-GPU0"));
  EXPECT_EQ(find(r, "GPU1-GPU0")->message, "GPU1-GPU0: copy bandwidth 12.5 GB/s, below p2p.min_bandwidth 100");
}

TEST(NcclCheck, EightGpusAboveThresholdIsOk) {
  NcclCheckSettings s;
  s.min_bandwidth.push_back({"*H100*", 8, 360.0, std::nullopt, 12});
  // 1 GiB in 4 ms: algbw 268.4, busbw 469.8.
  auto r = evaluate_nccl(allreduce(8, 4000), s);
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary,
            "NCCL 2.28.9, 8 x NVIDIA H100 80GB HBM3: busbw 469.8 GB/s, algbw 268.4 GB/s at 1 GiB, results correct");
  EXPECT_DOUBLE_EQ(r.details["busbw_gbps"].get<double>(), 469.762048);
}

TEST(NcclCheck, BelowThresholdNamesValueLimitAndConfigLine) {
  NcclCheckSettings s;
  s.min_bandwidth.push_back({"*H100*", 8, 360.0, std::nullopt, 12});
  auto r = evaluate_nccl(allreduce(8, 8000), s);
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_TRUE(find(r, "busbw"));
  EXPECT_EQ(find(r, "busbw")->message,
            "all_reduce busbw 234.9 GB/s at 1 GiB on 8 x NVIDIA H100 80GB HBM3, below 360 (nccl.min_bandwidth, config "
            "line 12)");
}

TEST(NcclCheck, OneGpuReportsAlgbwAndSaysBusbwIsUndefined) {
  NcclCheckSettings s;
  s.min_bandwidth.push_back({"*", std::nullopt, 100.0, std::nullopt, 3});
  auto r = evaluate_nccl(allreduce(1, 2000, true, 1ull << 30, "NVIDIA H200"), s);
  EXPECT_EQ(r.status, Status::ok);
  EXPECT_EQ(r.summary,
            "NCCL 2.28.9, 1 x NVIDIA H200: algbw 536.9 GB/s at 1 GiB (busbw is undefined with one GPU), results correct");
  ASSERT_TRUE(find(r, "threshold"));
  EXPECT_NE(find(r, "threshold")->message.find("busbw is undefined with one GPU"), std::string::npos);
  EXPECT_TRUE(r.details["busbw_gbps"].is_null());
  s.min_bandwidth[0].algbw_gbps = 600;
  EXPECT_EQ(evaluate_nccl(allreduce(1, 2000, true, 1ull << 30, "NVIDIA H200"), s).status, Status::critical);
}

TEST(NcclCheck, WrongResultsAreCritical) {
  json data = allreduce(2, 4000, false);
  data["results"][0]["mismatch"] = "GPU 1 element 5 is 2.000000, expected 3.000000";
  auto r = evaluate_nccl(data, NcclCheckSettings{});
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_NE(find(r, "allreduce")->message.find("GPU 1 element 5"), std::string::npos);
}

TEST(NcclCheck, MalformedResultIsUnknownNotACrash) {
  for (json bad : {json::object(), json{{"results", 1}}, json{{"gpus", gpus(2)}, {"results", json::array({1})}},
                   json{{"gpus", gpus(2)}, {"results", json::array({{{"bytes", -1}, {"time_us", 3}}})}},
                   json{{"gpus", json::array({1, 2})}, {"results", json::array({{{"bytes", 4}, {"time_us", 3}}})}}})
    EXPECT_EQ(evaluate_nccl(bad, NcclCheckSettings{}).status, Status::unknown) << bad.dump();
}

TEST(ProbeOutcome, TimeoutAndSignalAreCritical) {
  CommandResult run;
  run.started = true;
  run.timed_out = true;
  auto o = interpret_probe(run, "/p", 12, GpuExpect{});
  ASSERT_TRUE(o.failure);
  EXPECT_EQ(o.failure->status, Status::critical);
  EXPECT_EQ(o.failure->message, "GPU probe timed out after 12 s");
  // What NCCL logged last says where it hung; a terminal escape in it stays inert.
  run.err = "n1:7:7 [0] NCCL INFO Bootstrap: Using eth0\nn1:7:7 [0] NCCL INFO comm 0x1 \x1b[2J rank 0\n\n";
  o = interpret_probe(run, "/p", 12, GpuExpect{});
  EXPECT_EQ(o.failure->message,
            "GPU probe timed out after 12 s; it last said: n1:7:7 [0] NCCL INFO comm 0x1 \\x1b[2J rank 0");
  run.err.clear();
  run.timed_out = false;
  run.signal = SIGSEGV;
  o = interpret_probe(run, "/p", 12, GpuExpect{});
  EXPECT_EQ(o.failure->status, Status::critical);
  EXPECT_EQ(o.failure->message, "GPU probe was killed by SIGSEGV (Segmentation fault)");
}

TEST(ProbeOutcome, ErrorKindsAndCpuNodes) {
  CommandResult run;
  run.started = true;
  run.exit_code = 0;
  run.out = R"({"error": {"kind": "library", "message": "cannot load NVML: tried x", "hint": "install"}})";
  auto o = interpret_probe(run, "/p", 5, GpuExpect{});
  EXPECT_EQ(o.failure->status, Status::unknown);
  EXPECT_EQ(o.failure->message, "cannot load NVML: tried x");
  GpuExpect none;
  none.count = 0;
  EXPECT_EQ(interpret_probe(run, "/p", 5, none).failure->status, Status::ok);
  run.out = R"({"error": {"kind": "gpu", "message": "ncclCommInitAll failed"}})";
  EXPECT_EQ(interpret_probe(run, "/p", 5, none).failure->status, Status::critical);
  run.out = R"({"gpus": []})";
  EXPECT_TRUE(interpret_probe(run, "/p", 5, none).ok());
}

TEST(ProbeOutcome, GarbageAndFailedStartsAreUnknown) {
  CommandResult run;
  run.started = true;
  run.exit_code = 0;
  for (std::string out : std::vector<std::string>{"", "not json", "[1,2]", std::string("\x00\xff\xfe", 3), R"({"error": 5})"}) {
    run.out = out;
    auto o = interpret_probe(run, "/p", 5, GpuExpect{});
    ASSERT_TRUE(o.failure) << out;
    EXPECT_EQ(o.failure->status, Status::unknown) << out;
  }
  run.exit_code = 64;
  run.out = "";
  run.err = "gpudiag-gpu-probe: bad option\nmore";
  EXPECT_EQ(interpret_probe(run, "/p", 5, GpuExpect{}).failure->message, "GPU probe exited 64: gpudiag-gpu-probe: bad option");
  CommandResult never;
  never.error = "No such file or directory";
  EXPECT_EQ(interpret_probe(never, "/x/probe", 5, GpuExpect{}).failure->message,
            "cannot run the GPU probe /x/probe: No such file or directory");
}

TEST(DriverView, HealthyGpusAddOkFindings) {
  CheckResult r;
  json devices = {{"driver_version", "570.86"}, {"gpus", gpus(2)}};
  EXPECT_EQ(add_driver_view(r, devices, 2, GpuExpect{}), "2 seen by driver 570.86");
  EXPECT_EQ(r.status, Status::ok);
  ASSERT_TRUE(find(r, "GPU1"));
  EXPECT_EQ(find(r, "GPU1")->message, "GPU1 (NVIDIA H100 80GB HBM3, 00000000:11:00.0): healthy");
}

TEST(DriverView, EachBadFieldIsAFinding) {
  json g = gpus(5);
  g[0]["ecc_uncorrected_volatile"] = 3;
  g[1]["retired_pages_pending"] = true;
  g[2]["remapped_rows"] = {{"correctable", 0}, {"uncorrectable", 2}, {"pending", false}, {"failure", true}};
  g[3]["nvlink"] = json::array({{{"link", 0}, {"active", true}}, {{"link", 1}, {"active", false}}});
  g[4]["errors"] = json::array({"nvmlDeviceGetHandleByIndex failed: GPU is lost (15)"});
  GpuExpect expect;
  expect.model = "*H200*";
  CheckResult r;
  add_driver_view(r, {{"gpus", g}}, 6, expect);
  EXPECT_EQ(r.status, Status::critical);
  EXPECT_EQ(find(r, "gpus")->message, "the driver sees 5 GPU(s) but 6 are on PCI");
  auto has = [&](const std::string& part, Status s) {
    for (const auto& f : r.findings)
      if (f.message.find(part) != std::string::npos && f.status == s) return true;
    return false;
  };
  EXPECT_TRUE(has("GPU0 (NVIDIA H100 80GB HBM3, 00000000:10:00.0): 3 uncorrected ECC error(s)", Status::critical));
  EXPECT_TRUE(has("GPU1 (NVIDIA H100 80GB HBM3, 00000000:11:00.0): retired memory pages are pending", Status::warning));
  EXPECT_TRUE(has("row remapping failed", Status::critical));
  EXPECT_TRUE(has("GPU3 (NVIDIA H100 80GB HBM3, 00000000:13:00.0): NVLink 1 down (1 of 2 active)", Status::critical));
  EXPECT_TRUE(has("GPU is lost", Status::critical));
  EXPECT_TRUE(has("is not a '*H200*' (gpu.model)", Status::warning));
}

TEST(DriverView, AllLinksDownIsHowAPcieCardLooks) {
  json g = gpus(1);
  g[0]["nvlink"] = json::array({{{"link", 0}, {"active", false}}, {{"link", 1}, {"active", false}}});
  CheckResult r;
  add_driver_view(r, {{"gpus", g}}, 1, GpuExpect{});
  EXPECT_EQ(r.status, Status::ok);
}

TEST(DriverView, WrongTypesDoNotThrow) {
  json g = json::array({{{"index", "x"}, {"name", 5}, {"ecc_uncorrected_volatile", "many"}, {"nvlink", 3},
                         {"remapped_rows", {{"failure", "yes"}}}, {"errors", json::array({1, 2})}},
                        7});
  CheckResult r;
  EXPECT_NO_THROW(add_driver_view(r, {{"gpus", g}}, 2, GpuExpect{}));
  CheckResult r2;
  add_driver_view(r2, {{"gpus", "none"}}, 2, GpuExpect{});
  EXPECT_EQ(r2.status, Status::unknown);
}

// Found by fuzz_probe_json: a field of the wrong type ("correct": {...}) threw out of
// evaluate_nccl, which the runner turned into "this is a gpudiag bug". A probe answer
// with wrong types is a bad probe answer, not an internal error.
TEST(NcclCheck, FieldsOfTheWrongTypeAreAbsentNotExceptions) {
  json data = allreduce(2, 4000);
  data["results"][0]["correct"] = json{{"gpu", 1}};
  data["results"][0]["mismatch"] = 7;
  data["nccl_version"] = json::array({2, 28});
  NcclCheckSettings s;
  CheckResult r;
  ASSERT_NO_THROW(r = evaluate_nccl(data, s));
  EXPECT_EQ(r.status, Status::critical) << "a result not known to be correct is not OK";
  json err = {{"error", {{"kind", 5}, {"message", json::array()}, {"hint", nullptr}}}};
  ASSERT_NO_THROW(evaluate_p2p(err, P2pSettings{}));
  CommandResult run;
  run.started = true;
  run.exit_code = 0;
  run.out = err.dump();
  ProbeOutcome o;
  ASSERT_NO_THROW(o = interpret_probe(run, "/p", 5, GpuExpect{}));
  ASSERT_TRUE(o.failure);
  EXPECT_EQ(o.failure->status, Status::unknown);
}

// Issue 16: the probe's new answers (the fake-driver tests drive the same paths end to end).
TEST(P2pCheck, FailedQueryIsUnknownNotCritical) {
  json read = square(3, 0);
  read[0][1] = -1;
  read[1][0] = -1;
  json data = {{"gpus", gpus(3)}, {"read", read}, {"write", square(3, 0)}, {"nvlink", square(3, 0)},
               {"query_errors", json::array({"GPU0-GPU1 read: Unknown Error (999)"})}};
  auto r = evaluate_p2p(data, P2pSettings{});
  EXPECT_EQ(r.status, Status::unknown);
  ASSERT_TRUE(find(r, "GPU0-GPU1"));
  EXPECT_EQ(find(r, "GPU0-GPU1")->message, "GPU0-GPU1: P2P status could not be read (GPU0-GPU1 read: Unknown Error (999))");
  EXPECT_EQ(r.summary, "2 of 3 GPU pairs with P2P read and write, 1 unread");
  // A real fault on the same pair still wins.
  read[0][1] = 1;
  data["read"] = read;
  EXPECT_EQ(evaluate_p2p(data, P2pSettings{}).status, Status::critical);
}

TEST(GpuChecks, MigIsNotApplicable) {
  json na = {{"not_applicable", "MIG mode is on (GPU0)"}, {"gpus", gpus(2)}};
  EXPECT_EQ(evaluate_p2p(na, P2pSettings{}).status, Status::ok);
  EXPECT_EQ(evaluate_nccl(na, NcclCheckSettings{}).summary, "not applicable: MIG mode is on (GPU0)");
}

TEST(NcclCheck, RanksAreCheckedAgainstNvmlAndGpuCount) {
  json data = allreduce(7, 4000);
  GpuExpect expect;
  expect.count = 8;
  auto r = evaluate_nccl(data, NcclCheckSettings{}, expect);
  EXPECT_EQ(r.status, Status::critical);
  ASSERT_TRUE(find(r, "ranks"));
  EXPECT_EQ(find(r, "ranks")->message, "all_reduce ran on 7 GPU(s) where 8 are expected (gpu.count)");
  data["missing_from_cuda"] = json::array({{{"index", 7}, {"pci_bus_id", "00000000:89:00.0"}}});
  r = evaluate_nccl(data, NcclCheckSettings{}, GpuExpect{});
  ASSERT_TRUE(find(r, "GPU7"));
  EXPECT_EQ(find(r, "GPU7")->message, "GPU7 (00000000:89:00.0) is seen by NVML but not by CUDA, so it took no part in the test");
  EXPECT_EQ(r.status, Status::critical);
}

TEST(DriverView, HiddenGpusAndTheFabric) {
  json g = gpus(3);
  g[0] = {{"index", 0}, {"not_accessible", "nvmlDeviceGetHandleByIndex failed: Insufficient Permissions (4)"}};
  g[1]["fabric"] = {{"state", 3}, {"status", 15}, {"status_text", "GPU is lost (15)"}};
  g[2]["fabric"] = {{"state", 2}, {"status", 0}};
  CheckResult r;
  add_driver_view(r, {{"gpus", g}}, 3, GpuExpect{});
  EXPECT_EQ(find(r, "GPU0")->status, Status::unknown);
  EXPECT_EQ(find(r, "GPU0")->message, "GPU0: not accessible here (nvmlDeviceGetHandleByIndex failed: Insufficient Permissions (4))");
  EXPECT_EQ(find(r, "GPU1")->status, Status::critical);
  EXPECT_NE(find(r, "GPU1")->message.find("NVSwitch fabric registration failed: GPU is lost (15)"), std::string::npos);
  EXPECT_EQ(find(r, "GPU2")->status, Status::warning);
}

TEST(ProbeOutcome, BrokenDriverIsCriticalLocalConditionsAreUnknown) {
  CommandResult run;
  run.started = true;
  run.exit_code = 0;
  run.out = R"j({"error": {"kind": "driver_fault", "message": "cuInit failed: system not yet initialized (802)"}})j";
  EXPECT_EQ(interpret_probe(run, "/p", 5, GpuExpect{}).failure->status, Status::critical);
  for (const char* kind : {"busy", "incompatible", "driver"}) {
    run.out = std::string(R"({"error": {"kind": ")") + kind + R"(", "message": "m"}})";
    EXPECT_EQ(interpret_probe(run, "/p", 5, GpuExpect{}).failure->status, Status::unknown) << kind;
  }
}

// A probe from another version may send anything: a temperature near 2^64 must not wrap
// around the slowdown margin and read as cool; idle and power-capped clocks are fine.
TEST(GpuDriverView, AbsurdTemperatureIsHotAndSoftwareReasonsAreFine) {
  json g = json::array({{{"index", 0}, {"temperature_c", 18446744073709551613ull}, {"slowdown_temperature_c", 87}},
                        {{"index", 1}, {"clocks_event_reasons", 0x5}, {"temperature_c", 81}, {"slowdown_temperature_c", 87}}});
  CheckResult r{"gpu"};
  add_driver_view(r, {{"gpus", g}}, 2, GpuExpect{});
  ASSERT_EQ(r.count(Status::warning), 1) << r.findings.size();
  EXPECT_NE(r.most_severe()->message.find("GPU0 (unknown model, bus id unknown): 18446744073709551613 C, at or above"),
            std::string::npos)
      << r.most_severe()->message;
}
