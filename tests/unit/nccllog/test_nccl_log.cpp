// The NCCL log analyzer over log lines in the wording of several NCCL versions, with
// one rank going wrong in each of the known ways, plus garbage that must not crash it.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "nccllog/nccl_log_facts.h"
#include "nccllog/nccl_log_line.h"
#include "nccllog/nccl_log_reader.h"
#include "nccllog/nccl_log_report.h"
#include "util/control_bytes.h"

using namespace gpudiag;

namespace {

enum class Style { v2_10, v2_18, v2_21, v2_28_ts };
enum class Fault { none, socket, socket_lo, bond, plugin, ib12, ib4, ib5, shm, reg_mr, p2p, duplicate, version, no_init,
                   coll_mismatch };

// One rank's log as NCCL of that era writes it.
std::string rank_log(Style style, const std::string& host, int pid, int rank, int nranks, Fault fault = Fault::none) {
  std::string o = host + ":" + std::to_string(pid) + ":" + std::to_string(pid);
  std::string t = host + ":" + std::to_string(pid) + ":" + std::to_string(pid + 50);
  std::string dev = " [" + std::to_string(rank % 8) + "] ";
  std::string pre = style == Style::v2_28_ts ? "[2026-11-21 10:00:00.123] " : "";
  auto info = [&](const std::string& who, const std::string& msg) { return pre + who + dev + "NCCL INFO " + msg + "\n"; };
  auto warn = [&](const std::string& where, const std::string& msg) {
    return pre + t + dev + where + " NCCL WARN " + msg + "\n";
  };
  std::string version = style == Style::v2_10 ? "2.10.3+cuda11.4"
                        : style == Style::v2_18 ? "2.18.5+cuda12.2"
                        : style == Style::v2_21 ? "2.21.5+cuda12.4"
                                                : "2.28.9+cuda13.0";
  if (fault == Fault::version) version = "2.19.3+cuda12.3";
  std::string comm = "0x55d0" + std::to_string(1000 + rank);
  std::string init = style == Style::v2_10
                         ? "comm " + comm + " rank " + std::to_string(rank) + " nranks " + std::to_string(nranks) +
                               " cudaDev " + std::to_string(rank % 8) + " busId 1b000"
                         : std::string(style >= Style::v2_21 ? "ncclCommInitRank " : "") + "comm " + comm + " rank " +
                               std::to_string(rank) + " nranks " + std::to_string(nranks) + " cudaDev " +
                               std::to_string(rank % 8) + " nvmlDev " + std::to_string(rank % 8) +
                               " busId 18000 commId 0x6c7e1b41c2dc5f6c";
  std::string s;
  s += info(o, "Bootstrap : Using " + std::string(fault == Fault::socket_lo ? "lo:127.0.0.1<0>" : "ib0:10.1.0.1<0>"));
  if (fault == Fault::plugin) s += info(o, "NET/Plugin: Loaded net plugin AWS Libfabric (v8)");
  else if (style == Style::v2_10) s += info(o, "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation");
  else s += info(o, "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.");
  s += info(o, "NCCL version " + version);
  if (style != Style::v2_10) s += info(t, init + " - Init START");
  if (fault == Fault::socket || fault == Fault::socket_lo) {
    s += info(t, std::string("NET/Socket : Using [0]") + (fault == Fault::socket_lo ? "lo:127.0.0.1<0>" : "eth0:10.0.0.23<0>"));
    s += info(t, "Using network Socket");
  } else if (fault == Fault::plugin) {
    s += info(t, "Using network AWS Libfabric");
  } else {
    std::string hcas = "[0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB";
    if (fault == Fault::bond) hcas += " [4]mlx5_bond_0:1/RoCE";
    s += info(t, "NET/IB : Using " + hcas + (style == Style::v2_10 ? " ; OOB ib0:10.1.0.1<0>" : " [RO]; OOB ib0:10.1.0.1<0>"));
    s += info(t, "Using network IB");
  }
  if (fault == Fault::p2p) s += info(o, "NCCL_P2P_DISABLE set by environment to 1");
  if (fault == Fault::duplicate)
    s += warn("init.cc:855", "Duplicate GPU detected : rank " + std::to_string(rank) + " and rank 0 both on CUDA device 1b000");
  if (fault == Fault::shm)
    s += warn("include/shmutils.cc:71",
              style == Style::v2_10 ? "Error while creating shared memory segment /dev/shm/nccl-0Ab (size 9637888)"
                                    : "Error: failed to extend /dev/shm/nccl-0Ab to 9637892 bytes");
  if (fault == Fault::reg_mr) s += warn("transport/net_ib.cc:1005", "NET/IB : ibv_reg_mr failed: Cannot allocate memory");
  if (fault == Fault::no_init) return s;  // hung in init: nothing after this
  std::string peer = std::to_string((rank + 1) % nranks);
  s += info(t, "Channel 00" + std::string(style == Style::v2_10 ? "" : "/0") + " : " + std::to_string(rank) + "[0] -> " + peer +
                   "[1] via P2P/IPC" + (style == Style::v2_10 ? "" : "/read"));
  s += info(t, "Channel 01/0 : " + std::to_string(rank) + "[0] -> " + peer + "[1] [send] via NET/IB/0/GDRDMA");
  s += info(t, "Channel 02/0 : " + std::to_string(rank) + "[0] -> " + peer + "[1] via SHM/direct/direct");
  s += info(t, init + " - Init COMPLETE");
  for (int op = 0; op < 3; ++op) {
    std::string coll = fault == Fault::coll_mismatch && op == 2 ? "Broadcast" : "AllReduce";
    s += info(o, coll + ": opCount " + std::to_string(op) + " sendbuff 0x7f40 recvbuff 0x7f40 count 1024 datatype 7 op 0 "
                 "root 0 comm " + comm + " [nranks=" + std::to_string(nranks) + "] stream 0x5600");
  }
  auto ib_err = [&](int code) {
    return style <= Style::v2_18 ? "NET/IB : Got completion from peer 10.1.0.9<40000> with error " + std::to_string(code) +
                                       ", opcode 0, len 0, vendor err 129 (Recv)"
                                 : "NET/IB : Got completion from peer 10.1.0.9<40000> with status=" + std::to_string(code) +
                                       " opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.0.2 hca mlx5_0";
  };
  if (fault == Fault::ib12) s += warn("transport/net_ib.cc:1696", ib_err(12));
  if (fault == Fault::ib4) s += warn("transport/net_ib.cc:1696", ib_err(4));
  if (fault == Fault::ib5) s += warn("transport/net_ib.cc:1696", ib_err(5));
  return s;
}

NcclLogAnalysis analyse(const std::string& text) {
  NcclLogAnalyzer a;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    a.add_line(std::string_view(text).substr(start, nl - start), "mem");
    start = nl + 1;
  }
  return a.finish();
}

