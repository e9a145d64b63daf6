// The output relay, for real: a forked process runs start_relay and execs a shell
// command in the child, as slurmstepd would exec the user program.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "spank/relay/output_relay.h"
#include "tests/unit/slurp.h"
#include "tests/unit/spank/relay/watched_plan.h"
#include "spank/watchdog/hang_watchdog.h"  // kHangExitCode: the relay runs the watchdog

using namespace gpudiag;
using gpudiag::test::slurp;
using gpudiag::test::watch_hangs;

namespace {

struct Relayed {
  std::string out, err;
  int status = 0;
  bool stuck = false;  // still running after max_s: killed
  double took = 0;     // seconds
};

// Runs `script` under a relay whose own stdout/stderr are files; `before_exec` runs in
// the program's process, `with_relay` in the test's once the relay is up.
// `mount_ns`: an fd of a mount namespace the task (relay and program) runs in.
Relayed run_relayed(const std::string& script, RelayPlan plan, void (*with_relay)(pid_t) = nullptr,
                    double max_s = 120, int mount_ns = -1) {
  const auto start = std::chrono::steady_clock::now();
  char out_path[] = "/tmp/gpudiag-relay-out-XXXXXX";
  char err_path[] = "/tmp/gpudiag-relay-err-XXXXXX";
  int out_fd = ::mkstemp(out_path);
  int err_fd = ::mkstemp(err_path);
  int ready[2];
  EXPECT_EQ(::pipe(ready), 0);
  pid_t task = ::fork();
  if (task == 0) {
    if (mount_ns >= 0 && ::setns(mount_ns, CLONE_NEWNS) != 0) ::_exit(98);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::close(ready[0]);
    if (auto e = start_relay(plan)) {
      ::dprintf(2, "start_relay: %s\n", e->c_str());
      ::_exit(99);
    }
    ::close(ready[1]);  // tells the test that the relay is running
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(ready[1]);
  char b;
  while (::read(ready[0], &b, 1) > 0) {
  }
  ::close(ready[0]);
  if (with_relay) with_relay(task);
  Relayed r;
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (::waitpid(task, &r.status, WNOHANG) == 0) {
    if (elapsed() > max_s) {
      r.stuck = true;
      ::kill(task, SIGKILL);  // the program dies with it (PR_SET_PDEATHSIG)
      ::waitpid(task, &r.status, 0);
      break;
    }
    ::usleep(20 * 1000);
  }
  r.took = elapsed();
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  ::close(out_fd);
  ::close(err_fd);
  ::unlink(out_path);
  ::unlink(err_path);
  return r;
}

RelayPlan both(const std::string& tag = "[h:0]") {
  RelayPlan p;
  p.tag = tag;
  p.out = p.err = true;
  return p;
}

// A relay with the hang watchdog on, in fresh state and diag dirs under /tmp.
struct Watched {
  std::string root, diag, state;
  RelayPlan plan;
  explicit Watched(double hang_s) {
    char tmpl[] = "/tmp/gpudiag-watch-XXXXXX";
    root = ::mkdtemp(tmpl);
    diag = root + "/diag";
    state = root + "/state";
    ::mkdir(diag.c_str(), 0755);
    plan = both();
    watch_hangs(plan, hang_s, state, diag);
  }
  ~Watched() { std::system(("rm -rf '" + root + "'").c_str()); }
};

// A small ext4 image, loop-mounted in a private mount namespace (held by a `sleep`
// started with unshare), that the test can freeze: a write there then waits in the
// kernel, uninterruptibly, as on a hung NFS mount. Thawed in every case: by the test,
// and by a detached `sleep; fsfreeze -u` should the test die while it is frozen.
struct FrozenFs {
  std::string root, img, mnt, problem;
  pid_t holder = -1, thawer = -1;
  int ns_fd = -1;
  bool frozen = false;

  static pid_t spawn(const std::vector<std::string>& argv, bool own_session = false) {
    pid_t pid = ::fork();
    if (pid == 0) {
      if (own_session) ::setsid();
      int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 0);
      ::dup2(null, 1);
      ::dup2(null, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      ::_exit(127);
    }
    return pid;
  }
  static int run(const std::vector<std::string>& argv) {
    int status = 0;
    const pid_t pid = spawn(argv);
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }
  std::vector<std::string> in_ns(std::vector<std::string> argv) const {
    argv.insert(argv.begin(), {"nsenter", "-t", std::to_string(holder), "-m"});
    return argv;
  }
  static std::string ns_of(const std::string& pid) {
    char buf[64] = {};
    ::readlink(("/proc/" + pid + "/ns/mnt").c_str(), buf, sizeof buf - 1);
    return buf;
  }

  FrozenFs() {
    char tmpl[] = "/tmp/gpudiag-frozen-XXXXXX";
    root = ::mkdtemp(tmpl);
    img = root + "/fs.img";
    mnt = root + "/mnt";
    ::mkdir(mnt.c_str(), 0700);
    std::ofstream(img).close();
    if (::truncate(img.c_str(), 16 << 20) != 0 || run({"mkfs.ext4", "-q", "-F", img}) != 0) {
      problem = "cannot make an ext4 image";
      return;
    }
    holder = spawn({"unshare", "--mount", "--propagation", "private", "sleep", "infinity"});
    for (int i = 0; i < 500 && ns_of(std::to_string(holder)) == ns_of("self"); ++i) ::usleep(10000);
    ns_fd = ::open(("/proc/" + std::to_string(holder) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0 || ns_of(std::to_string(holder)) == ns_of("self") ||
        run(in_ns({"mount", "-o", "loop", img, mnt})) != 0 || run(in_ns({"mkdir", "-m", "0700", mnt + "/diag"})) != 0)
      problem = "cannot loop-mount an ext4 image in a private mount namespace";
  }
  bool freeze() {
    thawer = spawn(in_ns({"sh", "-c", "sleep 90; fsfreeze -u " + mnt}), true);
    frozen = run(in_ns({"fsfreeze", "-f", mnt})) == 0;
    return frozen;
  }
  void thaw() {
    if (frozen) run(in_ns({"fsfreeze", "-u", mnt}));
    frozen = false;
  }
  ~FrozenFs() {
    thaw();
    if (thawer > 0) {
      ::kill(-thawer, SIGKILL);
      ::waitpid(thawer, nullptr, 0);
    }
    if (holder > 0) {
      run(in_ns({"umount", "-l", mnt}));
      ::kill(holder, SIGKILL);
      ::waitpid(holder, nullptr, 0);
    }
    if (ns_fd >= 0) ::close(ns_fd);
    std::system(("rm -rf '" + root + "'").c_str());
  }
};

bool have_tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin/", "/usr/bin/", "/sbin/", "/bin/"})
    if (::access((dir + name).c_str(), X_OK) == 0) return true;
  return false;
}

std::string report_named_in(const std::string& err) {
  auto at = err.find("stacks in ");
  if (at == std::string::npos) return "";
  at += 10;
  return err.substr(at, err.find(';', at) - at);
}

}  // namespace

TEST(OutputRelay, TagsStdoutAndStderrSeparately) {
  auto r = run_relayed("echo out1; echo err1 >&2; printf 'out2'; printf 'err2' >&2", both());
  EXPECT_EQ(r.out, "[h:0] out1\n[h:0]+out2\n");
  EXPECT_EQ(r.err, "[h:0] err1\n[h:0]+err2\n");
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
}

TEST(OutputRelay, OnlyTheChosenStream) {
  RelayPlan p = both();
  p.err = false;
  auto r = run_relayed("echo o; echo e >&2", p);
  EXPECT_EQ(r.out, "[h:0] o\n");
  EXPECT_EQ(r.err, "e\n");
}

TEST(OutputRelay, MirrorsTheExitCode) {
  auto r = run_relayed("echo bye; exit 3", both());
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 3);
  EXPECT_EQ(r.out, "[h:0] bye\n");
}

