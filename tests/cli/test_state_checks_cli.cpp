// xid, ibcounters, --state-dir and --output through the real gpudiag-health, on
// copies of the fixture trees that the tests change between runs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "run_process.h"

namespace {

namespace fs = std::filesystem;
const std::string kBin = GPUDIAG_HEALTH_BIN;
const std::string kFixtures = GPUDIAG_FIXTURES_DIR;
const std::string kSiteConfig = GPUDIAG_SOURCE_DIR "/etc/gpudiag.yaml";

class StateChecks : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpudiag-cli-state-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp = tmpl;
    state = tmp + "/state";
  }
  void TearDown() override { fs::remove_all(tmp); }

  // A private copy of a fixture, to change between runs.
  std::string copy(const std::string& variant) {
    const std::string to = tmp + "/" + variant;
    fs::copy(kFixtures + "/" + variant, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    return to;
  }
  ProcessResult run(const std::string& root, std::vector<std::string> extra) {
    std::vector<std::string> argv = {kBin, "--fs-root", root, "--config", kSiteConfig, "--node", "gpu-node-01"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  }
  static void write(const std::string& path, const std::string& text, bool append = false) {
    std::ofstream f(path, append ? std::ios::app : std::ios::trunc);
    f << text;
  }
  static std::string slurp(const std::string& p) {
    std::ifstream f(p);
    return {std::istreambuf_iterator<char>(f), {}};
  }
  std::string tmp, state;
};

nlohmann::json finding(const std::string& json_text, const std::string& check, const std::string& subject) {
  auto report = nlohmann::json::parse(json_text);
  for (const auto& c : report["checks"])
    if (c["name"] == check)
      for (const auto& f : c["findings"])
        if (f["subject"] == subject) return f;
  return nullptr;
}

std::string summary(const std::string& json_text, const std::string& check) {
  const auto report = nlohmann::json::parse(json_text);
  for (const auto& c : report["checks"])
    if (c["name"] == check) return c["summary"];
  return "";
}

TEST_F(StateChecks, Xid79IsCriticalAndNamesTheGpu) {
  auto r = run(kFixtures + "/xid-79", {"--checks", "xid", "--format", "json"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  auto f = finding(r.out, "xid", "0000:94:00");
  ASSERT_FALSE(f.is_null()) << r.out;
  EXPECT_EQ(f["status"], "critical");
  EXPECT_NE(f["message"].get<std::string>().find("GPU 0000:94:00: Xid 79, GPU has fallen off the bus"),
            std::string::npos);
  EXPECT_NE(f["hint"].get<std::string>().find("reboot"), std::string::npos);
  // The application fault on another GPU is there, as a note.
  EXPECT_EQ(finding(r.out, "xid", "0000:13:00")["status"], "ok");
  // --quick includes it, and the headline says it.
  auto q = run(kFixtures + "/xid-79", {"--quick", "--format", "nhc"});
  EXPECT_EQ(q.exit_code, 2);
  EXPECT_NE(q.out.find("Xid 79"), std::string::npos) << q.out;
}

TEST_F(StateChecks, ApplicationFaultsAndGarbageLeaveTheNodeOk) {
  auto r = run(kFixtures + "/xid-13", {"--checks", "xid", "--format", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(finding(r.out, "xid", "0000:33:00")["hint"].get<std::string>().find("job's own fault"), std::string::npos);
  EXPECT_NE(summary(r.out, "xid").find("2 Xid event(s) on 1 GPU(s) since boot"), std::string::npos) << r.out;
  auto g = run(kFixtures + "/kmsg-garbage", {"--checks", "xid", "--format", "json"});
  EXPECT_EQ(g.exit_code, 0) << g.out << g.err;
  EXPECT_NE(finding(g.out, "xid", "kmsg")["message"].get<std::string>().find("not kmsg records"), std::string::npos)
      << g.out;
  EXPECT_EQ(run(kFixtures + "/healthy", {"--checks", "xid"}).exit_code, 0);
}

TEST_F(StateChecks, XidIsReportedOnceThenOnlyNewOnesUntilAReboot) {
  const std::string root = copy("xid-79");
  auto first = run(root, {"--checks", "xid", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(first.exit_code, 2);
  struct stat st;
  ASSERT_EQ(::stat((state + "/gpu-node-01.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // Nothing new, but Xid 79 needs a reboot: held, so --resume keeps the node drained.
  auto second = run(root, {"--checks", "xid", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(second.exit_code, 2) << second.out;
  EXPECT_EQ(summary(second.out, "xid"), "no Xid since the last run; 1 earlier one(s) held until reboot");
  EXPECT_NE(finding(second.out, "xid", "0000:94:00")["message"].get<std::string>().find("held until the node reboots"),
            std::string::npos);

  write(root + "/dev/kmsg", "4,40,9000000,-;NVRM: Xid (PCI:0000:b3:00): 48, pid=1, name=x, DBE (0x1,0x2)\n", true);
  auto third = run(root, {"--checks", "xid", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(third.exit_code, 2);
  EXPECT_EQ(summary(third.out, "xid"),
            "1 Xid event(s) on 1 GPU(s) since the last run; 1 earlier one(s) held until reboot");
  EXPECT_NE(finding(third.out, "xid", "0000:b3:00")["message"].get<std::string>().find("double-bit ECC"),
            std::string::npos);

  // The node rebooted: a new boot id and a new kernel log.
  write(root + "/proc/sys/kernel/random/boot_id", "11111111-2222-3333-4444-555555555555\n");
  write(root + "/dev/kmsg", "6,0,0,-;Linux version 6.1.0-28-amd64\n");
  auto rebooted = run(root, {"--checks", "xid", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(rebooted.exit_code, 0) << rebooted.out;
  EXPECT_EQ(summary(rebooted.out, "xid"), "no Xid since boot (the node rebooted since the last run)");
}

TEST_F(StateChecks, IbCountersBaselineThenGrowthThenFlap) {
  const std::string root = copy("healthy");
  auto first = run(root, {"--checks", "ibcounters", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_EQ(summary(first.out, "ibcounters"), "baseline recorded for 8 ports");  // mlx5_bond_0 is not in ib.hcas

  const std::string port = root + "/sys/class/infiniband/mlx5_2/ports/1/counters/";
  write(fs::canonical(port + "symbol_error").string(), "50\n");
  auto grew = run(root, {"--checks", "ibcounters", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(grew.exit_code, 1) << grew.out;
  auto f = finding(grew.out, "ibcounters", "mlx5_2:1");
  EXPECT_EQ(f["status"], "warning");
  EXPECT_NE(f["message"].get<std::string>().find("symbol_error grew by 50 since the last run (0 -> 50)"),
            std::string::npos)
      << f;

  write(fs::canonical(port + "link_downed").string(), "6\n");
  auto flap = run(root, {"--checks", "ibcounters", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(flap.exit_code, 2) << flap.out;
  EXPECT_NE(finding(flap.out, "ibcounters", "mlx5_2:1")["message"].get<std::string>().find("flapped"),
            std::string::npos);

  // The counters were cleared (perfquery -R): a note, and a new baseline.
  write(fs::canonical(port + "symbol_error").string(), "0\n");
  write(fs::canonical(port + "link_downed").string(), "0\n");
  auto reset = run(root, {"--checks", "ibcounters", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(reset.exit_code, 0) << reset.out;
  EXPECT_NE(finding(reset.out, "ibcounters", "mlx5_2:1")["message"].get<std::string>().find("baseline recorded again"),
            std::string::npos);
}

TEST_F(StateChecks, WithoutStateDirAFixtureKeepsNoState) {
  const std::string root = copy("healthy");
  for (int i = 0; i < 2; ++i) {
    auto r = run(root, {"--checks", "ibcounters", "--format", "json"});
    EXPECT_EQ(r.exit_code, 0);
    // Nothing is kept, so nothing is called a baseline (the demo's sick node said so).
    EXPECT_EQ(summary(r.out, "ibcounters"), "8 ports read; nothing kept to compare the next run with");
  }
  EXPECT_FALSE(fs::exists(state));
}

TEST_F(StateChecks, GarbageStateIsANoteNotAFailure) {
  fs::create_directory(state);
  fs::permissions(state, fs::perms::owner_all);
  write(state + "/gpu-node-01.json", "\x7f" "ELF garbage {{{");
  auto r = run(kFixtures + "/xid-79", {"--checks", "xid,ibcounters", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(finding(r.out, "xid", "run-state")["message"].get<std::string>().find("treated as no previous run"),
            std::string::npos)
      << r.out;
  // ... and the next run has a good file again.
  auto again = run(kFixtures + "/xid-79", {"--checks", "xid", "--state-dir", state, "--format", "json"});
  EXPECT_EQ(summary(again.out, "xid"), "no Xid since the last run; 1 earlier one(s) held until reboot") << again.out;
  EXPECT_EQ(run(kFixtures + "/healthy", {"--checks", "xid", "--state-dir", "relative/dir"}).exit_code, 3);
}

TEST_F(StateChecks, OutputIsWrittenAtomicallyForNodeExporter) {
  const std::string prom = tmp + "/gpudiag.prom";
  auto r = run(kFixtures + "/healthy", {"--quick", "--format", "prometheus", "--output", prom});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string text = slurp(prom);
  struct stat st;
  ASSERT_EQ(::stat(prom.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  for (const char* line : {"gpudiag_status 0\n", "gpudiag_check_status{check=\"xid\"} 0\n",
                           "gpudiag_check_status{check=\"ibcounters\"} 0\n",
                           "gpudiag_ib_port_rate_gbps{hca=\"mlx5_0\",port=\"1\"} 400\n",
                           "gpudiag_ib_port_state{hca=\"mlx5_0\",port=\"1\"} 4\n",
                           "gpudiag_ib_port_counter{hca=\"mlx5_3\",port=\"1\",counter=\"link_downed\"} 1\n",
                           "# TYPE gpudiag_last_run_timestamp_seconds gauge\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp), fs::directory_iterator()), 1);  // no temp file left
}

// A failed --output is UNKNOWN (3), but never hides a CRITICAL (2): whoever can squat the
// name or fill its filesystem must not turn a sick node's code into 3 (adversary review, B4).
TEST_F(StateChecks, OutputThatCannotBeWrittenIsUnknownButKeepsACriticalAndTheReportStillComes) {
  const std::string victim = tmp + "/victim";
  write(victim, "precious");
  ASSERT_EQ(::symlink(victim.c_str(), (tmp + "/link.prom").c_str()), 0);
  auto r = run(kFixtures + "/port-down", {"--checks", "ib", "--format", "nhc", "--output", tmp + "/link.prom"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("gpudiag: cannot write " + tmp + "/link.prom: it is a symlink"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("mlx5_3 port 1 is DOWN"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(victim), "precious");
  auto missing = run(kFixtures + "/healthy", {"--checks", "ib", "--output", tmp + "/no/such/dir/x.prom"});
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_NE(missing.err.find("no/such/dir"), std::string::npos) << missing.err;
}

// This machine's own /dev/kmsg: read as root, and refused to a user while
// kernel.dmesg_restrict=1 (UNKNOWN with the fix, never OK).
TEST_F(StateChecks, TheRealKernelLog) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to read /dev/kmsg";
  auto r = run_process({kBin, "--checks", "xid", "--state-dir", state, "--node", "n", "--format", "json"});
  ASSERT_NE(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(summary(r.out, "xid").find("since boot"), std::string::npos) << r.out;
  auto again = run_process({kBin, "--checks", "xid", "--state-dir", state, "--node", "n", "--format", "json"});
  EXPECT_NE(summary(again.out, "xid").find("since the last run"), std::string::npos) << again.out;

  if (slurp("/proc/sys/kernel/dmesg_restrict") != "1\n") GTEST_SKIP() << "kernel.dmesg_restrict is not 1";
  auto user = run_process({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", kBin, "--checks",
                           "xid", "--state-dir", tmp + "/user-state", "--format", "json"});
  EXPECT_EQ(user.exit_code, 3) << user.out << user.err;
  auto f = finding(user.out, "xid", "kmsg");
  ASSERT_FALSE(f.is_null()) << user.out;
  EXPECT_NE(f["hint"].get<std::string>().find("run gpudiag-health as root"), std::string::npos) << f;
}

}  // namespace
