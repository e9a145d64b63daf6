// The ibcounters check's judgement: growth since the last run, flaps, resets.
#include <gtest/gtest.h>

#include "config/config_file.h"
#include "healthcheck/checks/check_ibcounters.h"

using namespace gpudiag;

namespace {

IbCounterSettings defaults() {
  IbCounterSettings s;
  s.max_growth = default_ib_counter_growth();
  return s;
}

IbCounterFacts port_with(unsigned long long symbol_error, unsigned long long link_downed,
                         unsigned long long xmit_data = 1000) {
  IbCounterFacts f;
  f.class_present = true;
  IbPortCounters p;
  p.hca = "mlx5_0";
  p.port = 1;
  p.values = {{"link_downed", link_downed}, {"port_xmit_data", xmit_data}, {"symbol_error", symbol_error}};
  f.ports.push_back(p);
  return f;
}

nlohmann::json run_once(unsigned long long symbol_error, unsigned long long link_downed) {
  return evaluate_ibcounters(port_with(symbol_error, link_downed), nullptr, defaults()).state;
}

}  // namespace

TEST(EvaluateIbCounters, FirstReadIsNoBaselineWhereNothingIsKept) {
  IbCounterFacts f = port_with(500, 7);
  f.state_kept = false;
  auto out = evaluate_ibcounters(f, nullptr, defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_EQ(out.result.summary, "1 ports read; nothing kept to compare the next run with");
  EXPECT_EQ(out.result.findings.at(0).message, "mlx5_0 port 1: counters read, not kept");
}

TEST(EvaluateIbCounters, FirstRunRecordsABaseline) {
  auto out = evaluate_ibcounters(port_with(500, 7), nullptr, defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.summary.find("baseline recorded for 1 ports"), std::string::npos) << out.result.summary;
  // Only judged counters are kept; data counters change all the time.
  EXPECT_EQ(out.state["ports"]["mlx5_0:1"], nlohmann::json({{"link_downed", 7}, {"symbol_error", 500}}));
  EXPECT_EQ(out.result.metrics.size(), 3u);
  EXPECT_EQ(out.result.metrics[0].name, "gpudiag_ib_port_counter");
}

TEST(EvaluateIbCounters, GrowthWithinTheLimitIsOk) {
  auto out = evaluate_ibcounters(port_with(510, 1, 999999), run_once(500, 1), defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.summary.find("1 ports compared"), std::string::npos);
}

TEST(EvaluateIbCounters, GrowthBeyondTheLimitIsAWarningWithOldAndNew) {
  auto out = evaluate_ibcounters(port_with(511, 1), run_once(500, 1), defaults());
  EXPECT_EQ(out.result.status, Status::warning);
  const auto& f = out.result.findings[0];
  EXPECT_EQ(f.subject, "mlx5_0:1");
  EXPECT_NE(f.message.find("mlx5_0 port 1: symbol_error grew by 11 since the last run (500 -> 511), more than the 10"),
            std::string::npos)
      << f.message;
  EXPECT_NE(f.hint.find("ibcounters.max_growth.symbol_error"), std::string::npos);
  EXPECT_EQ(out.state["ports"]["mlx5_0:1"]["symbol_error"], 511);
}

TEST(EvaluateIbCounters, LinkDownedGrowthIsAFlapCriticalAboveTheLimit) {
  auto out = evaluate_ibcounters(port_with(0, 2), run_once(0, 1), defaults());
  EXPECT_EQ(out.result.status, Status::warning);
  EXPECT_NE(out.result.findings[0].message.find("flapped: the link went down 1 times since the last run (link_downed 1 -> 2)"),
            std::string::npos)
      << out.result.findings[0].message;
  auto s = defaults();
  s.flap_critical = 3;
  EXPECT_EQ(evaluate_ibcounters(port_with(0, 4), run_once(0, 1), s).result.status, Status::warning);
  EXPECT_EQ(evaluate_ibcounters(port_with(0, 5), run_once(0, 1), s).result.status, Status::critical);
}

TEST(EvaluateIbCounters, ACounterThatWentDownIsAResetNotedAndBaselinedAgain) {
  auto out = evaluate_ibcounters(port_with(3, 0), run_once(500, 9), defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.findings[0].message.find("baseline recorded again"), std::string::npos);
  EXPECT_EQ(out.state["ports"]["mlx5_0:1"]["symbol_error"], 3);
}

TEST(EvaluateIbCounters, GarbageStateIsTreatedAsNoPreviousRun) {
  for (const nlohmann::json& prev :
       {nlohmann::json("x"), nlohmann::json({{"ports", 5}}), nlohmann::json({{"ports", {{"mlx5_0:1", "x"}}}}),
        nlohmann::json({{"ports", {{"mlx5_0:1", {{"symbol_error", -4}, {"link_downed", "a"}}}}}})}) {
    auto out = evaluate_ibcounters(port_with(500, 1), prev, defaults());
    EXPECT_EQ(out.result.status, Status::ok) << prev.dump();
  }
}

TEST(EvaluateIbCounters, NoInfiniBandIsOk) {
  IbCounterFacts f;
  auto out = evaluate_ibcounters(f, nullptr, defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_EQ(out.result.summary, "no InfiniBand ports");
}

TEST(EvaluateIbCounters, PortWithoutCountersIsANote) {
  IbCounterFacts f;
  f.class_present = true;
  IbPortCounters p;
  p.hca = "mlx5_0";
  p.port = 1;
  p.error = "/sys/class/infiniband/mlx5_0/ports/1/counters: No such file or directory";
  f.ports.push_back(p);
  auto out = evaluate_ibcounters(f, nullptr, defaults());
  EXPECT_EQ(out.result.status, Status::ok);
  EXPECT_NE(out.result.findings[0].message.find("no error counters"), std::string::npos);
}

TEST(IbCounterConfig, LimitsAreStrictlyValidated) {
  auto ok = parse_config("ibcounters:\n  max_growth: {symbol_error: 100, link_downed: 2}\n  flap_critical: 5\n", "t.yaml");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->ibcounters.max_growth_for("symbol_error"), 100u);
  EXPECT_EQ(ok->ibcounters.max_growth_for("link_downed"), 2u);
  EXPECT_EQ(ok->ibcounters.max_growth_for("link_error_recovery"), 1u);  // untouched default
  EXPECT_EQ(ok->ibcounters.flap_critical, 5u);
  auto unknown = parse_config("ibcounters:\n  max_growth: {symbol_errors: 1}\n", "t.yaml");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown counter 'ibcounters.max_growth.symbol_errors' (known: symbol_error,"),
            std::string::npos)
      << unknown.error();
  for (const char* bad : {"ibcounters:\n  max_growth: {symbol_error: -1}\n", "ibcounters:\n  flap_critical: x\n",
                          "ibcounters:\n  max_growth: [1]\n", "ibcounters:\n  flaps: 1\n"})
    EXPECT_FALSE(parse_config(bad, "t.yaml")) << bad;
  // Defaults without a config.
  Config none;
  EXPECT_EQ(none.ibcounters.max_growth_for("symbol_error"), 10u);
}