// Eight ranks on two hosts; rank 5 gets the fault.
std::string job(Style style, Fault fault, int bad = 5) {
  std::string all;
  for (int r = 0; r < 8; ++r) all += rank_log(style, r < 4 ? "node1" : "node2", 1000 + r, r, 8, r == bad ? fault : Fault::none);
  return all;
}

const NcclProblem* problem(const std::vector<NcclProblem>& ps, const std::string& kind) {
  for (const auto& p : ps)
    if (p.kind == kind) return &p;
  return nullptr;
}

}  // namespace

TEST(NcclLine, ParsesEveryLevelAndPrefix) {
  auto l = parse_nccl_line("node1:1234:1290 [3] NCCL INFO Using network IB");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->host, "node1");
  EXPECT_EQ(l->pid, "1234");
  EXPECT_EQ(l->dev, "3");
  EXPECT_EQ(l->level, NcclLevel::info);
  EXPECT_EQ(l->msg, "Using network IB");
  l = parse_nccl_line("gpu-a.cluster:7:8 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->host, "gpu-a.cluster");
  EXPECT_EQ(l->where, "transport/net_ib.cc:1696");
  EXPECT_EQ(l->level, NcclLevel::warn);
  l = parse_nccl_line("n:1:2 [0] 1234.567890 ncclAllReduce:45 NCCL TRACE opCount 3\r");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->level, NcclLevel::trace);
  EXPECT_EQ(l->where, "ncclAllReduce:45");
  EXPECT_EQ(l->msg, "opCount 3");
  l = parse_nccl_line("[2026-11-21 10:00:00] [vm:3] n:1:2 [0] NCCL INFO x");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->host, "n");
  for (const char* bad : {"", "NCCL INFO x", "n:1:2 [0] hello", "n:x:2 [0] NCCL INFO a", "[0] NCCL INFO a",
                          "host:1:2 [0] NCCL DEBUG x", "\xff\xfe:1:2 [", ":1:2 [0] NCCL INFO x"})
    EXPECT_FALSE(parse_nccl_line(bad)) << bad;
}

