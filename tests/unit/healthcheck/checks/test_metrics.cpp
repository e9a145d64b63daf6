// The prometheus text of a fixture run: per-device values from the checks that read
// them, and when the run ended.
#include <gtest/gtest.h>

#include "healthcheck/checks/check_runner.h"
#include "healthcheck/report/formats.h"

using namespace gpudiag;

namespace {

std::string prometheus_for(const std::string& variant, std::vector<std::string> checks) {
  RootedFs fs(std::string(GPUDIAG_FIXTURES_DIR) + "/" + variant);
  Config cfg;
  CheckContext ctx{fs, cfg};
  RunOptions opts;
  opts.checks = std::move(checks);
  return format_prometheus(run_checks(ctx, opts, "gpu-node-01").report);
}

}  // namespace

TEST(FixtureMetrics, IbPortsAndCounters) {
  const std::string text = prometheus_for("rate-200", {"ib", "ibcounters"});
  for (const char* want : {
           "# TYPE gpudiag_ib_port_rate_gbps gauge\n",
           "gpudiag_ib_port_rate_gbps{hca=\"mlx5_0\",port=\"1\"} 400\n",
           "gpudiag_ib_port_rate_gbps{hca=\"mlx5_5\",port=\"1\"} 200\n",
           "gpudiag_ib_port_rate_gbps{hca=\"mlx5_bond_0\",port=\"1\"} 100\n",
           "gpudiag_ib_port_state{hca=\"mlx5_0\",port=\"1\"} 4\n",
           "gpudiag_ib_port_phys_state{hca=\"mlx5_0\",port=\"1\"} 5\n",
           "gpudiag_ib_port_counter{hca=\"mlx5_0\",port=\"1\",counter=\"symbol_error\"} 0\n",
           "gpudiag_ib_port_counter{hca=\"mlx5_0\",port=\"1\",counter=\"link_downed\"} 1\n",
           "gpudiag_ib_port_counter{hca=\"mlx5_0\",port=\"1\",counter=\"port_xmit_data\"} 21004242\n",
           "gpudiag_ib_port_hw_counter{hca=\"mlx5_7\",port=\"1\",counter=\"out_of_sequence\"} 0\n",
           "# TYPE gpudiag_last_run_timestamp_seconds gauge\ngpudiag_last_run_timestamp_seconds 1",
       })
    EXPECT_NE(text.find(want), std::string::npos) << want << "\n" << text;
  // One HELP/TYPE block per name.
  EXPECT_EQ(text.find("# TYPE gpudiag_ib_port_counter"), text.rfind("# TYPE gpudiag_ib_port_counter"));
}

TEST(FixtureMetrics, XidCountsPerGpu) {
  const std::string text = prometheus_for("xid-79", {"xid"});
  EXPECT_NE(text.find("gpudiag_xid_events{gpu=\"0000:94:00\",xid=\"79\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpudiag_xid_events{gpu=\"0000:13:00\",xid=\"13\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("gpudiag_check_status{check=\"xid\"} 2\n"), std::string::npos) << text;
}
