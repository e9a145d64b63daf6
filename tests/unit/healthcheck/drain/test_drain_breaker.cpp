// The drain breaker: parsing every node from one scontrol call, the pure rule at each
// boundary, and the count-drain-recount-undo sequence against a scripted Slurm.
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "config/config_file.h"
#include "healthcheck/drain/drain_breaker.h"
#include "healthcheck/drain/slurm_action.h"
#include "healthcheck/report/formats.h"

using namespace gpudiag;
namespace breaker_test {}
using namespace breaker_test;

namespace breaker_test {

// `scontrol show node` without a name, Slurm 22.05 layout (abridged in the middle):
// one record per node, a blank line after each.
const char* kThreeNodes = R"(NodeName=n1 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.42
   NodeAddr=n1 NodeHostName=n1 Version=22.05.8
   OS=Linux 6.1.0 #1 SMP Reason=gpudiag: kernel text 
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug,gpu 
   BootTime=2026-11-22T21:03:39 SlurmdStartTime=2026-11-22T21:12:05
   Reason=gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling) [root@2026-11-22T21:11:00]
   Comment=see NodeName=n9 State=IDLE+DRAIN

NodeName=n2 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=0.42
   State=MIXED ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug,gpu 

NodeName=n3 Arch=x86_64 CoresPerSocket=1 
   State=DOWN+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   Reason=admin: replacing PSU [root@2026-11-22T21:11:00]

)";

// Real output of the multi-node test cluster (22.05): n1 drained by gpudiag, n3 DOWN by
// an admin, n2 in service with a comment.
const char* kRealEveryNode = R"(NodeName=n1 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=14.53
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=n1 NodeHostName=n1 Version=22.05.8
   OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=1 AllocMem=0 FreeMem=5501 Sockets=16 Boards=1
   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   BootTime=2026-11-26T05:38:05 SlurmdStartTime=2026-11-26T06:18:17
   LastBusyTime=2026-11-26T06:18:17
   CfgTRES=cpu=16,mem=1M,billing=16
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling) [root@2026-11-26T06:18:17]

NodeName=n2 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=14.53
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=n2 NodeHostName=n2 Version=22.05.8
   OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=1 AllocMem=0 FreeMem=5501 Sockets=16 Boards=1
   State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   BootTime=2026-11-26T05:38:05 SlurmdStartTime=2026-11-26T06:18:17
   LastBusyTime=2026-11-26T06:18:17
   CfgTRES=cpu=16,mem=1M,billing=16
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Comment=rack 7

NodeName=n3 Arch=x86_64 CoresPerSocket=1 
   CPUAlloc=0 CPUEfctv=16 CPUTot=16 CPULoad=14.53
   AvailableFeatures=(null)
   ActiveFeatures=(null)
   Gres=(null)
   NodeAddr=n3 NodeHostName=n3 Version=22.05.8
   OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0 
   RealMemory=1 AllocMem=0 FreeMem=5501 Sockets=16 Boards=1
   State=DOWN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=debug 
   BootTime=2026-11-26T05:38:05 SlurmdStartTime=2026-11-26T06:18:17
   LastBusyTime=2026-11-26T06:18:17
   CfgTRES=cpu=16,mem=1M,billing=16
   AllocTRES=
   CapWatts=n/a
   CurrentWatts=0 AveWatts=0
   ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s
   Reason=admin: replacing PSU [root@2026-11-26T06:18:17]

)";

SlurmNodeRecord rec(const std::string& name, const std::string& state, const std::string& reason,
                    std::vector<std::string> partitions = {"p"}) {
  SlurmNodeRecord r;
  r.name = name;
  r.state.state = state;
  r.state.base = state.substr(0, state.find('+'));
  if (state.find("+DRAIN") != std::string::npos) {
    r.state.flags = {"DRAIN"};
    r.state.drain = true;
  }
  r.state.reason = reason;
  r.partitions = std::move(partitions);
  return r;
}

// A cluster of `n` idle nodes n1..nN in partition p, the first `drained` of them
// drained by gpudiag.
std::vector<SlurmNodeRecord> cluster(int n, int drained) {
  std::vector<SlurmNodeRecord> out;
  for (int i = 1; i <= n; ++i)
    out.push_back(i <= drained ? rec("n" + std::to_string(i), "IDLE+DRAIN", "gpudiag: x") : rec("n" + std::to_string(i), "IDLE", ""));
  return out;
}