TEST(OutputRelay, MirrorsDeathBySignal) {
  for (int sig : {SIGKILL, SIGSEGV, SIGTERM}) {
    auto r = run_relayed("echo before; kill -" + std::to_string(sig) + " $$", both());
    ASSERT_TRUE(WIFSIGNALED(r.status)) << sig;
    EXPECT_EQ(WTERMSIG(r.status), sig);
    EXPECT_FALSE(WCOREDUMP(r.status)) << "the relay leaves no core";
    EXPECT_EQ(r.out, "[h:0] before\n");
  }
}

TEST(OutputRelay, ForwardsASignalSentToItAlone) {
  // The program waits for SIGUSR1; the test sends it to the relay (the task pid).
  auto r = run_relayed("trap 'echo got-usr1; exit 7' USR1; echo waiting; while :; do sleep 0.05; done", both(),
                       [](pid_t relay) {
                         ::usleep(300 * 1000);
                         // Not from the relay's parent: that stands for slurmstepd,
                         // whose signals reach the program directly.
                         pid_t sender = ::fork();
                         if (sender == 0) ::_exit(::kill(relay, SIGUSR1) == 0 ? 0 : 1);
                         ::waitpid(sender, nullptr, 0);
                       });
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_EQ(r.out, "[h:0] waiting\n[h:0] got-usr1\n");
}

