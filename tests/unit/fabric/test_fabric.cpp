// fabric/ (issue 32): the pure parts of --diag=fabric, and the two sides of the test over
// loopback (a coordinator and three "nodes" as threads of this process).
#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <thread>

#include "config/config.h"
#include "config/config_file.h"
#include "fabric/fabric_coordinator.h"
#include "fabric/fabric_report.h"
#include "fabric/fabric_task.h"
#include "fabric/fabric_wire.h"
#include "tests/unit/loopback.h"
#include "fabric/launch_layout.h"
#include "fabric/node_differs.h"
#include "fabric/node_facts.h"
#include "fabric/pair_plan.h"
#include "fabric/pair_verdict.h"

namespace gpudiag::fabric {
namespace {

const std::string kToken(32, 'a');

// -- the pairing plan -------------------------------------------------------------------
void expect_disjoint(const std::vector<Round>& rounds) {
  for (const auto& r : rounds) {
    std::set<int> seen;
    for (const auto& p : r) {
      EXPECT_LT(p.a, p.b);
      EXPECT_TRUE(seen.insert(p.a).second);
      EXPECT_TRUE(seen.insert(p.b).second);
    }
  }
}

TEST(FabricPlan, TheRingMeetsEveryNodeTwiceInTwoOrThreeRounds) {
  for (int n = 3; n <= 64; ++n) {
    auto rounds = first_rounds(n);
    expect_disjoint(rounds);
    EXPECT_EQ(rounds.size(), n % 2 ? 3u : 2u) << n;
    std::vector<int> degree(n, 0);
    std::size_t pairs = 0;
    for (const auto& r : rounds)
      for (const auto& p : r) ++degree[p.a], ++degree[p.b], ++pairs;
    EXPECT_EQ(pairs, static_cast<std::size_t>(n));
    for (int d : degree) EXPECT_EQ(d, 2) << n;
  }
  EXPECT_TRUE(first_rounds(1).empty());
  ASSERT_EQ(first_rounds(2).size(), 1u);
  EXPECT_EQ(first_rounds(2)[0], (Round{{0, 1}}));
  // Three nodes: every pair, one a round.
  EXPECT_EQ(first_rounds(3), (std::vector<Round>{{{0, 1}}, {{1, 2}}, {{0, 2}}}));
}

TEST(FabricPlan, PacksPairsIntoDisjointRounds) {
  auto rounds = pack_rounds({{0, 1}, {1, 2}, {2, 3}, {0, 3}, {4, 5}});
  expect_disjoint(rounds);
  EXPECT_EQ(rounds.size(), 2u);
}

TEST(FabricPlan, ASuspectMeetsANodeThatPassedAndANoisyLinkIsTestedAgain) {
  // Six nodes in a ring; node 3 slow with both partners (2 and 4).
  std::vector<Pair> tested = {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {0, 5}};
  auto again = retest_pairs(6, tested, {{2, 3}, {3, 4}});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].a == 3 || again[0].b == 3);
  const int partner = again[0].a == 3 ? again[0].b : again[0].a;
  EXPECT_NE(partner, 2);
  EXPECT_NE(partner, 4);
  // One slow pair whose nodes are both fast elsewhere: the pair itself, once.
  EXPECT_EQ(retest_pairs(6, tested, {{0, 1}}), (std::vector<Pair>{{0, 1}}));
  // Two nodes: nobody is fast with anyone, so the pair once more.
  EXPECT_EQ(retest_pairs(2, {{0, 1}}, {{0, 1}}), (std::vector<Pair>{{0, 1}}));
  // Three nodes, one suspect: it already met every node that passed, so its slow pairs again.
  EXPECT_EQ(retest_pairs(3, {{0, 1}, {1, 2}, {0, 2}}, {{1, 2}, {0, 2}}), (std::vector<Pair>{{1, 2}, {0, 2}}));
}

// -- slow node or slow link ------------------------------------------------------------
std::vector<Measurement> both_ways(int a, int b, double gbps) { return {{a, b, false, gbps, ""}, {b, a, false, gbps, ""}}; }