DrainSettings caps(std::optional<int> nodes, std::optional<int> share) {
  DrainSettings s;
  s.max_nodes = nodes;
  s.max_share_pct = share;
  return s;
}

BreakerScope partition(int size, int drained) {
  BreakerScope s;
  s.partition = "p";
  s.size = size;
  for (int i = 0; i < drained; ++i) s.drained.push_back("d" + std::to_string(i));
  return s;
}

}  // namespace breaker_test

TEST(ScontrolNodes, EveryRecordFieldByField) {
  auto all = parse_scontrol_nodes(kThreeNodes);
  ASSERT_TRUE(all) << all.error();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "n1");
  EXPECT_TRUE((*all)[0].state.drain);
  // The kernel text in OS= and the comment decide nothing.
  EXPECT_EQ((*all)[0].state.reason, "gpudiag: mlx5_3 port 1 is DOWN (phys_state Polling)");
  EXPECT_EQ((*all)[0].partitions, (std::vector<std::string>{"debug", "gpu"}));
  EXPECT_EQ((*all)[1].state.base, "MIXED");
  EXPECT_EQ((*all)[1].state.reason, "");
  EXPECT_EQ((*all)[2].partitions, (std::vector<std::string>{"debug"}));
  EXPECT_EQ((*all)[2].state.base, "DOWN");
}

TEST(ScontrolNodes, RealOutputOfEveryNode) {
  auto all = parse_scontrol_nodes(kRealEveryNode);
  ASSERT_TRUE(all) << all.error();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].name, "n3");
  EXPECT_EQ((*all)[2].state.reason, "admin: replacing PSU");
  auto c = count_drains(*all, "n2", "gpudiag:");
  EXPECT_EQ(c.cluster.drained, (std::vector<std::string>{"n1"}));
  ASSERT_EQ(c.partitions.size(), 1u);
  EXPECT_EQ(c.partitions[0].partition, "debug");
  EXPECT_EQ(c.partitions[0].size, 3);
  EXPECT_FALSE(breaker_rule(c, caps(1, std::nullopt)).allow);
  EXPECT_TRUE(breaker_rule(c, caps(2, std::nullopt)).allow);
}

TEST(ScontrolNodes, ANodeNamedTwiceIsRefused) {
  // A comment with a line break that starts a record of its own, naming a real node.
  std::string text = std::string(kThreeNodes) + "NodeName=n2 Arch=x86_64\n   State=IDLE+DRAIN\n   Reason=gpudiag: x\n";
  auto all = parse_scontrol_nodes(text);
  ASSERT_FALSE(all);
  EXPECT_NE(all.error().find("node n2 appears more than once"), std::string::npos) << all.error();
}

TEST(ScontrolNodes, ARepeatedFieldInOneRecordIsRefused) {
  auto all = parse_scontrol_nodes("NodeName=n1\n   State=IDLE\n   Comment=a\n   State=IDLE+DRAIN\n");
  ASSERT_FALSE(all);
  EXPECT_NE(all.error().find("node n1: State= appears more than once"), std::string::npos) << all.error();
}

TEST(ScontrolNodes, NotNodeOutputIsRefused) {
  EXPECT_FALSE(parse_scontrol_nodes(""));
  EXPECT_FALSE(parse_scontrol_nodes("No nodes in the system\n"));
  EXPECT_FALSE(parse_scontrol_nodes("NodeName=n1 Arch=x86_64\n"));  // no State=
}

TEST(BreakerCount, OnlyDrainsWithOurPrefixCountAndNeverThisNode) {
  std::vector<SlurmNodeRecord> all = {
      rec("n1", "IDLE+DRAIN", "gpudiag: port down"),       // ours
      rec("n2", "ALLOCATED+DRAIN", "gpudiag: port down"),  // draining: ours
      rec("n3", "DOWN+DRAIN", "gpudiag: port down"),       // ours, then Slurm set it DOWN: still counts
      rec("n4", "IDLE+DRAIN", "admin: firmware"),          // an admin's: not counted
      rec("n5", "IDLE", "gpudiag: stale reason"),          // resumed (24.11 keeps the reason): not counted
      rec("n6", "DOWN", "gpudiag: x"),                     // no DRAIN flag: not counted
      rec("self", "IDLE+DRAIN", "gpudiag: x"),             // this node: never counted
  };
  auto c = count_drains(all, "self", "gpudiag:");
  EXPECT_EQ(c.cluster.size, 7);
  EXPECT_EQ(c.cluster.drained, (std::vector<std::string>{"n1", "n2", "n3"}));
}