TEST(OutputRelay, LosesNoByteUnderLoad) {
  // 200,000 lines on each stream at once, and a 1 MiB line with no final newline.
  auto r = run_relayed(
      "seq 1 200000 & seq 1 200000 >&2 & wait; head -c 1048576 /dev/zero | tr '\\0' x", both("[h:5]"));
  std::string expected;
  for (int i = 1; i <= 200000; ++i) expected += std::to_string(i) + "\n";
  EXPECT_EQ(strip_prefixes(r.err, "[h:5]"), expected);
  EXPECT_EQ(strip_prefixes(r.out, "[h:5]"), expected + std::string(1048576, 'x'));
}

namespace {

long g_hwm_grown_kb = -1;

long hwm_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

long written(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/io");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("wchar:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

}  // namespace

TEST(OutputRelay, HoldsNoMoreThanItsBudgetWhateverOneReadTagsInto) {
  // Issue 30.3 in a watched step's relay: 64 KiB of bare newlines in one write, and a
  // long tag (an admin's prefix_format may expand to a few hundred bytes). Tagged, one
  // read of it is 13 MB; the relay reads no more than fits kRelayStreamBudget.
  const std::string tag = "[" + std::string(200, 'h') + ":0]";
  g_hwm_grown_kb = -1;
  auto r = run_relayed("sleep 0.3; /usr/bin/python3 -c 'import os; os.write(1, bytes([10]) * 65536)'; sleep 1",
                       both(tag), [](pid_t relay) {
                         const long before = hwm_kb(relay);
                         // Until the relay wrote every tagged line (the program then sleeps).
                         const long want = 65536L * 206;
                         for (int i = 0; i < 2000 && written(relay) < want; ++i) ::usleep(10 * 1000);
                         g_hwm_grown_kb = hwm_kb(relay) - before;
                       });
  EXPECT_EQ(strip_prefixes(r.out, tag), std::string(65536, '\n'));
  ASSERT_GE(g_hwm_grown_kb, 0);
  EXPECT_LT(g_hwm_grown_kb, 1024) << "the relay's peak memory grew by " << g_hwm_grown_kb << " kB";
}

TEST(OutputRelay, DoesNotWaitForeverForAGrandchildHoldingThePipe) {
  // The program exits while a background child keeps stdout open for 20 s.
  auto start = ::time(nullptr);
  auto r = run_relayed("sleep 20 & echo done", both());
  EXPECT_LT(::time(nullptr) - start, 15);
  EXPECT_EQ(r.out, "[h:0] done\n");
  EXPECT_TRUE(WIFEXITED(r.status));
}

TEST(HangWatchdog, KeepsWatchingAProgramThatClosedStdoutAndStderr) {
  // Both pipes reach EOF at once; the program itself goes on, silent, for 30 s.
  Watched w(1);
  auto r = run_relayed("exec sleep 30 >/dev/null 2>&1", w.plan, nullptr, 25);
  EXPECT_FALSE(r.stuck);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), kHangExitCode) << r.err;
  EXPECT_LT(r.took, 20) << r.err;
  EXPECT_NE(r.err.find("gpudiag: no output for 1s on h; stacks in " + w.diag + "/hang.h.txt"), std::string::npos)
      << r.err;
}

TEST(HangWatchdog, SigkillsAProgramWithClosedPipesThatIgnoresSigterm) {
  Watched w(1);
  auto r = run_relayed("trap '' TERM; exec sleep 30 >/dev/null 2>&1", w.plan, nullptr, 25);
  EXPECT_FALSE(r.stuck);
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), kHangExitCode) << r.err;
}

TEST(HangWatchdog, AFifoAtTheReportPathNeitherBlocksNorGetsTheReport) {
  Watched w(1);
  const std::string fifo = w.diag + "/hang.h.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  auto r = run_relayed("sleep 30", w.plan, nullptr, 25);
  EXPECT_FALSE(r.stuck) << "the relay blocked opening the FIFO";
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), kHangExitCode) << r.err;
  struct stat st;
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  const std::string report = report_named_in(r.err);
  ASSERT_EQ(report.rfind(w.diag + "/hang.h.", 0), 0u) << r.err;
  EXPECT_NE(report, fifo);
  ASSERT_EQ(::lstat(report.c_str(), &st), 0) << r.err;
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_NE(slurp(report).find("gpudiag hang report: step 1.0 on h"), std::string::npos);
}

TEST(HangWatchdog, ALinkAtTheReportPathIsNotFollowed) {
  Watched w(1);
  const std::string target = w.root + "/precious";
  { std::ofstream(target) << "keep me\n"; }
  ASSERT_EQ(::symlink(target.c_str(), (w.diag + "/hang.h.txt").c_str()), 0);
  auto r = run_relayed("sleep 30", w.plan, nullptr, 25);
  EXPECT_FALSE(r.stuck);
  EXPECT_EQ(WEXITSTATUS(r.status), kHangExitCode) << r.err;
  EXPECT_EQ(slurp(target), "keep me\n");
  const std::string report = report_named_in(r.err);
  EXPECT_NE(report, w.diag + "/hang.h.txt") << r.err;
  EXPECT_NE(slurp(report).find("gpudiag hang report"), std::string::npos) << r.err;
}

