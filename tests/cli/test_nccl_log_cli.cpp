// `gpudiag nccl-log` end to end: the real command over logs in NCCL's own line format,
// one --diag dir per case, judged by exit code, result line and --json.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>

#include "run_process.h"

namespace fs = std::filesystem;

namespace {

const std::string kBin = GPUDIAG_BIN;

// What one NCCL 2.21 rank writes to NCCL_DEBUG_FILE=nccl.%h.%p.log, with its NET lines.
std::string rank_log(const std::string& host, int rank, const std::vector<std::string>& net,
                     const std::string& channel) {
  const std::string pid = std::to_string(3000 + rank);
  const std::string o = host + ":" + pid + ":" + pid + " [" + std::to_string(rank % 2) + "] NCCL INFO ";
  const std::string t = host + ":" + pid + ":" + std::to_string(3100 + rank) + " [" + std::to_string(rank % 2) + "] NCCL INFO ";
  const std::string init = "ncclCommInitRank comm 0x55d0" + std::to_string(rank) + " rank " + std::to_string(rank) +
                           " nranks 4 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6c7e1b41c2dc5f6c";
  std::string s = o + "Bootstrap : Using eth0:10.0.0." + std::to_string(rank) + "<0>\n" + o +
                  "NCCL version 2.21.5+cuda12.4\n" + t + init + " - Init START\n";
  for (const auto& n : net) s += t + n + "\n";
  s += t + "Channel 00/0 : " + std::to_string(rank) + "[0] -> " + std::to_string((rank + 1) % 4) + "[0] [send] via " +
       channel + "\n";
  s += t + init + " - Init COMPLETE\n";
  return s;
}

class NcclLogCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-nccllog-cli-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Four ranks on two hosts, each in its own file as --diag writes them.
  void write_job(const std::function<std::pair<std::vector<std::string>, std::string>(int)>& net) {
    for (int r = 0; r < 4; ++r) {
      std::string host = r < 2 ? "gpu01" : "gpu02";
      auto [lines, channel] = net(r);
      std::ofstream(dir_ + "/nccl." + host + "." + std::to_string(3000 + r) + ".log") << rank_log(host, r, lines, channel);
    }
  }
  ProcessResult run(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {kBin, "nccl-log", dir_};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  }
  std::vector<std::string> kinds() {
    auto r = run({"--json"});
    std::vector<std::string> out;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& p : j["problems"]) out.push_back(p["kind"].get<std::string>());
    return out;
  }
  std::string dir_;
};

const std::vector<std::string> kIb = {"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>",
                                      "Using network IB"};

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST_F(NcclLogCli, HealthyIbJobIsClean) {
  write_job([](int) { return std::make_pair(kIb, std::string("NET/IB/0/GDRDMA")); });
  auto r = run();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("result: clean"), std::string::npos) << r.out;
}

TEST_F(NcclLogCli, SocketRanksBesideIbRanks) {
  write_job([](int r) {
    if (r < 2) return std::make_pair(kIb, std::string("NET/IB/0/GDRDMA"));
    return std::make_pair(std::vector<std::string>{"NET/IB : No device found.", "NET/Socket : Using [0]eth0:10.0.1.12<0>",
                                                   "Using network Socket"},
                          std::string("NET/Socket/0"));
  });
  auto r = run();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.out.find("2 of 4 ranks used NET/Socket while the others used NET/IB (gpu02:2, gpu02:3)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("result: problems found"), std::string::npos);
  EXPECT_TRUE(has(kinds(), "socket-beside-ib"));
}

TEST_F(NcclLogCli, GpuDirectRdmaDisabled) {
  write_job([](int) {
    std::vector<std::string> net = {"NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)",
                                    "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)"};
    net.insert(net.end(), kIb.begin(), kIb.end());
    return std::make_pair(net, std::string("NET/IB/0"));
  });
  auto r = run();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("result: warnings"), std::string::npos) << r.out;
  EXPECT_TRUE(has(kinds(), "gdr-disabled"));
}

TEST_F(NcclLogCli, IbDisabledOverIpoib) {
  write_job([](int r) {
    return std::make_pair(std::vector<std::string>{"NCCL_IB_DISABLE set by environment to 1.",
                                                   "NET/Socket : Using [0]ib0:10.1.0." + std::to_string(r) + "<0>",
                                                   "Using network Socket"},
                          std::string("NET/Socket/0"));
  });
  auto r = run();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(has(kinds(), "ib-disabled-on-ipoib"));
}

TEST_F(NcclLogCli, SocketPluginOnIbHosts) {
  write_job([](int) {
    return std::make_pair(std::vector<std::string>{kIb[0], "Using network FastSocket"}, std::string("NET/FastSocket/0"));
  });
  auto r = run();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(has(kinds(), "plugin-beside-ib"));
}