TEST(BreakerCount, PartitionsAreThoseOfThisNode) {
  std::vector<SlurmNodeRecord> all = {
      rec("a", "IDLE+DRAIN", "gpudiag: x", {"gpu", "all"}), rec("b", "IDLE", "", {"gpu", "all"}),
      rec("c", "IDLE+DRAIN", "gpudiag: x", {"cpu", "all"}), rec("d", "IDLE", "", {"cpu", "all"}),
      rec("self", "IDLE", "", {"gpu", "all", "gpu"}),  // a name twice counts once
      rec("e", "IDLE", "", {}),                        // in no partition: the cluster only
  };
  auto c = count_drains(all, "self", "gpudiag:");
  EXPECT_EQ(c.cluster.size, 6);
  EXPECT_EQ(c.cluster.drained.size(), 2u);
  ASSERT_EQ(c.partitions.size(), 2u);
  EXPECT_EQ(c.partitions[0].partition, "all");
  EXPECT_EQ(c.partitions[0].size, 5);
  EXPECT_EQ(c.partitions[0].drained, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(c.partitions[1].partition, "gpu");
  EXPECT_EQ(c.partitions[1].size, 3);
  EXPECT_EQ(c.partitions[1].drained, (std::vector<std::string>{"a"}));
}

TEST(BreakerRule, ShareRoundsUpAndNeverBelowOne) {
  auto s = caps(std::nullopt, 10);
  EXPECT_EQ(scope_limit(partition(1, 0), s), 1);
  EXPECT_EQ(scope_limit(partition(8, 0), s), 1);
  EXPECT_EQ(scope_limit(partition(10, 0), s), 1);
  EXPECT_EQ(scope_limit(partition(11, 0), s), 2);
  EXPECT_EQ(scope_limit(partition(4000, 0), s), 400);
  EXPECT_EQ(scope_limit(partition(4001, 0), s), 401);
  EXPECT_EQ(scope_limit(partition(8, 0), caps(std::nullopt, 100)), 8);
  EXPECT_EQ(scope_limit(partition(8, 0), caps(std::nullopt, 25)), 2);
  EXPECT_EQ(scope_limit(partition(8, 0), caps(std::nullopt, 1)), 1);
  EXPECT_EQ(scope_limit(partition(8, 0), caps(std::nullopt, std::nullopt)), std::nullopt);
  BreakerScope whole;  // the cluster: max_nodes, whatever its size
  whole.size = 4000;
  EXPECT_EQ(scope_limit(whole, caps(16, 10)), 16);
  EXPECT_EQ(scope_limit(whole, caps(std::nullopt, 10)), std::nullopt);
}

TEST(BreakerRule, MaxNodesAtEachBoundary) {
  for (int drained = 0; drained <= 4; ++drained) {
    auto c = count_drains(cluster(100, drained), "n100", "gpudiag:");
    auto v = breaker_rule(c, caps(3, std::nullopt));
    EXPECT_EQ(v.allow, drained + 1 <= 3) << drained;
    if (!v.allow) {
      EXPECT_EQ(v.cap, "drain.max_nodes");
      EXPECT_EQ(v.count, drained);
      EXPECT_EQ(v.limit, 3);
      EXPECT_EQ(v.drained.size(), static_cast<std::size_t>(drained));
    }
  }
}

TEST(BreakerRule, MaxShareAtEachBoundary) {
  // 20 nodes, 10 %: two may be drained by gpudiag at once.
  for (int drained = 0; drained <= 3; ++drained) {
    auto c = count_drains(cluster(20, drained), "n20", "gpudiag:");
    auto v = breaker_rule(c, caps(std::nullopt, 10));
    EXPECT_EQ(v.allow, drained + 1 <= 2) << drained;
    if (!v.allow) {
      EXPECT_EQ(v.cap, "drain.max_share (10%) of partition p (20 nodes)");
      EXPECT_EQ(v.limit, 2);
      EXPECT_EQ(v.count, drained);
    }
  }
}

TEST(BreakerRule, ASingleSickNodeAlwaysPasses) {
  for (int n : {1, 2, 8, 4000})
    EXPECT_TRUE(breaker_rule(count_drains(cluster(n, 0), "n1", "gpudiag:"), DrainSettings{}).allow) << n;
  EXPECT_TRUE(breaker_rule(count_drains(cluster(1, 1), "n1", "gpudiag:"), caps(1, 1)).allow);  // itself is not counted
}

TEST(BreakerRule, OffMeansNoCap) {
  EXPECT_TRUE(breaker_rule(count_drains(cluster(10, 9), "n10", "gpudiag:"), caps(std::nullopt, std::nullopt)).allow);
  EXPECT_FALSE(breaker_rule(count_drains(cluster(10, 9), "n10", "gpudiag:"), caps(std::nullopt, 50)).allow);
  EXPECT_FALSE(breaker_rule(count_drains(cluster(10, 9), "n10", "gpudiag:"), caps(5, std::nullopt)).allow);
}

TEST(BreakerRule, TheTightestScopeBinds) {
  // A small gpu partition inside a large all partition: the gpu partition's share binds.
  std::vector<SlurmNodeRecord> all;
  for (int i = 0; i < 100; ++i) all.push_back(rec("c" + std::to_string(i), "IDLE", "", {"all"}));
  all.push_back(rec("g1", "IDLE+DRAIN", "gpudiag: x", {"all", "gpu"}));
  all.push_back(rec("g2", "IDLE", "", {"all", "gpu"}));
  all.push_back(rec("g3", "IDLE", "", {"all", "gpu"}));
  auto v = breaker_rule(count_drains(all, "g2", "gpudiag:"), caps(16, 10));
  EXPECT_FALSE(v.allow);
  EXPECT_EQ(v.cap, "drain.max_share (10%) of partition gpu (3 nodes)");
  EXPECT_EQ(v.drained, (std::vector<std::string>{"g1"}));
  // max_nodes is checked first and named when both bind.
  v = breaker_rule(count_drains(all, "g2", "gpudiag:"), caps(1, 10));
  EXPECT_EQ(v.cap, "drain.max_nodes");
}

TEST(BreakerRule, RetrySlotsFollowNamesUpToTheLimit) {
  BreakerVerdict over;
  over.allow = false;
  over.limit = 1;
  over.drained = {"n1", "n3"};  // seen by n2, which drained too
  EXPECT_EQ(retry_slot(over, "n2"), 0);
  over.drained = {"n2", "n3"};
  EXPECT_EQ(retry_slot(over, "n1"), 1);
  over.limit = 2;
  over.drained = {"n1", "n3"};
  EXPECT_EQ(retry_slot(over, "n2"), 2);
  EXPECT_EQ(retry_slot(over, "n4"), 0);
  BreakerVerdict fine;
  EXPECT_EQ(retry_slot(fine, "n1"), 0);
}

TEST(BreakerRule, HeldBackTextNamesCapCountAndRelease) {
  auto v = breaker_rule(count_drains(cluster(10, 7), "n10", "gpudiag:"), caps(7, std::nullopt));
  auto t = held_back_text("n10", v, "gpudiag:");
  EXPECT_NE(t.find("7 nodes drained by gpudiag (n1, n2, n3, n4, n5 +2 more) reach drain.max_nodes = 7"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("gpudiag-health --drain --force on n10"), std::string::npos) << t;
  EXPECT_NE(t.find("gpudiag-health --resume"), std::string::npos) << t;
  EXPECT_EQ(t.find('\n'), std::string::npos);
}

// -- the sequence, against a scripted Slurm ------------------------------------------

namespace breaker_test {

// show_all answers from `tables` in order (the last one repeats), or fails when the
// next entry is empty; drain/undrain are recorded and change the current table.
class ScriptedSlurm : public SlurmPort {
 public:
  std::deque<std::optional<std::vector<SlurmNodeRecord>>> tables;
  std::vector<std::string> calls, logged;
  std::vector<double> slept;
  bool fail_undrain = false;

  Result<SlurmNodeState> show(const std::string& node) override {
    calls.push_back("show " + node);
    for (const auto& r : current())
      if (r.name == node) return r.state;
    return Result<SlurmNodeState>::failure("no such node");
  }
  Result<std::vector<SlurmNodeRecord>> show_all() override {
    calls.push_back("show_all");
    if (tables.size() > 1) {
      last_ = tables.front();
      tables.pop_front();
    } else if (!tables.empty()) {
      last_ = tables.front();
    }
    if (!last_) return Result<std::vector<SlurmNodeRecord>>::failure("gpudiag: cannot read the nodes from Slurm: "
                                                                     "scontrol timed out after 10 s");
    return *last_;
  }
  Result<bool> drain(const std::string& node, const std::string& reason) override {
    calls.push_back("drain " + node + " " + reason);
    return true;
  }
  Result<bool> resume(const std::string& node) override {
    calls.push_back("resume " + node);
    return true;
  }
  Result<bool> undrain(const std::string& node) override {
    calls.push_back("undrain " + node);
    if (fail_undrain) return Result<bool>::failure("gpudiag: cannot undrain node " + node + ": scontrol exited 1");
    return true;
  }
  void sleep(double s) override { slept.push_back(s); }
  double random_unit() override { return 0.5; }
  void syslog(const std::string& line) override { logged.push_back(line); }

 private:
  std::vector<SlurmNodeRecord> current() { return last_ ? *last_ : (tables.empty() || !tables.front() ? std::vector<SlurmNodeRecord>{} : *tables.front()); }
  std::optional<std::vector<SlurmNodeRecord>> last_;
};

Report sick() {
  Report r;
  r.node = "n2";
  CheckResult c;
  c.name = "ib";
  c.add({"mlx5_3:1", Status::critical, "mlx5_3 port 1 is DOWN", "cable"});
  r.add(c);
  return r;
}

const std::string kReason = "gpudiag: mlx5_3 port 1 is DOWN";

Config capped(int max_nodes) {
  Config cfg;
  cfg.drain.max_nodes = max_nodes;
  cfg.drain.jitter_s = 2;
  return cfg;
}

std::vector<SlurmNodeRecord> with(std::vector<SlurmNodeRecord> all, const std::string& node, const std::string& state,
                                  const std::string& reason) {
  for (auto& r : all)
    if (r.name == node) r = rec(node, state, reason, r.partitions);
  return all;
}

ActOptions drain_only() { return {true, false, false}; }

}  // namespace breaker_test

TEST(BreakerSequence, ASingleSickNodeIsDrainedAfterCountingTwice) {
  ScriptedSlurm s;
  auto before = cluster(3, 0);
  s.tables = {before, with(before, "n2", "IDLE+DRAIN", kReason)};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.outcome.action, "drained");
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all", "drain n2 " + kReason, "show_all"}));
  EXPECT_EQ(s.slept, (std::vector<double>{1.0}));  // half of drain.jitter
  EXPECT_TRUE(s.logged.empty());
}

TEST(BreakerSequence, AtTheCapTheNodeIsHeldBackAndOneLineIsLogged) {
  ScriptedSlurm s;
  s.tables = {with(cluster(3, 0), "n1", "IDLE+DRAIN", "gpudiag: other")};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "held_back");
  EXPECT_EQ(r.outcome.cap, "drain.max_nodes");
  EXPECT_EQ(r.outcome.count, 1);
  EXPECT_EQ(r.outcome.limit, 1);
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all"}));
  ASSERT_EQ(s.logged.size(), 1u);
  EXPECT_EQ(s.logged[0].rfind("n2 is CRITICAL but not drained: held back by the drain breaker: 1 node drained by "
                              "gpudiag (n1) reach drain.max_nodes = 1",
                              0),
            0u)
      << s.logged[0];
}

