#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "healthcheck/checks/check_runner.h"

using namespace gpudiag;

namespace {

CheckResult ok_check(const CheckContext&) {
  CheckResult r;
  r.summary = "fine";
  return r;
}

// Static: after a timeout the abandoned worker thread still holds the context.
const CheckContext& ctx() {
  static const RootedFs fs("/nonexistent");
  static const Config cfg;
  static const CheckContext c{fs, cfg, false};
  return c;
}

RunOptions checks(std::vector<std::string> names, double timeout_s = 50) {
  RunOptions o;
  o.checks = std::move(names);
  o.timeout_s = timeout_s;
  return o;
}

}  // namespace

TEST(Runner, RunsInOrderAndTimesEachCheck) {
  auto out = run_checks(ctx(), checks({"a", "b"}), "n", {{"a", ok_check}, {"b", ok_check}});
  EXPECT_FALSE(out.abandoned_thread);
  ASSERT_EQ(out.report.checks.size(), 2u);
  EXPECT_EQ(out.report.checks[0].name, "a");
  EXPECT_EQ(out.report.status, Status::ok);
}

TEST(Runner, HungCheckIsCriticalAndLaterChecksUnknown) {
  CheckTable table = {{"a", ok_check},
                      {"hang",
                       [](const CheckContext&) {
                         std::this_thread::sleep_for(std::chrono::seconds(3));
                         return CheckResult{};
                       }},
                      {"b", ok_check}};
  auto t0 = std::chrono::steady_clock::now();
  auto out = run_checks(ctx(), checks({"a", "hang", "b"}, 0.3), "n", table);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_TRUE(out.abandoned_thread);
  ASSERT_EQ(out.report.checks.size(), 3u);
  EXPECT_EQ(out.report.checks[1].status, Status::critical);
  EXPECT_NE(out.report.checks[1].findings[0].message.find("timed out after 0.3 s"), std::string::npos);
  EXPECT_EQ(out.report.checks[2].status, Status::unknown);
  EXPECT_EQ(out.report.status, Status::critical);
}

TEST(Runner, ExceptionInCheckIsUnknownNotACrash) {
  auto out = run_checks(ctx(), checks({"boom"}), "n", {{"boom", [](const CheckContext&) -> CheckResult {
                                         throw std::runtime_error("kaboom");
                                       }}});
  EXPECT_EQ(out.report.status, Status::unknown);
}

TEST(Runner, UnbuiltCheckIsUnknown) {
  EXPECT_EQ(run_checks(ctx(), checks({"nccl"}), "n").report.status, Status::unknown);
}

// One list of checks (config/check_names.h): the checker has a function for exactly
// those names, and --quick is the ones that need no GPU.
TEST(CheckNames, TheTableOfFunctionsNamesExactlyTheRegistry) {
  std::vector<std::string> in_table;
  for (const auto& [name, fn] : gpudiag::builtin_checks()) in_table.push_back(name);
  std::vector<std::string> registry = gpudiag::known_checks();
  std::sort(registry.begin(), registry.end());
  EXPECT_EQ(in_table, registry);  // std::map: sorted
  EXPECT_EQ(gpudiag::quick_checks(), (std::vector<std::string>{"ib", "acs", "iommu", "gpu", "xid", "ibcounters", "pcie", "gdr"}));
  EXPECT_EQ(gpudiag::known_checks_text(), "ib,acs,iommu,gpu,p2p,nccl,xid,ibcounters,pcie,gdr");
}