TEST(NcclFacts, NetUsingIbAndSocket) {
  auto ib = net_using_of("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>");
  ASSERT_TRUE(ib);
  EXPECT_TRUE(ib->ib);
  ASSERT_EQ(ib->devices.size(), 2u);
  EXPECT_EQ(ib->devices[1].name, "mlx5_1");
  EXPECT_EQ(ib->devices[1].port, "1");
  EXPECT_EQ(ib->devices[1].link_layer, "RoCE");
  EXPECT_EQ(ib->oob, "eth0");
  auto sock = net_using_of("NET/Socket : Using [0]eth0:10.0.0.23<0> [1]eth1:10.0.1.23<0>");
  ASSERT_TRUE(sock);
  EXPECT_FALSE(sock->ib);
  EXPECT_EQ(sock->devices[1].name, "eth1");
  EXPECT_EQ(*channel_transport_of("Channel 01/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA"), "NET/IB/GDRDMA");
  EXPECT_EQ(*channel_transport_of("Channel 00 : 0[1b000] -> 1[1c000] via P2P/IPC"), "P2P/IPC");
  EXPECT_EQ(*ib_completion_error_of("NET/IB : Got completion from peer 1.2.3.4<5> with error 12, opcode 0"), 12);
  EXPECT_EQ(*ib_completion_error_of("NET/IB : Got completion from peer 1.2.3.4<5> with status=4 opcode=0"), 4);
  EXPECT_EQ(*net_plugin_of("NET/Plugin: Loaded net plugin AWS Libfabric (v8)"), "AWS Libfabric");
  auto ci = comm_init_of("ncclCommInitRankConfig comm 0x55 rank 3 nranks 16 cudaDev 3 nvmlDev 3 busId 1b000 commId 0x9f - Init COMPLETE");
  ASSERT_TRUE(ci);
  EXPECT_EQ(ci->rank, 3);
  EXPECT_EQ(ci->nranks, 16);
  EXPECT_EQ(ci->comm_id, "0x9f");
  EXPECT_FALSE(comm_init_of("comm 0x55 rank 17 nranks 16 - Init COMPLETE"));
}

class EveryVersion : public ::testing::TestWithParam<Style> {};

TEST_P(EveryVersion, HealthyJobIsClean) {
  auto a = analyse(job(GetParam(), Fault::none));
  auto ps = diagnose(a, {"node1", "node2"});
  ASSERT_EQ(a.processes.size(), 8u);
  EXPECT_TRUE(ps.empty()) << format_nccl_report(a, ps);
  EXPECT_EQ(nccl_log_exit_code(a, ps), 0);
  const auto& p = a.processes[5];
  EXPECT_EQ(p.label(), "node2:5");
  EXPECT_EQ(p.network, "IB");
  EXPECT_EQ(p.oob, "ib0");
  EXPECT_EQ(p.ib_devices.size(), 4u);
  EXPECT_EQ(p.transports.at("NET/IB/GDRDMA"), 1u);
  EXPECT_EQ(p.transports.at("SHM/direct/direct"), 1u);
  EXPECT_EQ(p.collectives.at("AllReduce"), 3u);
  std::string line = nccl_summary_line(a, ps);
  EXPECT_NE(line.find("NET/IB on 8/8 ranks (mlx5_0..3, IB), no problems"), std::string::npos) << line;
}

struct FaultCase {
  Fault fault;
  std::string kind;
  int exit_code;
  std::string who;  // a label that must be named ("" when the problem is job-wide)
};