std::vector<Measurement> join(std::initializer_list<std::vector<Measurement>> parts) {
  std::vector<Measurement> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(FabricVerdict, AShapedNodeOfThreeIsTheBadNodeAlone) {
  // The median pair is a slow one here; the median node's best pair is not.
  auto j = judge_pairs(3, join({both_ways(0, 1, 10), both_ways(0, 2, 0.05), both_ways(1, 2, 0.05)}), 0.25, 0);
  EXPECT_DOUBLE_EQ(j.reference_gbps, 10);
  EXPECT_EQ(j.bad_nodes, std::vector<int>{2});
  EXPECT_TRUE(j.bad_links.empty());
  EXPECT_TRUE(j.unsure.empty());
}

TEST(FabricVerdict, ASlowPairOfNodesFastElsewhereIsABadLink) {
  auto j = judge_pairs(4, join({both_ways(0, 1, 10), both_ways(1, 2, 9), both_ways(2, 3, 11), both_ways(0, 3, 0.5)}),
                       0.25, 0);
  EXPECT_TRUE(j.bad_nodes.empty());
  EXPECT_EQ(j.bad_links, (std::vector<Pair>{{0, 3}}));
}

TEST(FabricVerdict, AHealthyButNoisyClusterIsNeverSlow) {
  // 3x spread between pairs, as two shared cores give: nothing is slow.
  auto j = judge_pairs(3, join({both_ways(0, 1, 12), both_ways(0, 2, 4), both_ways(1, 2, 6)}), 0.25, 0);
  EXPECT_TRUE(j.slow.empty());
  // A direction measured twice counts its best figure: a busy moment is not a bad link.
  auto retested = join({both_ways(0, 1, 10), both_ways(1, 2, 10), both_ways(0, 2, 10)});
  retested.push_back({0, 2, false, 0.1, ""});
  EXPECT_TRUE(judge_pairs(3, retested, 0.25, 0).slow.empty());
}

TEST(FabricVerdict, TheFloorFromTheConfigAndTwoNodes) {
  auto j = judge_pairs(2, both_ways(0, 1, 5), 0.25, 20);
  EXPECT_EQ(j.slow.size(), 1u);
  EXPECT_TRUE(j.bad_nodes.empty());
  EXPECT_EQ(j.unsure, (std::vector<Pair>{{0, 1}}));
  // One slow direction makes the pair slow.
  auto one_way = join({both_ways(0, 1, 10), both_ways(1, 2, 10)});
  one_way.push_back({0, 2, false, 10, ""});
  one_way.push_back({2, 0, false, 0.2, ""});
  auto k = judge_pairs(3, one_way, 0.25, 0);
  EXPECT_EQ(k.bad_links, (std::vector<Pair>{{0, 2}}));
}

TEST(FabricVerdict, ReportLinesNameTheNodeAndStayWithinFive) {
  std::vector<NodeEntry> nodes = {{"n1", "10.0.0.1", 29517}, {"n2", "10.0.0.2", 40000}, {"n3", "10.0.0.3", 40001}};
  std::vector<TestRecord> tests;
  auto rec = [](int from, int to, std::uint64_t bytes, std::string err = "", bool reach = false) {
    TestRecord t;
    t.from = from, t.to = to, t.bytes = bytes, t.usec = 1000000, t.error = err, t.reach = reach;
    return t;
  };
  tests = {rec(1, 0, 0, "", true), rec(2, 0, 0, "Connection refused", true), rec(0, 1, 1250000000),
           rec(1, 0, 1250000000),  rec(0, 2, 6000000),                       rec(2, 0, 6000000),
           rec(1, 2, 6000000),     rec(2, 1, 6000000)};
  auto j = judge_pairs(3, measurements(tests), 0.25, 0);
  auto findings = pair_findings(nodes, tests, j, 29517);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_EQ(findings[0].message.rfind("n3 cannot reach n1:29517/tcp (the rendezvous port 29517): Connection refused - "
                                      "a firewall?",
                                      0),
            0u)
      << findings[0].message;
  EXPECT_NE(findings[1].message.find("n3 is slow with every partner"), std::string::npos);
  for (int i = 0; i < 6; ++i) findings.push_back(Finding{"differs", true, "X", "NCCL_X differs " + std::to_string(i)});
  auto v = fabric_verdict(findings, true, j, 3, "/d/fabric.json");
  EXPECT_FALSE(v.start);
  EXPECT_EQ(v.lines.size(), kMaxVerdictLines);
  EXPECT_NE(v.lines[0].find("does not start: 8 problem(s)"), std::string::npos);
  EXPECT_NE(v.lines[3].find("(and 5 more in fabric.json)"), std::string::npos) << v.lines[3];
  // However many problems, the node to drain is the last line, as the admin's command.
  EXPECT_EQ(v.lines.back(), "gpudiag: fabric: to drain (an admin, after a look): scontrol update NodeName=n3 "
                            "State=DRAIN Reason=\"gpudiag fabric: slow with every partner\"");
  for (const auto& l : v.lines) EXPECT_EQ(l.rfind("gpudiag: fabric: ", 0), 0u);
  // A name from a task's hello is the user's: one a shell would read as more than a name
  // never reaches the line an admin may paste (second adversary review).
  EXPECT_NE(drain_command({"n3", "gpu-017.rack_2"}).find("NodeName=n3,gpu-017.rack_2 State=DRAIN"), std::string::npos)
      << drain_command({"n3", "gpu-017.rack_2"});
  for (const char* bad : {"n3;reboot", "$(id)", "n3 n4", "`x`", "a|b", ""}) {
    const std::string line = drain_command({"n1", bad});
    EXPECT_EQ(line.find("scontrol update"), std::string::npos) << line;
    EXPECT_NE(line.find("drain it by hand"), std::string::npos) << line;
  }
  EXPECT_TRUE(fabric_verdict(findings, false, j, 3, "").start);  // fabric.action: warn
  // fabric.json holds every test, each pair's figures, and the node to drain.
  FabricReport rep;
  rep.nodes = nodes;
  rep.tests = tests;
  rep.judgement = j;
  rep.findings = findings;
  rep.verdict = v;
  const std::string json = fabric_json(rep);
  EXPECT_NE(json.find("\"drain\": [\n    \"n3\"\n  ]"), std::string::npos) << json;
  EXPECT_NE(json.find("\"a_to_b_gbps\": 10.0"), std::string::npos) << json;
}

TEST(FabricVerdict, AHealthyStepIsOneLine) {
  auto j = judge_pairs(2, both_ways(0, 1, 9.5), 0.25, 0);
  auto v = fabric_verdict({}, true, j, 2, "/d/fabric.json");
  ASSERT_EQ(v.lines.size(), 1u);
  EXPECT_EQ(v.lines[0], "gpudiag: fabric: 2 nodes, 1 pairs, 9.50-9.50 Gb/s over TCP, nothing differs: ok (all figures: "
                        "/d/fabric.json)");
}

// -- the node that differs -------------------------------------------------------------
TaskHello task(std::uint32_t rank, const std::string& node, std::map<std::string, std::string> env,
               std::set<std::string> injected = {}) {
  TaskHello h;
  h.rank = rank;
  h.node = node;
  h.env = std::move(env);
  h.injected = std::move(injected);
  return h;
}

TEST(FabricDiffers, NamesTheNodeWithTheOddValueAndWhetherTheUserSetIt) {
  std::vector<TaskHello> t = {task(0, "n1", {{"NCCL_IB_HCA", "mlx5_0,mlx5_1"}}),
                              task(1, "n2", {{"NCCL_IB_HCA", "mlx5_0,mlx5_1"}}),
                              task(2, "n3", {{"NCCL_IB_HCA", "mlx5_0"}})};
  auto f = find_differences(t);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f[0].fatal);
  EXPECT_EQ(f[0].message.rfind("NCCL_IB_HCA=mlx5_0 on n3 only (user-set), mlx5_0,mlx5_1 elsewhere", 0), 0u)
      << f[0].message;
  // gpudiag's own per-node HCA list follows each node's ports: named, not fatal.
  for (auto& x : t) x.injected.insert("NCCL_IB_HCA");
  f = find_differences(t);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].fatal);
}