TEST_F(NcclLogCli, BareVersionLinesAtWarnLevel) {
  std::ofstream(dir_ + "/nccl.gpu01.3000.log") << "NCCL version 2.21.5+cuda12.4\n";
  std::ofstream(dir_ + "/nccl.gpu02.3001.log") << "NCCL version 2.18.5+cuda12.2\n";
  auto r = run({"--json"});
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["processes"].size(), 2u) << r.out;
  EXPECT_EQ(j["processes"][0]["version"], "2.21.5");
  EXPECT_EQ(j["processes"][1]["version"], "2.18.5");
  EXPECT_EQ(r.exit_code, 2) << "versions differ";
}

TEST_F(NcclLogCli, NothingReadableIsNeverClean) {
  auto r = run();  // an empty dir
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_EQ(r.out.find("result: clean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: unknown"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("gpudiag: nccl-log: no log file could be read in " + dir_), std::string::npos) << r.err;
  auto j = nlohmann::json::parse(run({"--json"}).out);
  EXPECT_EQ(j["status"], "unknown");
  // Paths that are there but cannot be read as logs: a FIFO (never opened, so nothing
  // blocks) and a dangling link.
  ASSERT_EQ(::mkfifo((dir_ + "/nccl.fifo.log").c_str(), 0600), 0);
  fs::create_symlink(dir_ + "/gone", dir_ + "/nccl.dangling.log");
  auto unreadable = run_process({kBin, "nccl-log", dir_ + "/nccl.fifo.log", dir_ + "/nccl.dangling.log"});
  EXPECT_EQ(unreadable.exit_code, 3) << unreadable.out << unreadable.err;
  EXPECT_EQ(unreadable.out.find("result: clean"), std::string::npos) << unreadable.out;
  EXPECT_NE(unreadable.err.find("gpudiag: nccl-log: cannot read " + dir_ + "/nccl.fifo.log: not a regular file"),
            std::string::npos)
      << unreadable.err;
  EXPECT_NE(unreadable.err.find("gpudiag: nccl-log: cannot read " + dir_ + "/nccl.dangling.log: No such file"),
            std::string::npos)
      << unreadable.err;
  std::ofstream(dir_ + "/train.log") << "epoch 1 loss 0.5\n";
  auto no_nccl = run_process({kBin, "nccl-log", dir_ + "/train.log"});
  EXPECT_EQ(no_nccl.exit_code, 3) << no_nccl.out;
  EXPECT_NE(no_nccl.out.find("result: unknown (no NCCL line in what was read)"), std::string::npos) << no_nccl.out;
  EXPECT_NE(no_nccl.err.find("gpudiag: nccl-log: read 1 file(s)"), std::string::npos) << no_nccl.err;
}

}  // namespace

// Issue 30: a log file's name is anyone's bytes. With DEL and C1 controls in it, --json
// printed them raw (the serializer escapes only C0), and they reached the terminal.
TEST_F(NcclLogCli, JsonWritesDelAndC1AsEscapes) {
  write_job([](int) { return std::pair<std::vector<std::string>, std::string>{{"NET/IB : No device found."}, "NET/Socket/0"}; });
  const std::string name = "nccl.gpu03.77.log\x7f\xc2\x9b" "2J\xc2\x85";
  std::ofstream(dir_ + "/" + name) << rank_log("gpu03", 3, {}, "NET/Socket/0");
  auto r = run({"--json"});
  for (std::size_t i = 0; i < r.out.size(); ++i) {
    const auto c = static_cast<unsigned char>(r.out[i]);
    ASSERT_FALSE(c == 0x7f || (c == 0xc2 && i + 1 < r.out.size() && (static_cast<unsigned char>(r.out[i + 1]) & 0xe0) == 0x80))
        << "a control byte at " << i << ": " << r.out;
  }
  EXPECT_NE(r.out.find("nccl.gpu03.77.log\\u007f\\u009b2J\\u0085"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(r.out);
  bool listed = false;
  for (const auto& f : j["files"]) listed |= f.get<std::string>() == dir_ + "/" + name;
  EXPECT_TRUE(listed) << j["files"].dump();
}

namespace {

// A log that real NCCL (2.28.3, CUDA 13.0) wrote on an H100 through the probe's all_reduce
// with NCCL_DEBUG=INFO (tests/data/nccl/): the parser's formats checked against the thing
// itself, not only against lines written from NCCL's source.
TEST(NcclLogRealNccl, OneRankOnAnH100IsReadInFull) {
  auto r = run_process({kBin, "nccl-log", "--json", std::string(GPUDIAG_TEST_DATA) + "/nccl/h100-nccl-2.28.3-one-rank.log"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j.value("status", ""), "clean") << r.out;
  EXPECT_EQ(j.value("lines", 0), j.value("nccl_lines", -1)) << r.out;
  ASSERT_EQ(j["processes"].size(), 1u) << r.out;
  const auto& p = j["processes"][0];
  EXPECT_EQ(p.value("version", ""), "2.28.3") << p.dump();
  EXPECT_EQ(p.value("network", ""), "Socket") << p.dump();
  EXPECT_EQ(p.value("oob", ""), "eth0") << p.dump();
  EXPECT_EQ(p.value("init", ""), "COMPLETE") << p.dump();
  EXPECT_EQ(p.value("nranks", 0), 1) << p.dump();
}

}  // namespace