TEST_P(EveryVersion, OneBadRankIsFoundAndNamed) {
  const FaultCase cases[] = {
      {Fault::socket, "socket-with-ib", 2, "node2:5"},     {Fault::socket_lo, "socket-bad-iface", 2, "node2:5"},
      {Fault::socket_lo, "oob-bad-iface", 2, "node2:5"},   {Fault::bond, "bond-hca", 1, "node2:5"},
      {Fault::plugin, "network-mismatch", 2, "node2:5"},   {Fault::ib12, "ib-error-12", 2, "node2:5"},
      {Fault::ib4, "ib-error-4", 2, "node2:5"},            {Fault::ib5, "ib-error-5", 1, "node2:5"},
      {Fault::shm, "shm", 2, "node2:5"},                   {Fault::reg_mr, "reg-mr", 2, "node2:5"},
      {Fault::p2p, "p2p-disabled", 1, "node2:5"},          {Fault::duplicate, "duplicate-gpu", 2, "node2:5"},
      {Fault::version, "version-mismatch", 2, "node2:5"},  {Fault::coll_mismatch, "collective-mismatch", 2, ""},
  };
  for (const auto& c : cases) {
    auto a = analyse(job(GetParam(), c.fault));
    auto ps = diagnose(a, {"node1", "node2"});
    const NcclProblem* p = problem(ps, c.kind);
    ASSERT_TRUE(p) << c.kind << "\n" << format_nccl_report(a, ps);
    EXPECT_FALSE(p->fix.empty());
    if (!c.who.empty()) {
      EXPECT_EQ(p->who, std::vector<std::string>{c.who}) << c.kind;
    }
    EXPECT_EQ(nccl_log_exit_code(a, ps), std::max(c.exit_code, a.warnings.empty() ? 0 : 1)) << c.kind;
    EXPECT_NE(nccl_summary_line(a, ps).find(p->message), std::string::npos) << nccl_summary_line(a, ps);
  }
}