TEST(BreakerSequence, NoCountNoDrain) {
  ScriptedSlurm s;
  s.tables = {std::nullopt};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "held_back");
  EXPECT_NE(r.outcome.explanation.find("cannot count"), std::string::npos);
  EXPECT_NE(r.outcome.explanation.find("scontrol timed out after 10 s"), std::string::npos);
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all"}));
  EXPECT_EQ(s.logged.size(), 1u);
}

TEST(BreakerSequence, ThreeAtOnceWithACapOfOne) {
  // n1, n2 and n3 counted at the same moment, found none, and drained; each re-count
  // sees all three. n2 and n3 come after n1 in the agreed order: they undo and are
  // held back. n1 undoes, waits one slot, counts again (the others have undone) and
  // keeps its drain.
  auto none = cluster(3, 0);
  auto all3 = with(with(with(none, "n1", "IDLE+DRAIN", kReason), "n2", "IDLE+DRAIN", kReason), "n3", "IDLE+DRAIN",
                   kReason);
  for (const std::string self : {"n2", "n3"}) {
    ScriptedSlurm s;
    s.tables = {none, all3};
    auto r = act_on_node(sick(), capped(1), self, drain_only(), s);
    EXPECT_EQ(r.outcome.action, "held_back") << self;
    EXPECT_EQ(r.outcome.explanation.rfind("not drained: its drain, made at the same moment as other nodes', was undone: "
                                          "held back by the drain breaker: 2 nodes drained by gpudiag",
                                          0),
              0u)
        << r.outcome.explanation;
    EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all", "drain " + self + " " + kReason, "show_all",
                                                 "undrain " + self}));
    EXPECT_EQ(r.outcome.count, 2);
  }
  ScriptedSlurm s;
  s.tables = {none, all3, none, with(none, "n1", "IDLE+DRAIN", kReason)};
  auto r = act_on_node(sick(), capped(1), "n1", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "drained");
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all", "drain n1 " + kReason, "show_all", "undrain n1", "show_all",
                                               "drain n1 " + kReason, "show_all"}));
  EXPECT_EQ(s.slept, (std::vector<double>{1.0, kRetrySlotS}));
}