TEST(FabricDiffers, RanksOfOneNodeThatDisagreeAreNamedByRank) {
  std::vector<TaskHello> t = {task(0, "n1", {{"TORCH_X", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}}),
                              task(1, "n1", {{"TORCH_X", "2"}, {"CUDA_VISIBLE_DEVICES", "1"}}),
                              task(2, "n2", {{"TORCH_X", "1"}, {"CUDA_VISIBLE_DEVICES", "0"}}),
                              task(3, "n2", {{"TORCH_X", "1"}, {"CUDA_VISIBLE_DEVICES", "1"}})};
  auto f = find_differences(t);
  ASSERT_EQ(f.size(), 1u);  // CUDA_VISIBLE_DEVICES differs by design
  EXPECT_EQ(f[0].message.rfind("TORCH_X=2 on rank 1 on n1 only (user-set), 1 elsewhere", 0), 0u) << f[0].message;
  EXPECT_TRUE(find_differences({task(0, "n1", {{"NCCL_A", "x"}}), task(1, "n2", {{"NCCL_A", "x"}})}).empty());
  EXPECT_FALSE(compared_env("PATH"));
  EXPECT_TRUE(compared_env("GLOO_SOCKET_IFNAME"));
}

TEST(FabricDiffers, NodeFactsThatDifferAreNamedNotFatal) {
  std::vector<TaskHello> t = {task(0, "n1", {}), task(1, "n2", {}), task(2, "n3", {})};
  for (auto& x : t) x.facts = NodeFacts{"550.54.15", "6.1.0", "", {}, {"eth0"}};
  t[1].facts->driver = "535.104.05";
  auto f = find_differences(t);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_FALSE(f[0].fatal);
  EXPECT_EQ(f[0].message, "driver=535.104.05 on n2 only, 550.54.15 elsewhere");
}

