#include <gtest/gtest.h>

#include "healthcheck/report/formats.h"

using namespace gpudiag;

namespace {

Report sample(Status worst) {
  Report r;
  r.node = "node01";
  CheckResult ib;
  ib.name = "ib";
  ib.add({"mlx5_0:1", Status::ok, "mlx5_0 port 1 ACTIVE", ""});
  if (worst != Status::ok) ib.add({"mlx5_3:1", worst, "mlx5_3 port 1 is DOWN (phys_state Polling)", "check the cable"});
  ib.summary = "s";
  r.add(ib);
  return r;
}

}  // namespace

TEST(Status, CombiningOrder) {
  EXPECT_EQ(worse(Status::ok, Status::warning), Status::warning);
  EXPECT_EQ(worse(Status::warning, Status::unknown), Status::unknown);
  EXPECT_EQ(worse(Status::unknown, Status::critical), Status::critical);
  EXPECT_EQ(worse(Status::critical, Status::unknown), Status::critical);
}

TEST(NhcFormat, SilentWhenNodeMayStay) {
  EXPECT_EQ(format_nhc(sample(Status::ok)), "");
  EXPECT_EQ(format_nhc(sample(Status::warning)), "");
}

TEST(NhcFormat, OneLineWithMostSevere) {
  Report r = sample(Status::critical);
  CheckResult acs;
  acs.name = "acs";
  acs.add({"0000:32:00.0", Status::unknown, "cannot read\nconfig", ""});
  r.add(acs);
  std::string line = format_nhc(r);
  EXPECT_EQ(line, "gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling) (+1 more)\n");
}

TEST(NhcFormat, ControlCharactersNeverReachTheReason) {
  Report r;
  r.node = "n";
  CheckResult c;
  c.name = "ib";
  c.add({"x", Status::critical, "bad\nline\x1b[31m", ""});
  r.add(c);
  std::string line = format_nhc(r);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_EQ(line.find('\x1b'), std::string::npos);
}

TEST(JsonFormat, FollowsTheContract) {
  auto j = report_to_json(sample(Status::critical));
  EXPECT_EQ(j["node"], "node01");
  EXPECT_EQ(j["status"], "critical");
  ASSERT_TRUE(j["duration_ms"].is_number());
  auto& c = j["checks"][0];
  EXPECT_EQ(c["name"], "ib");
  EXPECT_EQ(c["status"], "critical");
  EXPECT_TRUE(c["duration_ms"].is_number());
  EXPECT_FALSE(c["findings"][0].contains("hint"));  // hint is optional
  EXPECT_EQ(c["findings"][1]["subject"], "mlx5_3:1");
  EXPECT_EQ(c["findings"][1]["hint"], "check the cable");
}

TEST(PrometheusFormat, StatusAndDurations) {
  std::string text = format_prometheus(sample(Status::critical));
  EXPECT_NE(text.find("gpudiag_check_status{check=\"ib\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("gpudiag_check_duration_seconds{check=\"ib\"} "), std::string::npos);
  EXPECT_NE(text.find("gpudiag_check_findings{check=\"ib\",status=\"critical\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("gpudiag_status 2\n"), std::string::npos);
}

TEST(PrometheusFormat, DeviceMetricsAreGroupedByNameWithEscapedLabels) {
  Report r = sample(Status::ok);
  r.checks[0].metrics.push_back({"gpudiag_ib_port_rate_gbps", "Port rate.", {{"hca", "mlx5_0"}, {"port", "1"}}, 400});
  CheckResult gpu;
  gpu.name = "gpu";
  gpu.metrics.push_back({"gpudiag_ib_port_rate_gbps", "Port rate.", {{"hca", "odd\"\\\nname"}, {"port", "1"}}, 200});
  gpu.metrics.push_back({"gpudiag_last_run_timestamp_seconds", "When.", {}, 1700000000});
  r.add(gpu);
  std::string text = format_prometheus(r);
  EXPECT_NE(text.find("# HELP gpudiag_ib_port_rate_gbps Port rate.\n# TYPE gpudiag_ib_port_rate_gbps gauge\n"
                      "gpudiag_ib_port_rate_gbps{hca=\"mlx5_0\",port=\"1\"} 400\n"
                      "gpudiag_ib_port_rate_gbps{hca=\"odd\\\"\\\\\\nname\",port=\"1\"} 200\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpudiag_last_run_timestamp_seconds 1700000000\n"), std::string::npos) << text;
}

TEST(HumanFormat, ProblemsAndFixesButNotOkUnlessVerbose) {
  std::string text = format_human(sample(Status::critical), false, false);
  EXPECT_NE(text.find("CRITICAL"), std::string::npos);
  EXPECT_NE(text.find("fix: check the cable"), std::string::npos);
  EXPECT_EQ(text.find("mlx5_0 port 1 ACTIVE"), std::string::npos);
  EXPECT_NE(format_human(sample(Status::critical), true, false).find("mlx5_0 port 1 ACTIVE"), std::string::npos);
  EXPECT_EQ(text.find('\033'), std::string::npos);
}

// Check names differ in length ("ibcounters"): statuses line up in one column, a
// finding's status under its check's, and "fix:" under the text it explains.
TEST(HumanFormat, ColumnsLineUp) {
  Report r = sample(Status::critical);
  r.node = "n";
  CheckResult counters;
  counters.name = "ibcounters";
  counters.summary = "t";
  r.add(counters);
  const std::string text = format_human(r, false, false);
  EXPECT_NE(text.find("\n  ib         CRITICAL s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n             CRITICAL mlx5_3 port 1 is DOWN (phys_state Polling)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n                      fix: check the cable\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  ibcounters OK       t\n"), std::string::npos) << text;
}

// A finding may quote garbage read from sysfs or the probe; --format json must still
// print the whole report (nlohmann throws on bytes that are not UTF-8 by default).
TEST(JsonFormat, BytesThatAreNotUtf8DoNotLoseTheReport) {
  Report r = sample(Status::critical);
  CheckResult gpu;
  gpu.name = "gpu";
  gpu.add({"0000:3b:00.0", Status::warning, "model is '\xff\xfeH100'", ""});
  gpu.details = nlohmann::json{{"model", "\xc3"}};
  r.add(gpu);
  std::string text;
  ASSERT_NO_THROW(text = format_json(r));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["checks"].size(), 2u);
  EXPECT_EQ(text.back(), '\n');
}