TEST(BreakerSequence, TheUndoTouchesOnlyOurOwnDrain) {
  // Between the drain and the re-count an admin drained the node for their own reason;
  // n1 makes the count exceed the cap, but the drain is the admin's now.
  auto none = cluster(3, 0);
  ScriptedSlurm s;
  s.tables = {none, with(with(none, "n1", "IDLE+DRAIN", kReason), "n2", "IDLE+DRAIN", "admin: firmware")};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "unchanged");
  for (const auto& c : s.calls) EXPECT_EQ(c.rfind("undrain", 0), std::string::npos) << c;
}

TEST(BreakerSequence, AFailedReCountKeepsTheDrainAndSaysSo) {
  ScriptedSlurm s;
  s.tables = {cluster(3, 0), std::nullopt};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "drained");
  EXPECT_NE(r.outcome.explanation.find("could not re-count"), std::string::npos);
}

TEST(BreakerSequence, AFailedUndoIsAnErrorThatSaysHowToUndo) {
  auto none = cluster(3, 0);
  ScriptedSlurm s;
  s.tables = {none, with(with(none, "n1", "IDLE+DRAIN", kReason), "n2", "IDLE+DRAIN", kReason)};
  s.fail_undrain = true;
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "failed");
  EXPECT_NE(r.error.find("State=UNDRAIN"), std::string::npos) << r.error;
}