TEST_P(EveryVersion, RankThatNeverFinishedInitIsNamed) {
  auto a = analyse(job(GetParam(), Fault::no_init));
  auto ps = diagnose(a, {});
  const NcclProblem* p = problem(ps, "init-incomplete");
  if (GetParam() == Style::v2_10) {
    // 2.10 logs no Init START: the rank is simply absent from the COMPLETE set.
    ASSERT_TRUE(p) << format_nccl_report(a, ps);
    EXPECT_EQ(p->message, "1 of 8 ranks never reached Init COMPLETE (no log at all from rank 5)");
  } else {
    ASSERT_TRUE(p);
    EXPECT_EQ(p->message, "1 of 8 ranks never reached Init COMPLETE");
    EXPECT_EQ(p->who, std::vector<std::string>{"node2:5"});
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, EveryVersion, ::testing::Values(Style::v2_10, Style::v2_18, Style::v2_21, Style::v2_28_ts));

TEST(NcclLog, MissingRankLogIsReported) {
  std::string all;
  for (int r = 0; r < 8; ++r)
    if (r != 6) all += rank_log(Style::v2_21, "n", 100 + r, r, 8);
  auto a = analyse(all);
  auto ps = diagnose(a, {});
  ASSERT_TRUE(problem(ps, "init-incomplete"));
  EXPECT_EQ(problem(ps, "init-incomplete")->message, "1 of 8 ranks never reached Init COMPLETE (no log at all from rank 6)");
}

TEST(NcclLog, SocketOnLoopbackAloneIsFineOnOneHost) {
  // One node, sockets on lo for bootstrap: normal for single-node jobs.
  std::string all;
  for (int r = 0; r < 2; ++r) {
    std::string t = "solo:" + std::to_string(10 + r) + ":1 [0] NCCL INFO ";
    all += t + "Bootstrap : Using lo:127.0.0.1<0>\n" + t + "NCCL version 2.21.5+cuda12.4\n";
  }
  auto a = analyse(all);
  EXPECT_FALSE(problem(diagnose(a, {}), "oob-bad-iface"));
}

TEST(NcclLog, CompressNames) {
  EXPECT_EQ(compress_names({"mlx5_3", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_1"}), "mlx5_0..3");
  EXPECT_EQ(compress_names({"mlx5_0", "mlx5_4"}), "mlx5_0, mlx5_4");
  EXPECT_EQ(compress_names({"eth0", "ib"}), "eth0, ib");
}

TEST(NcclLog, GarbageTruncationAndEmptyFilesDoNotCrash) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gpudiag-nccllog-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string good = job(Style::v2_21, Fault::none);
  std::ofstream(dir / "nccl.empty.log");
  std::ofstream(dir / "nccl.truncated.log") << good.substr(0, good.size() / 2 + 7);  // ends mid-line
  std::mt19937 rng(42);
  std::string junk(1 << 20, '\0');
  for (auto& c : junk) c = static_cast<char>(rng());
  std::ofstream(dir / "nccl.binary.log", std::ios::binary) << junk;
  std::string longline(300000, 'x');
  std::ofstream(dir / "nccl.long.log") << longline << "\nn:1:2 [0] NCCL INFO NCCL version 2.21.5\n" << longline;
  fs::create_directories(dir / "nccl.subdir.log");  // a directory with a log-like name
  NcclLogAnalyzer an;
  read_nccl_logs(an, {dir.string(), (dir / "missing.log").string()});
  auto a = an.finish();
  EXPECT_EQ(a.files.size(), 4u);
  ASSERT_EQ(a.read_errors.size(), 1u);
  EXPECT_NE(a.read_errors[0].find("missing.log: No such file or directory"), std::string::npos);
  auto ps = diagnose(a, {});
  EXPECT_NO_THROW(format_nccl_report(a, ps));
  EXPECT_NO_THROW(nccl_report_json_text(a, ps));
  bool found_long = false;
  for (const auto& p : a.processes) found_long |= p.host == "n" && p.version == "2.21.5";
  EXPECT_TRUE(found_long) << "the line after a 300 kB line was lost";
  // A byte budget stops early and says so.
  NcclLogAnalyzer limited;
  read_nccl_logs(limited, {dir.string()}, ReadLimits{1000, 65536});
  EXPECT_TRUE(limited.finish().truncated);
  fs::remove_all(dir);
}

// Found by fuzz_nccl_log: `gpudiag nccl-log --json` threw on the first byte that was
// not UTF-8 and printed no report at all.
TEST(NcclLogReport, JsonTextSurvivesBytesThatAreNotUtf8) {
  NcclLogAnalyzer an;
  an.add_line("node1:7:7 [0] NCCL INFO NCCL version 2.21.5\xff\x99", "a.log");
  an.add_line("node1:7:9 [0] x.cc:1 NCCL WARN bad \x99 byte", "a.log");
  auto a = an.finish();
  std::string text;
  ASSERT_NO_THROW(text = nccl_report_json_text(a, diagnose(a, {})));
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j.dump().find("\xff"), std::string::npos);
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos) << "bad bytes become U+FFFD";
}

// ---- A crippled network that still "works" (NCCL 2.21 wording throughout). ----
namespace {

struct RankSpec {
  std::string host;
  int rank;
  std::vector<std::string> net;  // the NET lines this rank logs, in order
  std::vector<std::string> channels = {"NET/IB/0/GDRDMA"};
};

std::string rank_lines(const RankSpec& r, int nranks) {
  int pid = 2000 + r.rank;
  std::string o = r.host + ":" + std::to_string(pid) + ":" + std::to_string(pid) + " [" + std::to_string(r.rank % 4) + "] NCCL INFO ";
  std::string t = r.host + ":" + std::to_string(pid) + ":" + std::to_string(pid + 40) + " [" + std::to_string(r.rank % 4) + "] NCCL INFO ";
  std::string init = "ncclCommInitRank comm 0x55d0" + std::to_string(r.rank) + " rank " + std::to_string(r.rank) + " nranks " +
                     std::to_string(nranks) + " cudaDev 0 nvmlDev 0 busId 18000 commId 0x6c7e1b41c2dc5f6c";
  std::string s = o + "Bootstrap : Using eth0:10.0.0." + std::to_string(r.rank) + "<0>\n";
  s += o + "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n";
  s += o + "NCCL version 2.21.5+cuda12.4\n";
  s += t + init + " - Init START\n";
  for (const auto& n : r.net) s += t + n + "\n";
  for (const auto& c : r.channels)
    s += t + "Channel 01/0 : " + std::to_string(r.rank) + "[0] -> " + std::to_string((r.rank + 1) % nranks) +
         "[0] [send] via " + c + "\n";
  s += t + init + " - Init COMPLETE\n";
  return s;
}

const std::vector<std::string> kIbNet = {
    "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>", "Using network IB"};

std::string four_ranks(const std::function<RankSpec(int)>& spec) {
  std::string all;
  for (int r = 0; r < 4; ++r) all += rank_lines(spec(r), 4);
  return all;
}

}  // namespace

TEST(NcclNetwork, HalfTheRanksOnSocketBesideIbIsAProblem) {
  auto a = analyse(four_ranks([](int r) {
    if (r < 2) return RankSpec{"gpu01", r, kIbNet};
    return RankSpec{"gpu02", r,
                    {"NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.1.12<0>", "Using network Socket"},
                    {"NET/Socket/0"}};
  }));
  // The judgement rests on the logs: no host is known to have IB.
  auto ps = diagnose(a, {});
  const NcclProblem* p = problem(ps, "socket-beside-ib");
  ASSERT_TRUE(p) << format_nccl_report(a, ps);
  EXPECT_EQ(p->message, "2 of 4 ranks used NET/Socket while the others used NET/IB");
  EXPECT_EQ(p->who, (std::vector<std::string>{"gpu02:2", "gpu02:3"}));
  EXPECT_FALSE(problem(ps, "network-mismatch")) << "one finding, not two, for the same fact";
  EXPECT_EQ(nccl_log_exit_code(a, ps), 2);
  EXPECT_NE(nccl_summary_line(a, ps).find("2 of 4 ranks used NET/Socket while the others used NET/IB on gpu02:2, gpu02:3"),
            std::string::npos)
      << nccl_summary_line(a, ps);
}

TEST(NcclNetwork, NetworkComesFromChannelsAndDevicesWithoutUsingNetworkLine) {
  // NCCL_DEBUG_SUBSYS without INIT's "Using network" line: the devices and channels
  // still say it.
  auto a = analyse(four_ranks([](int r) {
    if (r < 2) return RankSpec{"gpu01", r, {kIbNet[0]}};
    return RankSpec{"gpu02", r, {"NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.1.12<0>"}, {"NET/Socket/0"}};
  }));
  ASSERT_EQ(a.processes.size(), 4u);
  EXPECT_EQ(a.processes[0].network, "IB");
  EXPECT_EQ(a.processes[3].network, "Socket");
  EXPECT_TRUE(problem(diagnose(a, {}), "socket-beside-ib"));
}

TEST(NcclNetwork, GpuDirectRdmaDisabledEverywhereIsAWarning) {
  auto a = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r,
                    {"NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",
                     "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)", kIbNet[0], kIbNet[1]},
                    {"NET/IB/0", "NET/IB/1"}};
  }));
  auto ps = diagnose(a, {});
  const NcclProblem* p = problem(ps, "gdr-disabled");
  ASSERT_TRUE(p) << format_nccl_report(a, ps);
  EXPECT_EQ(p->severity, Severity::warning);
  EXPECT_EQ(p->who.size(), 4u);
  EXPECT_NE(p->fix.find("modprobe nvidia-peermem"), std::string::npos);
  EXPECT_NE(p->fix.find("mlx5_0, mlx5_1"), std::string::npos);
  EXPECT_EQ(nccl_log_exit_code(a, ps), 1);
  EXPECT_NE(format_nccl_report(a, ps).find("result: warnings"), std::string::npos);
}

