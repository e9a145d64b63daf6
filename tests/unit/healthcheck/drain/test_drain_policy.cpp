#include <gtest/gtest.h>

#include "healthcheck/drain/drain_policy.h"

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
  n.base = "IDLE";
  if (drain) n.flags = {"DRAIN"};
  n.drain = drain;
  n.reason = reason;
  return n;
}

// Real 22.05 output (`scontrol show node vm` on the test Slurm), with State= and the
// reason line swapped in.
std::string real_node(const std::string& state, const std::string& reason_line = "",
                      const std::string& os = "Linux 6.18.44-fc-v769 #1 SMP PREEMPT_DYNAMIC @0 ",
                      const std::string& tail = "") {
  return "NodeName=vm Arch=x86_64 CoresPerSocket=1 \n"
         "   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=2.45\n"
         "   AvailableFeatures=(null)\n"
         "   ActiveFeatures=(null)\n"
         "   Gres=(null)\n"
         "   NodeAddr=127.0.0.1 NodeHostName=vm Version=22.05.8\n"
         "   OS=" + os + "\n"
         "   RealMemory=1 AllocMem=0 FreeMem=20745 Sockets=16 Boards=1\n"
         "   State=" + state + " ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
         "   Partitions=debug \n"
         "   BootTime=2026-11-22T21:03:39 SlurmdStartTime=2026-11-22T21:10:58\n"
         "   LastBusyTime=2026-11-22T21:10:58\n"
         "   CfgTRES=cpu=16,mem=1M,billing=16\n"
         "   AllocTRES=\n"
         "   CapWatts=n/a\n"
         "   CurrentWatts=0 AveWatts=0\n"
         "   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s\n" +
         (reason_line.empty() ? "" : "   Reason=" + reason_line + "\n") + tail + "\n";
}