TEST(FabricDiffers, AUserListThatMatchesNothingOnANodeIsAnError) {
  std::vector<TaskHello> t = {task(0, "n1", {{"NCCL_SOCKET_IFNAME", "ib"}, {"NCCL_IB_HCA", "=mlx5_9"}}),
                              task(1, "n2", {{"NCCL_SOCKET_IFNAME", "ib"}, {"GLOO_SOCKET_IFNAME", "eth0"}})};
  t[0].facts = NodeFacts{"", "", "", {"mlx5_0"}, {"eth0", "ib0", "lo"}};
  t[1].facts = NodeFacts{"", "", "", {}, {"eth0", "lo"}};
  auto f = find_lists_matching_nothing(t);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].message, "NCCL_IB_HCA==mlx5_9 (user-set) matches no HCA on n1 (it has mlx5_0): fix the list or unset it");
  EXPECT_EQ(f[1].message,
            "NCCL_SOCKET_IFNAME=ib (user-set) matches no interface on n2 (it has eth0,lo): fix the list or unset it");
  EXPECT_TRUE(nccl_list_matches_any("^docker,lo", {"eth0"}));
  EXPECT_TRUE(nccl_list_matches_any("mlx5_0:1,mlx5_1:1", {"mlx5_1"}));
  EXPECT_FALSE(nccl_list_matches_any("=eth", {"eth0"}));
}

// -- launch layout ---------------------------------------------------------------------
TEST(FabricLayout, TorchrunTwiceOnANodeAndMoreRanksThanGpus) {
  std::vector<TaskHello> t = {task(0, "n1", {{"PET_NNODES", "2"}}), task(1, "n1", {{"PET_NNODES", "2"}}),
                              task(2, "n2", {{"PET_NNODES", "2"}})};
  for (auto& x : t) x.launcher = "torchrun";
  auto f = find_layout_mistakes(t, 3);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("torchrun runs 2 times on n1"), std::string::npos);
  EXPECT_NE(f[0].message.find("--ntasks-per-node=1"), std::string::npos);
  std::vector<TaskHello> plain = {task(0, "n1", {{"CUDA_VISIBLE_DEVICES", "0,1"}}),
                                  task(1, "n1", {{"CUDA_VISIBLE_DEVICES", "0,1"}}),
                                  task(2, "n1", {{"CUDA_VISIBLE_DEVICES", "0,1"}})};
  f = find_layout_mistakes(plain, 3);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].message.rfind("3 tasks on n1 share 2 GPUs", 0), 0u);
  EXPECT_TRUE(find_layout_mistakes({task(0, "n1", {{"CUDA_VISIBLE_DEVICES", "0"}}),
                                    task(1, "n1", {{"CUDA_VISIBLE_DEVICES", "1"}})},
                                   2)
                  .empty());
}