TEST(NcclNetwork, GpuDirectRdmaThroughDmaBufIsNotFlagged) {
  // peermem absent, but the channels show GDRDMA (NCCL 2.19+ over DMA-BUF).
  auto a = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r,
                    {"NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)", kIbNet[0], kIbNet[1]}};
  }));
  EXPECT_FALSE(problem(diagnose(a, {}), "gdr-disabled"));
}

TEST(NcclNetwork, IbDisabledOverIpoibIsAProblem) {
  auto a = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r,
                    {"NCCL_IB_DISABLE set by environment to 1.", "NET/Socket : Using [0]ib0:10.1.0." + std::to_string(r) + "<0>",
                     "Using network Socket"},
                    {"NET/Socket/0"}};
  }));
  auto ps = diagnose(a, {});
  const NcclProblem* p = problem(ps, "ib-disabled-on-ipoib");
  ASSERT_TRUE(p) << format_nccl_report(a, ps);
  EXPECT_NE(p->message.find("IPoIB (ib0)"), std::string::npos) << p->message;
  EXPECT_EQ(p->who.size(), 4u);
  EXPECT_EQ(nccl_log_exit_code(a, ps), 2);
  // IB disabled on an Ethernet-only cluster is a choice, not a fault.
  auto eth = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r,
                    {"NCCL_IB_DISABLE set by environment to 1", "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket"},
                    {"NET/Socket/0"}};
  }));
  EXPECT_EQ(nccl_log_exit_code(eth, diagnose(eth, {})), 0) << format_nccl_report(eth, diagnose(eth, {}));
}

TEST(NcclNetwork, SocketPluginOnHostsWithIbIsAProblem) {
  auto a = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r, {kIbNet[0], "Using network FastSocket"}, {"NET/FastSocket/0"}};
  }));
  auto ps = diagnose(a, {});
  const NcclProblem* p = problem(ps, "plugin-beside-ib");
  ASSERT_TRUE(p) << format_nccl_report(a, ps);
  EXPECT_EQ(p->message, "NCCL used the net plugin FastSocket on hosts whose logs show IB devices");
  EXPECT_EQ(p->who.size(), 4u);
  EXPECT_EQ(nccl_log_exit_code(a, ps), 2);
  // An IB plugin (SHARP's IBext) on the same hosts is what IB hosts should run.
  auto ibext = analyse(four_ranks([](int r) {
    return RankSpec{r < 2 ? "gpu01" : "gpu02", r, {kIbNet[0], "Using network IBext_v8"}};
  }));
  EXPECT_FALSE(problem(diagnose(ibext, {}), "plugin-beside-ib"));
}