TEST(BreakerSequence, ForceDrainsWithoutCounting) {
  ScriptedSlurm s;
  s.tables = {with(cluster(3, 0), "n1", "IDLE+DRAIN", "gpudiag: other")};
  auto r = act_on_node(sick(), capped(1), "n2", {true, false, true}, s);
  EXPECT_EQ(r.outcome.action, "drained");
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show n2", "drain n2 " + kReason}));
  EXPECT_TRUE(s.slept.empty());
}

TEST(BreakerSequence, OnlyANodeInServiceIsGated) {
  // Drained by gpudiag already: a new reason, whatever the count.
  auto mine = with(cluster(3, 0), "n1", "IDLE+DRAIN", "gpudiag: other");
  mine = with(mine, "n2", "IDLE+DRAIN", "gpudiag: older finding");
  ScriptedSlurm s;
  s.tables = {mine};
  auto r = act_on_node(sick(), capped(1), "n2", drain_only(), s);
  EXPECT_EQ(r.outcome.action, "drained");
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show_all", "drain n2 " + kReason}));
  // An admin's DOWN and an admin's drain: left alone, never counted against.
  for (const auto& [state, reason] : std::vector<std::pair<std::string, std::string>>{
           {"DOWN", "admin: replacing PSU"}, {"IDLE+DRAIN", "admin: firmware"}}) {
    ScriptedSlurm t;
    t.tables = {with(cluster(3, 0), "n2", state, reason)};
    r = act_on_node(sick(), capped(1), "n2", drain_only(), t);
    EXPECT_EQ(r.outcome.action, "unchanged") << state;
    EXPECT_NE(r.outcome.explanation.find("left alone"), std::string::npos);
    EXPECT_EQ(t.calls, (std::vector<std::string>{"show_all"}));
  }
}