TEST(HangWatchdog, ADiagDirThatDoesNotAnswerDoesNotHoldBackTheKill) {
  // Issue 30 leftover: the diag dir on a filesystem that does not answer (frozen here,
  // as a hung NFS mount). Before, the relay waited in the report's create until the
  // thaw, and the SIGTERM with it.
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a mount namespace, a loop mount, fsfreeze";
  for (const char* t : {"unshare", "nsenter", "mkfs.ext4", "fsfreeze", "mount"})
    if (!have_tool(t)) GTEST_SKIP() << "no " << t;
  FrozenFs fs;
  ASSERT_EQ(fs.problem, "");
  Watched w(1);
  const std::string diag = fs.mnt + "/diag";
  w.plan.hang.diag_dir = diag;
  w.plan.hang.diag_dir_timeout_s = 1;
  ASSERT_TRUE(fs.freeze());
  auto r = run_relayed("sleep 30", w.plan, nullptr, 25, fs.ns_fd);
  fs.thaw();
  EXPECT_FALSE(r.stuck) << "the relay waited for the frozen diag dir: " << r.err;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
  EXPECT_EQ(WEXITSTATUS(r.status), kHangExitCode) << r.err;
  EXPECT_NE(r.err.find("gpudiag: the diag dir " + diag +
                       " gave no answer within 1 s (a hung NFS mount or a frozen filesystem?); the hang report follows "
                       "on stderr\ngpudiag hang report: step 1.0 on h, no output from any task for 1s"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("gpudiag: no output for 1s on h; stacks in stderr; ending step (exit code 200)"),
            std::string::npos)
      << r.err;
}

// The relay's parent stands for slurmstepd. Under proctrack/cgroup its signals reach
// only the relay, which passes them on; elsewhere they reach the program directly, and
// the relay leaves them alone. The program counts SIGUSR1 and ends on SIGTERM, which a
// stranger sends (always forwarded) once the parent's SIGUSR1 has had time to arrive.
Relayed parent_sends_usr1(bool forward_stepd_signals) {
  RelayPlan plan = both();
  plan.forward_stepd_signals = forward_stepd_signals;
  return run_relayed("trap 'echo got-usr1' USR1; trap 'exit 7' TERM; echo waiting; while :; do sleep 0.05; done",
                     plan, [](pid_t relay) {
                       ::usleep(300 * 1000);
                       ::kill(relay, SIGUSR1);
                       ::usleep(300 * 1000);
                       pid_t sender = ::fork();
                       if (sender == 0) ::_exit(::kill(relay, SIGTERM) == 0 ? 0 : 1);
                       ::waitpid(sender, nullptr, 0);
                     });
}

TEST(OutputRelay, PassesSlurmstepdsSignalOnWhenItReachesTheRelayAlone) {
  auto r = parent_sends_usr1(true);
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_EQ(r.out, "[h:0] waiting\n[h:0] got-usr1\n");
}

TEST(OutputRelay, LeavesSlurmstepdsSignalAloneWhenItReachesTheProgramToo) {
  auto r = parent_sends_usr1(false);
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_EQ(r.out, "[h:0] waiting\n");
}

// Under proctrack/cgroup (and pgid) slurmstepd's signal reaches the relay: one whose
// default is to end or stop a process must reach the program instead, never end the relay.
TEST(OutputRelay, SignalsThatWouldEndTheRelayReachTheProgram) {
  RelayPlan plan = both();
  plan.forward_stepd_signals = true;
  const int rt = SIGRTMIN + 3;
  const std::string script = "trap 'echo got-alrm' ALRM; trap 'echo got-tstp' TSTP; trap 'echo got-rt' " +
                             std::to_string(rt) + "; trap 'exit 7' TERM; echo waiting; while :; do sleep 0.05; done";
  auto r = run_relayed(script, plan, [](pid_t relay) {
    for (int sig : {SIGALRM, SIGTSTP, SIGRTMIN + 3}) {
      ::usleep(300 * 1000);
      ::kill(relay, sig);
    }
    ::usleep(300 * 1000);
    ::kill(relay, SIGTERM);
  });
  ASSERT_TRUE(WIFEXITED(r.status)) << r.status;
  EXPECT_EQ(WEXITSTATUS(r.status), 7);
  EXPECT_EQ(r.out, "[h:0] waiting\n[h:0] got-alrm\n[h:0] got-tstp\n[h:0] got-rt\n");
}