TEST(FabricLayout, AWorldSizeTheProgramWillNotReach) {
  auto f = find_layout_mistakes({task(0, "n1", {{"WORLD_SIZE", "16"}}), task(1, "n2", {{"WORLD_SIZE", "16"}})}, 2);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("WORLD_SIZE=16 on n1 but the step runs 2 tasks"), std::string::npos);
  std::vector<TaskHello> t = {task(0, "n1", {{"PET_NNODES", "4"}, {"PET_NPROC_PER_NODE", "8"}, {"CUDA_VISIBLE_DEVICES", "0,1"}})};
  t[0].launcher = "torchrun";
  f = find_layout_mistakes(t, 1);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_NE(f[0].message.find("starts 8 workers but its task sees 2 GPUs"), std::string::npos);
  EXPECT_NE(f[1].message.find("waits for 4 nodes"), std::string::npos);
}

TEST(FabricLayout, WhichProgramIsTorchrun) {
  const char* a[] = {"/usr/bin/torchrun", "train.py"};
  const char* b[] = {"python3", "-m", "torch.distributed.run", "x.py"};
  const char* c[] = {"python3", "train.py"};
  EXPECT_EQ(launcher_of(2, a), "torchrun");
  EXPECT_EQ(launcher_of(4, b), "torchrun");
  EXPECT_EQ(launcher_of(2, c), "");
  EXPECT_EQ(launcher_of(0, nullptr), "");
}

// -- the wire ----------------------------------------------------------------------------
TEST(FabricWire, EveryLineParsesBackAndTheTokenDecides) {
  TaskHello h = task(3, "n2", {{"NCCL_A", "x"}}, {"NCCL_A"});
  h.node_id = 1, h.nnodes = 2, h.local_tasks = 2, h.local_rank = 1;
  h.listen_addr = "10.0.0.2", h.listen_port = 4000;
  h.facts = NodeFacts{"550", "6.1", "libibverbs 1.14.44.0", {"mlx5_0"}, {"eth0"}};
  std::string line = format_hello(kToken, h);
  ASSERT_EQ(line.back(), '\n');
  line.pop_back();
  auto back = parse_hello(line, kToken);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->env, h.env);
  EXPECT_EQ(back->injected, h.injected);
  EXPECT_EQ(back->facts->rdma_core, "libibverbs 1.14.44.0");
  EXPECT_FALSE(parse_hello(line, std::string(32, 'b')));  // another step's token
  h.node = "n2\x1b[2J";
  std::string bad = format_hello(kToken, h);
  bad.pop_back();
  EXPECT_FALSE(parse_hello(bad, kToken));  // a node name with control bytes
  for (const auto& r : {TestReport{TestReport::kReceived, 2, 123, 456, ""}, TestReport{TestReport::kSent, 1, 0, 0, ""},
                        TestReport{TestReport::kSent, 1, 0, 0, "Connection refused"}}) {
    std::string l = format_test_report(r);
    l.pop_back();
    auto p = parse_test_report(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_test_report(*p), l + "\n");
  }
  for (const auto& o : {Order{Order::kSend, 2, "10.0.0.3", 4000, 500, false}, Order{Order::kEnd, 0, "", 0, 0, true}}) {
    std::string l = format_order(o);
    l.pop_back();
    auto p = parse_order(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_order(*p), l + "\n");
  }
  EXPECT_FALSE(parse_order("send 2 host.example 4000 500"));  // addresses are numeric
  auto header = format_data_header(kToken, 7);
  header.pop_back();
  EXPECT_EQ(parse_data_header(header, kToken), 7u);
  EXPECT_FALSE(parse_data_header(header, std::string(32, '0')));
  const std::string proof(32, 'b');
  auto e = parse_endpoint("4242:" + kToken + ":" + proof);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->proof, proof);
  EXPECT_EQ(format_endpoint(*e), "4242:" + kToken + ":" + proof);
  EXPECT_FALSE(parse_endpoint("4242:" + kToken));  // no proof
  EXPECT_FALSE(parse_endpoint("0:" + kToken + ":" + proof));
  EXPECT_FALSE(parse_endpoint("4242:" + kToken + ":" + proof.substr(1)));
  const std::string said = format_srun_proof(proof);
  EXPECT_TRUE(is_srun_proof(said.substr(0, said.size() - 1), proof));
  EXPECT_FALSE(is_srun_proof("srun " + kToken, proof));  // the tasks' token is no proof
  EXPECT_FALSE(is_srun_proof("end ok", proof));
  EXPECT_EQ(driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar 5 22:23:56 UTC 2024\n"),
            "550.54.15");
  EXPECT_EQ(driver_version("garbage"), "");
}