TEST(BreakerSequence, ResumeAndHealthyNodesNeverCount) {
  Report ok;
  ok.node = "n2";
  ScriptedSlurm s;
  s.tables = {with(cluster(3, 0), "n2", "IDLE+DRAIN", "gpudiag: x")};
  auto r = act_on_node(ok, capped(1), "n2", {true, true, false}, s);
  EXPECT_EQ(r.outcome.action, "resumed");
  EXPECT_EQ(s.calls, (std::vector<std::string>{"show n2", "resume n2"}));
}

TEST(BreakerConfig, OnByDefault) {
  auto cfg = parse_config("", "t.yaml");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->drain.max_nodes, 16);
  EXPECT_EQ(cfg->drain.max_share_pct, 10);
  EXPECT_EQ(cfg->drain.jitter_s, 2);
}

TEST(BreakerConfig, KeysOffAndErrors) {
  auto cfg = parse_config("drain:\n  max_nodes: 1\n  max_share: 25%\n  jitter: 0\n", "t.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->drain.max_nodes, 1);
  EXPECT_EQ(cfg->drain.max_share_pct, 25);
  EXPECT_EQ(cfg->drain.jitter_s, 0);
  cfg = parse_config("drain:\n  max_nodes: off\n  max_share: 'off'\n  jitter: 1.5s\n", "t.yaml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_FALSE(cfg->drain.max_nodes);
  EXPECT_FALSE(cfg->drain.max_share_pct);
  EXPECT_EQ(cfg->drain.jitter_s, 1.5);
  EXPECT_EQ(parse_config("drain:\n  max_share: 10\n", "t.yaml")->drain.max_share_pct, 10);
  for (const char* bad : {"drain:\n  max_nodes: 0\n", "drain:\n  max_share: 0%\n", "drain:\n  max_share: 101%\n",
                          "drain:\n  max_nodes: 5%\n", "drain:\n  max_share: 10 %\n", "drain:\n  jitter: 1m\n",
                          "drain:\n  max_node: 3\n", "drain: 3\n"}) {
    auto r = parse_config(bad, "t.yaml");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().rfind("gpudiag: t.yaml:", 0), 0u) << r.error();
    EXPECT_NE(r.error().find("drain"), std::string::npos) << r.error();
  }
}

TEST(BreakerReport, HeldBackIsCriticalInEveryFormat) {
  Report r = sick();
  SlurmOutcome o;
  o.action = "held_back";
  o.explanation = "not drained: held back by the drain breaker: ...";
  o.cap = "drain.max_nodes";
  o.count = 16;
  o.limit = 16;
  r.slurm = o;
  auto j = report_to_json(r);
  EXPECT_EQ(j["status"], "critical");
  EXPECT_EQ(j["slurm"]["action"], "held_back");
  EXPECT_EQ(j["slurm"]["breaker"]["drained"], 16);
  EXPECT_EQ(j["slurm"]["breaker"]["limit"], 16);
  auto prom = format_prometheus(r);
  EXPECT_NE(prom.find("gpudiag_status 2\n"), std::string::npos);
  EXPECT_NE(prom.find("# TYPE gpudiag_drain_held_back gauge\ngpudiag_drain_held_back 1\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("gpudiag_drain_breaker_drained{cap=\"drain.max_nodes\"} 16\n"), std::string::npos) << prom;
  EXPECT_NE(prom.find("gpudiag_drain_breaker_limit{cap=\"drain.max_nodes\"} 16\n"), std::string::npos) << prom;
  EXPECT_EQ(format_nhc(r).rfind("gpudiag: mlx5_3 port 1 is DOWN", 0), 0u);
  EXPECT_NE(format_human(r, false, false).find("CRITICAL"), std::string::npos);
  // Drained, or no --drain at all: 0, or no series.
  r.slurm->action = "drained";
  r.slurm->limit = 0;
  prom = format_prometheus(r);
  EXPECT_NE(prom.find("gpudiag_drain_held_back 0\n"), std::string::npos);
  EXPECT_EQ(prom.find("gpudiag_drain_breaker_limit"), std::string::npos);
  EXPECT_FALSE(report_to_json(r)["slurm"].contains("breaker"));
  r.slurm.reset();
  EXPECT_EQ(format_prometheus(r).find("gpudiag_drain_held_back"), std::string::npos);
  EXPECT_FALSE(report_to_json(r).contains("slurm"));
}