TEST(NcclNetwork, LocalHostIbCountsOnlyWhereTheLogIsSilent) {
  auto socket_only = [](std::vector<std::string> net) {
    return analyse(four_ranks([&](int r) { return RankSpec{r < 2 ? "gpu01" : "gpu02", r, net, {"NET/Socket/0"}}; }));
  };
  auto silent = socket_only({"NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket"});
  EXPECT_TRUE(problem(diagnose(silent, {"gpu01"}), "socket-with-ib"));
  EXPECT_FALSE(problem(diagnose(silent, {}), "socket-with-ib"));
  auto said = socket_only({"NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.0.1<0>", "Using network Socket"});
  EXPECT_FALSE(problem(diagnose(said, {"gpu01"}), "socket-with-ib"));
}

TEST(NcclVersion, BareVersionLineGivesTheVersion) {
  EXPECT_EQ(*bare_nccl_version_of("NCCL version 2.21.5+cuda12.4"), "2.21.5");
  EXPECT_EQ(*bare_nccl_version_of("[gpu01:3] NCCL version 2.18.5+cuda12.2\r"), "2.18.5");
  EXPECT_FALSE(bare_nccl_version_of("MYNCCL version 2"));
  // NCCL_DEBUG=VERSION: the file holds this one line; its name says who wrote it.
  NcclLogAnalyzer an;
  an.add_line("NCCL version 2.21.5+cuda12.4", "/diag/nccl.gpu01.4242.log");
  // NCCL_DEBUG=WARN: the bare line, then WARN lines with their origin.
  an.add_line("NCCL version 2.18.5+cuda12.2", "/diag/nccl.gpu02.77.log");
  an.add_line("", "/diag/nccl.gpu02.77.log");
  an.add_line("gpu02:77:90 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<40000> "
              "with status=12 opcode=0 len=0 vendor err 129 (Recv)",
              "/diag/nccl.gpu02.77.log");
  auto a = an.finish();
  ASSERT_EQ(a.processes.size(), 2u);
  std::map<std::string, std::string> v;
  for (const auto& p : a.processes) v[p.host + ":" + p.pid] = p.version;
  EXPECT_EQ(v["gpu01:4242"], "2.21.5");
  EXPECT_EQ(v["gpu02:77"], "2.18.5");
  auto ps = diagnose(a, {});
  EXPECT_TRUE(problem(ps, "version-mismatch")) << format_nccl_report(a, ps);
}

TEST(NcclLog, NothingReadIsUnknownNeverClean) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gpudiag-nccllog-empty-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  NcclLogAnalyzer empty_dir;
  read_nccl_logs(empty_dir, {dir.string()});
  auto a = empty_dir.finish();
  EXPECT_EQ(nccl_log_exit_code(a, diagnose(a, {})), kNcclLogUnknown);
  EXPECT_NE(format_nccl_report(a, {}).find("result: unknown (no log file could be read)"), std::string::npos);
  EXPECT_EQ(nccl_report_json(a, {})["status"], "unknown");
  std::ofstream(dir / "nccl.a.log") << "hello, no NCCL here\n";
  NcclLogAnalyzer no_nccl;
  read_nccl_logs(no_nccl, {dir.string()});
  auto b = no_nccl.finish();
  EXPECT_EQ(nccl_log_exit_code(b, diagnose(b, {})), kNcclLogUnknown);
  EXPECT_NE(format_nccl_report(b, {}).find("result: unknown (no NCCL line in what was read)"), std::string::npos);
  fs::remove_all(dir);
}