SlurmNodeState parsed(const std::string& text) {
  auto n = parse_scontrol_node(text, "vm");
  EXPECT_TRUE(n) << n.error();
  return n ? *n : SlurmNodeState{};
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

// ---- Whose node it is: the state strings scontrol 22.05 prints (node_state_string_complete,
// checked with libslurm on the test machine), and the sinfo-style suffixes.

TEST(ScontrolParse, SplitsStateIntoBaseAndFlags) {
  auto n = parsed(real_node("DOWN+DRAIN+NOT_RESPONDING", "Not responding [slurm@2026-11-22T21:10:58]"));
  EXPECT_EQ(n.base, "DOWN");
  EXPECT_EQ(n.flags, (std::vector<std::string>{"DRAIN", "NOT_RESPONDING"}));
  EXPECT_TRUE(n.drain);
  EXPECT_EQ(n.reason, "Not responding");
  auto star = parsed(real_node("DOWN*"));
  EXPECT_EQ(star.base, "DOWN");
  EXPECT_TRUE(star.has("NOT_RESPONDING"));
}

TEST(NodeStanding, InServiceStates) {
  for (const char* state : {"IDLE", "ALLOCATED", "MIXED", "IDLE+COMPLETING", "MIXED+COMPLETING", "IDLE+RESERVED",
                            "MIXED+PLANNED", "IDLE+CLOUD", "IDLE+DYNAMIC_NORM"}) {
    auto n = parsed(real_node(state));
    EXPECT_EQ(node_standing(n, "gpudiag:").kind, NodeStanding::in_service) << state;
    EXPECT_EQ(decide_drain(report(Status::critical), n, true, true, "gpudiag:").action, NodeAction::drain) << state;
  }
}

TEST(NodeStanding, AdminAndSlurmStatesAreLeftAlone) {
  const std::pair<const char*, const char*> cases[] = {
      {"DOWN", "admin: replacing PSU [root@2026-11-22T21:10:58]"},
      {"DOWN+NOT_RESPONDING", "Not responding [slurm@2026-11-22T21:10:58]"},
      {"DOWN*", "Not responding [slurm@2026-11-22T21:10:58]"},
      {"IDLE+FAIL", "admin fail [root@2026-11-22T21:10:59]"},
      {"DOWN+FAIL", "admin fail [root@2026-11-22T21:10:59]"},
      {"MIXED+FAIL", "failing [root@2026-11-22T21:10:59]"},
      {"IDLE+DRAIN", "admin drain [root@2026-11-22T21:11:00]"},
      {"MIXED+DRAIN", "Kill task failed [root@2026-11-22T21:11:00]"},
      {"DOWN+DRAIN", "admin drain [root@2026-11-22T21:11:00]"},
      {"MIXED+MAINTENANCE", ""},
      {"MIXED+MAINT", ""},
      {"IDLE+MAINTENANCE", ""},
      {"IDLE+REBOOT_REQUESTED", "kernel update [root@2026-11-22T21:11:00]"},
      {"MIXED+DRAIN+REBOOT_REQUESTED", "kernel update [root@2026-11-22T21:11:00]"},
      {"DOWN+REBOOT_ISSUED", "reboot issued [root@2026-11-22T21:11:00]"},
      {"IDLE+POWERED_DOWN", ""},
      {"IDLE+POWERING_DOWN", ""},
      {"IDLE+POWERING_UP", ""},
      {"IDLE+POWER_DOWN", ""},
      {"IDLE+INVALID_REG", "gres/gpu count reported lower than configured (0 < 4)"},
      {"FUTURE", ""},
      {"UNKNOWN", ""},
      {"IDLE+SOMETHING_NEW", ""},
  };
  for (const auto& [state, reason] : cases) {
    auto n = parsed(real_node(state, reason));
    auto s = node_standing(n, "gpudiag:");
    EXPECT_EQ(s.kind, NodeStanding::not_ours) << state;
    auto drain = decide_drain(report(Status::critical), n, true, true, "gpudiag:");
    EXPECT_EQ(drain.action, NodeAction::none) << state;
    EXPECT_NE(drain.explanation.find("left alone"), std::string::npos) << drain.explanation;
    EXPECT_EQ(decide_drain(report(Status::ok), n, true, true, "gpudiag:").action, NodeAction::none) << state;
  }
  // The admin's own reason is named, so whoever reads the log knows why nothing happened.
  auto psu = decide_drain(report(Status::critical),
                          parsed(real_node("DOWN", "admin: replacing PSU [root@2026-11-22T21:10:58]")), true, false,
                          "gpudiag:");
  EXPECT_NE(psu.explanation.find("it is DOWN with reason 'admin: replacing PSU'"), std::string::npos)
      << psu.explanation;
}

TEST(NodeStanding, OurDrainAloneIsOurs) {
  for (const char* state : {"IDLE+DRAIN", "MIXED+DRAIN", "ALLOCATED+DRAIN", "IDLE+DRAIN+COMPLETING"}) {
    auto n = parsed(real_node(state, "gpudiag: mlx5_3 port 1 is DOWN [root@2026-11-22T21:11:00]"));
    EXPECT_EQ(node_standing(n, "gpudiag:").kind, NodeStanding::drained_by_us) << state;
    EXPECT_EQ(decide_drain(report(Status::ok), n, false, true, "gpudiag:").action, NodeAction::resume) << state;
  }
  // Our reason, but Slurm or an admin has since taken the node further out: theirs now.
  for (const char* state : {"DOWN+DRAIN", "DOWN+DRAIN+NOT_RESPONDING", "IDLE+DRAIN+FAIL", "IDLE+DRAIN+MAINTENANCE",
                            "IDLE+DRAIN+REBOOT_REQUESTED", "IDLE+DRAIN+POWERED_DOWN"}) {
    auto n = parsed(real_node(state, "gpudiag: mlx5_3 port 1 is DOWN [root@2026-11-22T21:11:00]"));
    EXPECT_EQ(node_standing(n, "gpudiag:").kind, NodeStanding::not_ours) << state;
    EXPECT_EQ(decide_drain(report(Status::ok), n, false, true, "gpudiag:").action, NodeAction::none) << state;
  }
}

// ---- Fields are taken from where scontrol puts them, never searched for (issue 21.9).

TEST(ScontrolParse, ReasonTextInAnEarlierFieldDoesNotCount) {
  // The kernel's version string is printed before Reason=; here it imitates one.
  auto n = parsed(real_node("IDLE+DRAIN", "maintenance [root@2026-11-22T21:11:00]",
                            "Linux 6.1 #1 SMP Reason=gpudiag: fake State=IDLE "));
  EXPECT_EQ(n.reason, "maintenance");
  EXPECT_EQ(n.state, "IDLE+DRAIN");
  EXPECT_EQ(decide_drain(report(Status::ok), n, false, true, "gpudiag:").action, NodeAction::none);
  // Comment and Extra (one line each, as Slurm prints them) hold free text too.
  auto c = parsed(real_node("IDLE+DRAIN", "", "Linux 6.1 ",
                            "   Comment=see Reason=gpudiag: fake\n   Extra=x Reason=gpudiag: fake2\n"));
  EXPECT_EQ(c.reason, "");
  EXPECT_EQ(node_standing(c, "gpudiag:").kind, NodeStanding::not_ours);
}

TEST(ScontrolParse, MultiLineReasonKeepsItsFirstLine) {
  // Real: `scontrol update ... Reason=$'line1\nline2 Reason=x'` on 22.05.
  auto n = parsed(real_node("IDLE+DRAIN", "line1 [root@2026-11-22T21:12:06]\n          line2 Reason=x"));
  EXPECT_EQ(n.reason, "line1");
}

TEST(ScontrolParse, ImitatedFieldLinesAreRefused) {
  // Real 22.05 output after `scontrol update NodeName=vm Comment=$'a\n   Reason=gpudiag: nl\n   State=IDLE'`:
  // Slurm prints the comment's line breaks as they are, so its lines look like fields.
  auto text = real_node("IDLE+DRAIN", "admin drain [root@2026-11-22T21:11:00]", "Linux 6.1 ",
                        "   Comment=a\n   Reason=gpudiag: nl\n   State=IDLE\n");
  auto n = parse_scontrol_node(text, "vm");
  ASSERT_FALSE(n);
  EXPECT_NE(n.error().find("scontrol show node vm: Reason= appears more than once"), std::string::npos) << n.error();
  EXPECT_NE(n.error().find("left as it is"), std::string::npos);
}

TEST(ScontrolParse, OutputMustStartWithTheNode) {
  EXPECT_FALSE(parse_scontrol_node("error: x\nNodeName=vm State=IDLE\n", "vm"));
  EXPECT_FALSE(parse_scontrol_node("NodeName=vm Arch=x86_64\n   CPUAlloc=0\n", "vm"));  // no State=
}

// Slurm 24.11 keeps a drain's reason after State=RESUME: an idle node with an old reason
// is in service, and gpudiag may drain it (and then resume only its own drain).
TEST(NodeStanding, AStaleReasonOnAnIdleNodeDoesNotHoldIt) {
  SlurmNodeState node;
  node.state = "IDLE";
  node.base = "IDLE";
  node.reason = "admin: firmware update";
  EXPECT_EQ(node_standing(node, "gpudiag:").kind, NodeStanding::in_service);
}
