#include <gtest/gtest.h>

#include "healthcheck/drain_policy.h"

using namespace gpudiag;

namespace {

// Real `scontrol show node` output from Slurm 22.05 (abridged in the middle).
const char* kDrained = R"(NodeName=vm Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=1.18
   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=maintenance window [root@2026-11-21T08:19:26]
)";
const char* kIdle = R"(NodeName=vm Arch=x86_64 CoresPerSocket=1 
   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
)";

Report report(Status s) {
  Report r;
  r.node = "vm";
  CheckResult c;
  c.name = "ib";
  if (s != Status::ok) c.add({"mlx5_3:1", s, "mlx5_3 port 1 is DOWN (phys_state Polling)", "cable"});
  r.add(c);
  return r;
}

SlurmNodeState node(bool drain, const std::string& reason) {
  SlurmNodeState n;
  n.state = drain ? "IDLE+DRAIN" : "IDLE";
  n.drain = drain;
  n.reason = reason;
  return n;
}

}  // namespace

TEST(ScontrolParse, DrainedNodeWithReason) {
  auto n = parse_scontrol_node(kDrained, "vm");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->state, "IDLE+DRAIN");
  EXPECT_TRUE(n->drain);
  EXPECT_EQ(n->reason, "maintenance window");
}

TEST(ScontrolParse, IdleNodeHasNoReason) {
  auto n = parse_scontrol_node(kIdle, "vm");
  ASSERT_TRUE(n);
  EXPECT_FALSE(n->drain);
  EXPECT_EQ(n->reason, "");
}

TEST(ScontrolParse, GarbageIsAnErrorNamingTheNode) {
  auto n = parse_scontrol_node("Node vm not found", "vm");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().find("scontrol show node vm"), std::string::npos);
}

TEST(DrainPolicy, DrainsOnlyOnCritical) {
  auto d = decide_drain(report(Status::critical), node(false, ""), true, false, "gpudiag:");
  EXPECT_EQ(d.action, NodeAction::drain);
  EXPECT_EQ(d.reason, "gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling)");
  EXPECT_EQ(decide_drain(report(Status::warning), node(false, ""), true, false, "gpudiag:").action, NodeAction::none);
  EXPECT_EQ(decide_drain(report(Status::unknown), node(false, ""), true, false, "gpudiag:").action, NodeAction::none);
}

TEST(DrainPolicy, NeverOverwritesAnotherReason) {
  auto d = decide_drain(report(Status::critical), node(true, "maintenance"), true, false, "gpudiag:");
  EXPECT_EQ(d.action, NodeAction::none);
  EXPECT_NE(d.explanation.find("maintenance"), std::string::npos);
}

TEST(DrainPolicy, ResumesOnlyOurOwnDrain) {
  EXPECT_EQ(decide_drain(report(Status::ok), node(true, "gpudiag: old"), false, true, "gpudiag:").action,
            NodeAction::resume);
  EXPECT_EQ(decide_drain(report(Status::ok), node(true, "maintenance"), false, true, "gpudiag:").action,
            NodeAction::none);
  EXPECT_EQ(decide_drain(report(Status::ok), node(true, "NHC: gpudiag: x"), false, true, "gpudiag:").action,
            NodeAction::none);
  EXPECT_EQ(decide_drain(report(Status::warning), node(true, "gpudiag: old"), false, true, "gpudiag:").action,
            NodeAction::none);
  EXPECT_EQ(decide_drain(report(Status::ok), node(false, ""), false, true, "gpudiag:").action, NodeAction::none);
}

TEST(DrainPolicy, RedrainsOwnReasonWhenItChanged) {
  auto d = decide_drain(report(Status::critical), node(true, "gpudiag: something else"), true, true, "gpudiag:");
  EXPECT_EQ(d.action, NodeAction::drain);
  auto same = decide_drain(report(Status::critical), node(true, d.reason), true, true, "gpudiag:");
  EXPECT_EQ(same.action, NodeAction::none);
}

TEST(DrainReason, OneLineBoundedNoControlBytes) {
  Report r;
  CheckResult c;
  c.name = "ib";
  c.add({"x", Status::critical, std::string(400, 'a') + "\nNodeName=evil\x1b", ""});
  r.add(c);
  std::string reason = drain_reason(r, "gpudiag:");
  EXPECT_LE(reason.size(), kMaxDrainReason);
  EXPECT_EQ(reason.find('\n'), std::string::npos);
  EXPECT_EQ(reason.find('\x1b'), std::string::npos);
  EXPECT_EQ(reason.rfind("gpudiag: ", 0), 0u);
}