// -- both sides over loopback ----------------------------------------------------------
TEST(FabricLoopback, ThreeNodesMeasureEveryPairAndTheCoordinatorSaysOk) {
  char tmpl[] = "/tmp/gpudiag-fabric-unit-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  CoordinatorSettings s;
  s.cfg.seconds = 0.1;
  s.cfg.action = "warn";  // the fate does not hang on loopback figures
  s.total_tasks = 3;
  s.report_dir = dir;
  s.uid = ::getuid();
  s.job_step = "1.0";
  auto started = start_fabric_coordinator(s);
  ASSERT_TRUE(started.endpoint) << started.error;
  std::vector<TaskOutcome> out(3);
  std::vector<std::thread> nodes;
  for (std::uint32_t n = 0; n < 3; ++n) {
    nodes.emplace_back([&, n] {
      TaskSide side;
      side.srun_addr = "127.0.0.1";
      side.endpoint = *started.endpoint;
      side.leader = true;
      side.listen_addr = "127.0.0.1";
      side.deadline_s = 30;
      side.hello = task(n, "n" + std::to_string(n + 1), {{"NCCL_A", "x"}});
      side.hello.node_id = n;
      side.hello.nnodes = 3;
      side.hello.facts = NodeFacts{};
      out[n] = run_fabric_task(side);
    });
  }
  for (auto& t : nodes) t.join();
  // Loopback on shared cores says nothing about speed: the mechanics only (every task
  // got the end, every direction of every pair and both reach checks were measured).
  for (const auto& o : out) EXPECT_EQ(o.kind, TaskOutcome::kOk) << o.detail;
  std::ifstream f(dir + "/fabric.json");
  std::stringstream text;
  text << f.rdbuf();
  const std::string json = text.str();
  auto count = [&](const std::string& needle) {
    std::size_t n = 0;
    for (auto at = json.find(needle); at != std::string::npos; at = json.find(needle, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("\"kind\": \"reach\""), 2u) << json;
  EXPECT_GE(count("\"kind\": \"pair\""), 6u) << json;
  EXPECT_EQ(count("\"error\""), 0u) << json;
  EXPECT_EQ(count("\"a_to_b_gbps\""), 3u) << json;
  EXPECT_EQ(count("\"b_to_a_gbps\""), 3u) << json;
  EXPECT_EQ(::unlink((dir + "/fabric.json").c_str()), 0);
  ::rmdir(dir.c_str());
}

TEST(FabricLoopback, AListenerGivesUpOnSilenceAndATaskWithoutSrunDoesNotWait) {
  TaskSide side;
  side.srun_addr = "127.0.0.1";
  side.endpoint = Endpoint{1, kToken, kToken};  // nobody listens on port 1
  side.deadline_s = 2;
  auto o = run_fabric_task(side);
  EXPECT_EQ(o.kind, TaskOutcome::kNoVerdict);
  EXPECT_NE(o.detail.find("cannot reach srun"), std::string::npos) << o.detail;
}

// Adversary review 14: once srun's coordinator has closed its port, another user may hold
// it and read a task's hello, token and all. Its orders are not believed: srun's first
// line shows the proof, which no task sends; without it the task takes no part.
TEST(FabricLoopback, OrdersFromAListenerWithoutSrunsProofAreNotBelieved) {
  int port = 0;
  const int l = test::loopback_listener(&port);
  ASSERT_GE(l, 0);
  // It reads the hello, token and all, and answers with that token.
  std::thread forger([l] { test::answer_one(l, "srun " + kToken + "\nend ok\n"); });
  TaskSide side;
  side.srun_addr = "127.0.0.1";
  side.endpoint = Endpoint{port, kToken, std::string(32, 'c')};
  side.deadline_s = 3;
  auto o = run_fabric_task(side);
  forger.join();
  ::close(l);
  EXPECT_NE(o.kind, TaskOutcome::kOk) << "a forged end ok passed the fabric test";
  EXPECT_NE(o.detail.find("without srun's proof"), std::string::npos) << o.detail;
}

TEST(FabricReportFile, OnlyIntoTheUsersOwnPrivateDirNeverOverAFile) {
  char tmpl[] = "/tmp/gpudiag-fabric-unit-XXXXXX";
  ASSERT_TRUE(::mkdtemp(tmpl));
  const std::string dir = tmpl;
  EXPECT_EQ(write_report_file(dir, "fabric.json", "{}", ::getuid()), "");
  EXPECT_NE(write_report_file(dir, "fabric.json", "{}", ::getuid()), "");  // exists: never replaced
  ::chmod(dir.c_str(), 0777);
  EXPECT_NE(write_report_file(dir, "other.json", "{}", ::getuid()), "");
  ::chmod(dir.c_str(), 0700);
  EXPECT_NE(write_report_file(dir, "other.json", "{}", ::getuid() + 1), "");
  ::unlink((dir + "/fabric.json").c_str());
  ::rmdir(dir.c_str());
}

TEST(FabricConfig, KeysAndLimits) {
  auto c = parse_config("fabric:\n  action: warn\n  seconds: 0.2\n  slow_fraction: 0.3\n  min_gbps: 40\n  timeout: 20\n",
                        "t.yaml");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->fabric.action, "warn");
  EXPECT_DOUBLE_EQ(c->fabric.min_gbps, 40);
  EXPECT_FALSE(parse_config("fabric:\n  action: maybe\n", "t.yaml"));
  EXPECT_FALSE(parse_config("fabric:\n  timeout: 500\n", "t.yaml"));
  EXPECT_FALSE(parse_config("fabric:\n  typo: 1\n", "t.yaml"));
}

}  // namespace
}  // namespace gpudiag::fabric