// Issue 30: DEL and C1 controls reached the terminal through --json (the serializer
// escapes only C0). The warning text is cleaned by the analyzer; a file's name is not.
TEST(NcclLogReport, JsonTextEscapesDelAndC1) {
  const std::string file = "run\x7f\xc2\x9b" "2J\xc2\x85\x1b.log";
  NcclLogAnalyzer an;
  an.add_line("node1:7:7 [0] NCCL INFO NCCL version 2.21.5", file);
  an.add_line("node1:7:9 [0] x.cc:1 NCCL WARN bad \x7f del \xc2\x9b" "2J csi", file);
  auto a = an.finish();
  const std::string text = nccl_report_json_text(a, diagnose(a, {}));
  for (std::size_t i = 0; i < text.size(); ++i)
    ASSERT_TRUE(control_length(text, i) == 0 || text[i] == '\n') << "a control byte at " << i << ": " << text;
  EXPECT_NE(text.find("run\\u007f\\u009b2J\\u0085\\u001b.log"), std::string::npos) << text;
  // The same string once parsed: the escapes only change how it is written.
  auto j = nlohmann::json::parse(text);
  ASSERT_EQ(j["processes"].size(), 1u) << text;
  EXPECT_EQ(j["processes"][0].value("source", ""), file);
}

// srun's summary (issue: adversary2 B1): a dir opened once as an fd, and only the job
// owner's regular files in it; a planted link, another user's log and a FIFO are skipped
// without blocking or a word.
TEST(NcclLogReader, DirFdReadsOnlyTheOwnersRegularFiles) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("gpudiag-nccllog-fd-" + std::to_string(::getpid()));
  fs::path outside = dir.string() + "-outside.log";
  fs::create_directories(dir);
  std::ofstream(dir / "nccl.mine.1.log") << "mine:1:1 [0] NCCL INFO NCCL version 2.21.5\n";
  std::ofstream(outside) << "evil:2:2 [0] NCCL INFO NCCL version 9.9.9-LINK\n";
  fs::create_symlink(outside, dir / "nccl.link.2.log");
  std::ofstream(dir / "nccl.theirs.3.log") << "theirs:3:3 [0] NCCL INFO NCCL version 9.9.9-THEIRS\n";
  if (::getuid() == 0) {
    ASSERT_EQ(::chown((dir / "nccl.theirs.3.log").c_str(), 65534, 65534), 0);
  }
  ASSERT_EQ(::mkfifo((dir / "nccl.fifo.4.log").c_str(), 0600), 0);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_TRUE(has_nccl_logs(dfd));
  NcclLogAnalyzer an;
  read_nccl_logs_in_dir(an, dfd, dir.string(), ::getuid());
  auto a = an.finish();
  ASSERT_EQ(a.processes.size(), ::getuid() == 0 ? 1u : 2u);
  EXPECT_EQ(a.processes[0].host, "mine");
  for (const auto& p : a.processes) EXPECT_NE(p.version, "9.9.9-LINK");
  EXPECT_TRUE(a.read_errors.empty());
  // The fd is still the caller's, and a second reader sees the dir from its start.
  NcclLogAnalyzer other;
  read_nccl_logs_in_dir(other, dfd, dir.string(), ::getuid() + 12345);
  EXPECT_TRUE(other.finish().processes.empty()) << "another owner's files were read";
  EXPECT_TRUE(has_nccl_logs(dfd));
  ::close(dfd);
  fs::remove_all(dir);
  fs::remove(outside);
}

// adversary2 B3: a log naming a new process and a new warning on every line costs the
// caps, not memory per line, and the summary says a cap was hit.
TEST(NcclLogAnalyzer, CapsProcessesAndWarningTexts) {
  NcclLogAnalyzer an;
  const std::size_t n = kMaxProcesses + 100;
  for (std::size_t i = 0; i < n; ++i) {
    std::string line = "h" + std::to_string(i) + ":" + std::to_string(i) + ":1 [0] NCCL WARN w" + std::to_string(i);
    an.add_line(line, "x.log");
  }
  auto a = an.finish();
  EXPECT_EQ(a.processes.size(), kMaxProcesses);
  EXPECT_EQ(a.process_lines_dropped, 100u);
  EXPECT_EQ(a.warnings.size(), kMaxWarnGroups);
  EXPECT_EQ(a.warn_groups_dropped, kMaxProcesses - kMaxWarnGroups);
  auto ps = diagnose(a, {});
  std::string line = nccl_summary_line(a, ps);
  EXPECT_NE(line.find("caps hit: 65536 processes kept, 100 lines of others not read"), std::string::npos) << line;
  EXPECT_NE(line.find("200 WARN texts kept"), std::string::npos) << line;
  EXPECT_NE(format_nccl_report(a, ps).find("100 lines of processes beyond the first 65536"), std::string::npos);
  EXPECT_EQ(nccl_report_json(a, ps)["process_lines_dropped"], 100);
}