namespace gpudiag::fabric {

// ---------------------------------------------------------------------------------------
// Adversary review 15 (of ca4eb81).

// Attack that failed: the coordinator shows its proof only to a hello with the step's
// token: another user's hello with a guessed token, with the proof's own format in the
// token's place, or garbage, reads nothing back.
TEST(FabricLoopback, Adv15_AttackFailed_AHelloWithoutTheTokenNeverReadsTheProof) {
  CoordinatorSettings s;
  s.cfg.seconds = 0.1;
  s.total_tasks = 2;
  s.uid = ::getuid();
  s.job_step = "1.0";
  auto started = start_fabric_coordinator(s);
  ASSERT_TRUE(started.endpoint) << started.error;
  const Endpoint e = *started.endpoint;
  EXPECT_NE(e.token, e.proof);
  TaskHello h = task(0, "n1", {});
  h.nnodes = 2;
  std::vector<int> spies = {test::loopback_say(e.port, format_hello(std::string(32, '0'), h)),
                            test::loopback_say(e.port, format_hello("srun", h)), test::loopback_say(e.port, "srun\n"),
                            test::loopback_say(e.port, "")};
  for (int fd : spies) ASSERT_GE(fd, 0);
  for (int fd : spies) {
    const std::string seen = test::what_a_spy_reads(fd, 300);
    EXPECT_EQ(seen.find(e.proof), std::string::npos) << "a spy read the proof: " << seen;
    ::close(fd);
  }
}

// Attack that failed: a listener holding srun's closed port that sends a well-formed
// proof of its own (not a copy of the token) and then orders is not believed, nor is the
// right proof with a trailing CR or split by a space.
TEST(FabricLoopback, Adv15_AttackFailed_AForeignOrMangledProofIsNoProof) {
  const std::string proof(32, 'c');
  for (const std::string& line : std::vector<std::string>{"srun " + std::string(32, 'd'), "srun " + proof + "\r", "srun  " + proof,
                                  "srun " + proof + " ", "SRUN " + proof, "srun", "srun " + proof.substr(1) + "C"})
    EXPECT_FALSE(is_srun_proof(line, proof)) << line;
  int port = 0;
  const int l = test::loopback_listener(&port);
  ASSERT_GE(l, 0);
  std::thread forger(
      [l] { test::answer_one(l, "srun " + std::string(32, 'd') + "\nsrun " + std::string(32, 'c') + "\nend ok\n"); });
  TaskSide side;
  side.srun_addr = "127.0.0.1";
  side.endpoint = Endpoint{port, kToken, proof};
  side.deadline_s = 3;
  auto o = run_fabric_task(side);
  forger.join();
  ::close(l);
  EXPECT_NE(o.kind, TaskOutcome::kOk) << "a forged end ok passed the fabric test";
  EXPECT_EQ(o.detail.find(proof), std::string::npos) << o.detail;
}

}  // namespace gpudiag::fabric
