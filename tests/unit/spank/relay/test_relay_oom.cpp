// Both relays out of memory (the node's relay thread in slurmstepd, the relay process of a
// watched task): a binary of its own, because it replaces operator new, so that every
// allocation outside the test's own thread fails while the test says so.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "spank/relay/line_prefixer.h"
#include "spank/relay/node_relay.h"
#include "spank/relay/node_relay_wire.h"
#include "spank/relay/output_relay.h"
#include "tests/unit/spank/relay/watched_plan.h"

namespace {
std::atomic<bool> g_out_of_memory{false};
thread_local bool t_test_thread = false;  // the test's own allocations never fail
thread_local bool t_fail_here = false;    // this thread's allocations fail (adversary 11's fuzz)
}  // namespace

// Whatever this binary allocates goes through these two (malloc and free), sanitizers too.
void* operator new(std::size_t n) {
  if ((g_out_of_memory.load() && !t_test_thread) || t_fail_here) throw std::bad_alloc();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// gcc takes these for a free() of what a new-expression returned: here it is malloc's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

using namespace gpudiag;

namespace {

// A task of `relay` (local id `local_id`, tag [h:local_id]) whose streams in `plan` (by
// default stdout alone) go to `dest_w`, running `script` under /bin/sh.
RelayPlan plan_for(int local_id, bool err = false) {
  RelayPlan plan;
  plan.tag = "[h:" + std::to_string(local_id) + "]";
  plan.out = true;
  plan.err = err;
  return plan;
}
pid_t hand_over_and_exec(NodeRelay& relay, int dest_w, int local_id, const char* script,
                         const RelayPlan& plan) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (plan.out) ::dup2(dest_w, 1);
    if (plan.err) ::dup2(dest_w, 2);
    if (hand_to_node_relay(relay.task_socket(), plan, local_id)) ::_exit(99);
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}
pid_t hand_over_and_exec(NodeRelay& relay, int dest_w, int local_id, const char* script) {
  return hand_over_and_exec(relay, dest_w, local_id, script, plan_for(local_id));
}

// A task under a relay process (start_relay; the task is the relay, its child the
// program) with stdout to `out_w`, running `script`; memory runs out in the relay
// `after_ms` after it starts.
pid_t relayed_task_out_of_memory_after(int after_ms, int out_w, const RelayPlan& plan, const char* script) {
  const pid_t task = ::fork();
  if (task == 0) {
    t_test_thread = false;
    ::dup2(out_w, 1);
    std::thread([after_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(after_ms));
      g_out_of_memory = true;
    }).detach();
    if (start_relay(plan)) ::_exit(99);  // the relay never returns; the program does
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return task;
}

// Every line whole: stdout's 200 digits, tagged or (once its tagging too ran out of
// memory) not, stderr's line, or the relay's notice; nothing else. And none lost: stdout's
// lines are 0, 1, ... `count` - 1, in order.
void expect_whole_lines(const std::string& got, const std::string& tag, long count) {
  std::size_t pos = 0, lines = 0;
  long next = 0;
  while (pos < got.size()) {
    std::size_t nl = got.find('\n', pos);
    ASSERT_NE(nl, std::string::npos) << "the output ends inside a line";
    std::string line = got.substr(pos, nl - pos);
    pos = nl + 1;
    ++lines;
    if (line + "\n" == kUntaggedNotice || line == "late" ||
        line == tag + "late")
      continue;
    if (line.rfind(tag, 0) == 0) line.erase(0, tag.size());
    EXPECT_TRUE(line.size() == 200 && line.find_first_not_of("0123456789") == std::string::npos)
        << "line " << lines << " is not whole (" << line.size() << " bytes): " << line.substr(0, 40) << " ... "
        << line.substr(line.size() > 40 ? line.size() - 40 : 0);
    if (line.size() == 200) {
      EXPECT_EQ(std::atol(line.c_str()), next++) << "line " << lines;
    }
  }
  EXPECT_EQ(next, count) << "stdout's lines lost";
}

}  // namespace

// Under `srun -o FIFO` a task's stdout and stderr share one destination. stdout's chunk is
// half written there (srun's reader is slow) when stderr's line comes and its tagging runs
// out of memory: that line goes out untagged, after the rest of stdout's chunk and never
// inside it (adversary review 10, low).
TEST(NodeRelayOutOfMemory, TheUntaggedBytesWaitForAnotherStreamsHalfWrittenChunk) {
  t_test_thread = true;
  for (int round = 0; round < 3; ++round) {
    NodeRelay relay;
    ASSERT_FALSE(relay.start());
    int shared[2];
    ASSERT_EQ(::pipe2(shared, O_CLOEXEC), 0);
    // 80 KB of stdout (more than the shared pipe holds, less than it, the thread and the
    // task's own pipe hold together, so the task goes on), then stderr's line while the
    // thread still holds the rest of a chunk. The line waits for the test's word (a file),
    // given once memory is out: a line that came before would be tagged, as it should be
    // (a timed wait lost that race on a loaded CI machine).
    char dir[] = "/tmp/gpudiag-oom-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    const std::string go = std::string(dir) + "/go";
    const std::string script = "i=0; while [ $i -lt 400 ]; do printf '%0200d\\n' $i; i=$((i+1)); done; "
                               "while [ ! -e " + go + " ]; do sleep 0.01; done; echo late >&2";
    const pid_t pid = hand_over_and_exec(relay, shared[1], 7, script.c_str(), plan_for(7, true));
    ::close(shared[1]);
    ::usleep(200 * 1000);  // nobody reads: the pipe fills and a chunk stays half written
    g_out_of_memory = true;
    const int go_fd = ::open(go.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    ASSERT_GE(go_fd, 0);
    ::close(go_fd);
    std::string got;
    char buf[4096];
    ::usleep(400 * 1000);  // stderr's line comes and cannot be tagged
    for (;;) {
      const ssize_t n = ::read(shared[0], buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<std::size_t>(n));
    }
    g_out_of_memory = false;
    ::close(shared[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    EXPECT_NE(got.find(kUntaggedNotice), std::string::npos) << "the thread never ran out of memory";
    EXPECT_NE(got.find("\nlate\n"), std::string::npos) << "stderr's line was lost";
    expect_whole_lines(got, "[h:7] ", 400);
    relay.stop();
    ::unlink(go.c_str());
    ::rmdir(dir);
  }
}

// The relay process of a watched task (the task itself, forked from slurmstepd) out of
// memory while it tags: the stream goes on untagged after the notice, the partial line the
// tagging held first, and every byte of the program's output arrives, in order.
TEST(OutputRelayOutOfMemory, TheStreamGoesOnUntaggedAndLosesNoByte) {
  t_test_thread = true;
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  // Memory runs out once the program has written its first lines and a partial one; then
  // one write of the line's rest and 300 more lines: tagging them needs more room.
  const pid_t task = relayed_task_out_of_memory_after(
      300, out[1], plan_for(0),
      "i=0; while [ $i -lt 10 ]; do printf '%0200d\\n' $i; i=$((i+1)); done; printf partial; sleep 0.6; "
      "s=$(i=10; while [ $i -lt 310 ]; do printf '%0200d\\n' $i; i=$((i+1)); done); printf 'rest\\n%s\\n' \"$s\"");
  ::close(out[1]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(task, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // What the program wrote, from what arrived: the tags off the lines before the notice,
  // the notice off, the rest as it is.
  const std::size_t at = got.find(kUntaggedNotice);
  ASSERT_NE(at, std::string::npos) << "the relay never ran out of memory: " << got.substr(0, 300);
  EXPECT_EQ(got.find(kUntaggedNotice, at + 1), std::string::npos) << "the notice came twice";
  std::string program = strip_prefixes(std::string_view(got).substr(0, at), "[h:0]");
  program += got.substr(at + kUntaggedNotice.size());
  std::string expected;
  char line[202];
  for (int i = 0; i < 310; ++i) {
    std::snprintf(line, sizeof line, "%0200d\n", i);
    expected += line;
    if (i == 9) expected += "partialrest\n";
  }
  EXPECT_EQ(program.size(), expected.size());
  EXPECT_TRUE(program == expected) << "bytes lost or changed";
}

// ---- adversary review 11 ----

namespace {

std::string read_to_eof(int fd) {
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<std::size_t>(n));
  return got;
}

// What the program wrote, from what arrived on one tagged stream: tags off before the
// notice, the notice off, the rest as it is.
std::string program_bytes(const std::string& got, const std::string& tag) {
  const std::size_t at = got.find(kUntaggedNotice);
  if (at == std::string::npos) return strip_prefixes(got, tag);
  return strip_prefixes(std::string_view(got).substr(0, at), tag) + got.substr(at + kUntaggedNotice.size());
}

double mono_now() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

}  // namespace

// Out of memory, an allocation of the node thread's loop outside the tagging (here the
// std::set of reaped tasks when slurmstepd reports another task's exit; equally a handoff's
// Stream, the poll vectors growing for it, holders_) escapes Loop::run: every stream of the
// step is closed at once. The partial line the tagging held is lost, and the program's
// next write gets EPIPE (SIGPIPE kills it).
TEST(NodeRelayOutOfMemory, Adv11_AnAllocationOutsideTheTaggingLosesNoByte) {
  t_test_thread = true;
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int dest[2];
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
  const pid_t pid = hand_over_and_exec(relay, dest[1], 0, "printf 'one\\nhead'; sleep 1; printf 'tail\\n'");
  ::close(dest[1]);
  ::usleep(300 * 1000);  // "head" is held by the tagging
  g_out_of_memory = true;
  relay.task_exited(7);  // another task of the node ends
  ::usleep(200 * 1000);
  g_out_of_memory = false;
  const std::string got = read_to_eof(dest[0]);
  ::close(dest[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  relay.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the program died: " << (WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "?");
  EXPECT_EQ(program_bytes(got, "[h:0]"), "one\nheadtail\n") << "arrived: " << got;
}

// A stream relayed untagged by plan (tag_out false: its lines are not tagged at all) that
// runs out of memory gets the notice "passing output through untagged" written into its
// bytes, in the middle of the program's line when the bytes before ended inside one.
TEST(NodeRelayOutOfMemory, Adv11_AnUntaggedStreamGetsNoNoticeInsideItsLine) {
  t_test_thread = true;
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int dest[2];
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
  RelayPlan plan = plan_for(0);
  plan.tag_out = false;
  const pid_t pid = hand_over_and_exec(relay, dest[1], 0, "printf 'abc'; sleep 0.5; printf 'def%040d\\n' 0", plan);
  ::close(dest[1]);
  ::usleep(250 * 1000);  // "abc" is out
  g_out_of_memory = true;
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::usleep(100 * 1000);
  g_out_of_memory = false;
  const std::string got = read_to_eof(dest[0]);
  ::close(dest[0]);
  relay.stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(got, "abcdef" + std::string(40, '0') + "\n");  // more than a short string holds inline
}

// At stop slurmstepd waits for the thread (NodeRelay::stop joins it). Without memory
// trouble the final drain writes what srun takes now and drops the rest; out of memory,
// pass_raw writes each read with write_now, waiting for srun (wait_writable) as long as it
// takes something every 5 s: up to kFinalReadMax per stream, at srun's pace.
TEST(NodeRelayOutOfMemory, Adv11_StopDoesNotWaitForASlowSrunOutOfMemory) {
  t_test_thread = true;
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int dest[2];
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
  const pid_t pid = hand_over_and_exec(relay, dest[1], 0, "exec yes 0123456789");
  ::close(dest[1]);
  // srun, slow: 64 KB every half second.
  std::thread reader([fd = dest[0]] {
    t_test_thread = true;
    static char buf[65536];
    while (::read(fd, buf, sizeof buf) > 0) ::usleep(500 * 1000);
  });
  ::usleep(300 * 1000);
  g_out_of_memory = std::getenv("ADV11_BASELINE") == nullptr;  // set: the same stop with memory
  ::usleep(300 * 1000);
  const double t0 = mono_now();
  relay.stop();
  const double took = mono_now() - t0;
  g_out_of_memory = false;
  reader.join();
  ::close(dest[0]);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_LT(took, 3.0) << "slurmstepd's stop waited for the relay thread";
}

// LinePrefixer's claim: feed and finish allocate nothing once `out` has room for
// max_output(n) (max_output(0) for finish), and append no more than that; any bytes, any
// tag and max_line a handoff allows. Allocations fail in this thread while they run.
TEST(LinePrefixerOutOfMemory, Adv11_FeedAndFinishAllocateNothingWithinMaxOutput) {
  t_test_thread = true;
  std::mt19937 rng(11);
  auto pick = [&rng](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
  for (int round = 0; round < 3000; ++round) {
    std::string tag(pick(0, 256), 'T');
    for (char& c : tag) c = static_cast<char>('A' + pick(0, 25));
    const std::size_t max_line = pick(0, 3) == 0 ? pick(16, 80) : pick(16, 4096);
    LinePrefixer lines(tag, max_line);
    std::string input, out;
    for (int chunk = 0; chunk < 12; ++chunk) {
      std::string data;
      const std::size_t n = pick(0, 3) == 0 ? pick(0, 3) : pick(0, 3 * 4096);
      const int mode = static_cast<int>(pick(0, 4));
      for (std::size_t k = 0; k < n; ++k) {
        char c;
        switch (mode) {
          case 0: c = '\n'; break;
          case 1: c = 'x'; break;
          case 2: c = pick(0, 1) ? '\0' : '\n'; break;
          case 3: c = pick(0, 200) == 0 ? '\n' : static_cast<char>(pick(0, 255)); break;
          default: c = static_cast<char>(pick(0, 255)); break;
        }
        data.push_back(c);
      }
      input += data;
      std::string piece;
      const std::size_t bound = lines.max_output(data.size());
      piece.reserve(bound);
      t_fail_here = true;
      bool threw = false;
      try {
        lines.feed(data, piece);
        lines.held();
      } catch (...) {
        threw = true;
      }
      t_fail_here = false;
      ASSERT_FALSE(threw) << "feed allocated: round " << round << " tag " << tag.size() << " max_line " << max_line
                          << " n " << data.size();
      ASSERT_LE(piece.size(), bound) << "round " << round;
      ASSERT_LE(lines.held(), lines.max_payload());
      out += piece;
    }
    std::string last;
    const std::size_t bound = lines.max_output(0);
    last.reserve(bound);
    t_fail_here = true;
    bool threw = false;
    try {
      lines.finish(last);
    } catch (...) {
      threw = true;
    }
    t_fail_here = false;
    ASSERT_FALSE(threw) << "finish allocated: round " << round;
    ASSERT_LE(last.size(), bound);
    out += last;
    // Every line whole, within max_line (where a handoff's max_line leaves room), and exact.
    for (std::size_t pos = 0; pos < out.size();) {
      const std::size_t nl = out.find('\n', pos);
      ASSERT_NE(nl, std::string::npos);
      ASSERT_EQ(out.compare(pos, tag.size(), tag), 0) << "round " << round;
      ASSERT_TRUE(out[pos + tag.size()] == ' ' || out[pos + tag.size()] == '+');
      if (max_line >= tag.size() + 2 + 64) {
        ASSERT_LE(nl + 1 - pos, max_line) << "round " << round;
      }
      pos = nl + 1;
    }
    ASSERT_TRUE(strip_prefixes(out, tag) == input) << "round " << round;
  }
}

// The task's relay with the hang watchdog on: out of memory, the watchdog's tick (its
// process table, its vectors) throws out of relay(), and start_relay's catch falls back to
// passthrough, which neither writes the partial line the tagging held nor the notice on
// the stream that goes on untagged (only on stderr).
TEST(OutputRelayOutOfMemory, Adv11_TheWatchdogRunningOutOfMemoryLosesNoByte) {
  t_test_thread = true;
  char tmpl[] = "/tmp/gpudiag-adv11-XXXXXX";
  const std::string root = ::mkdtemp(tmpl);
  const std::string diag = root + "/diag", state = root + "/state";
  ::mkdir(diag.c_str(), 0755);
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  RelayPlan plan = plan_for(0);
  gpudiag::test::watch_hangs(plan, 60, state, diag);
  const pid_t task =
      relayed_task_out_of_memory_after(300, out[1], plan, "printf 'one\\nhead'; sleep 2.5; printf 'tail\\n'");
  ::close(out[1]);
  const std::string got = read_to_eof(out[0]);
  ::close(out[0]);
  int status = 0;
  ::waitpid(task, &status, 0);
  std::system(("rm -rf '" + root + "'").c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(program_bytes(got, "[h:0]"), "one\nheadtail\n") << "arrived: " << got;
}

// ---- adversary review 12 ----

namespace {

int open_fd_count() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d)) ++n;
    ::closedir(d);
  }
  return n;
}

// srun taking what a destination holds for `ms`, then no more.
void take_for(int fd, int ms, std::string* got = nullptr) {
  const double end = mono_now() + ms / 1000.0;
  char buf[65536];
  const int fl = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  while (mono_now() < end) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0 && got) got->append(buf, static_cast<std::size_t>(n));
    if (n <= 0) ::usleep(1000);
  }
  ::fcntl(fd, F_SETFL, fl);
}


}  // namespace

// slurm_spank_task_exit (task_exited) and then slurm_spank_exit (stop) write their words
// into the control pipe while the thread is busy (here: waiting in pass_raw for srun), so
// one read in read_control takes both. The task's word comes first; out of memory its
// ended_.insert throws, the stop word read with it is gone, and Loop::run's fallback
// (pass_all_raw) waits for a stop word that never comes again: NodeRelay::stop joins
// the thread for ever, and slurmstepd hangs in slurm_spank_exit.
TEST(NodeRelayOutOfMemory, Adv12_AStopWordReadBesideAFailingTaskExitStillStopsTheThread) {
  t_test_thread = true;
  auto* relay = new NodeRelay;  // left behind if its thread never stops
  ASSERT_FALSE(relay->start());
  int dest[2];
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
  const pid_t pid = hand_over_and_exec(*relay, dest[1], 0, "exec yes 0123456789");
  ::close(dest[1]);
  ::usleep(300 * 1000);  // srun takes nothing: the destination is full, a chunk pending
  g_out_of_memory = true;
  std::string got;
  take_for(dest[0], 300, &got);  // the thread reads again, cannot tag, passes raw, then waits
  ::usleep(200 * 1000);
  ASSERT_NE(got.find(kUntaggedNotice), std::string::npos) << "the thread never ran out of memory";
  relay->task_exited(0);
  std::atomic<bool> stopped{false};
  std::thread([relay, &stopped] {
    t_test_thread = true;
    relay->stop();
    stopped = true;
  }).detach();
  std::thread srun([fd = dest[0]] {  // srun takes everything again: the thread goes on
    t_test_thread = true;
    static char buf[65536];
    while (::read(fd, buf, sizeof buf) > 0) {
    }
  });
  const double t0 = mono_now();
  while (!stopped && mono_now() - t0 < 12.0) ::usleep(10 * 1000);
  const double took = mono_now() - t0;
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  srun.join();  // the stream ends with its program either way
  g_out_of_memory = false;
  EXPECT_TRUE(stopped) << "NodeRelay::stop still waits for the thread after " << took << " s";
  if (stopped) {
    delete relay;
    ::close(dest[0]);
  }
}

// A handoff that arrives while slurmstepd is out of memory: receive() copies the fds into
// a std::vector (or accept() builds the Stream, the holders_ slot), which throws with the
// fds the message carried still open and not closed by anyone: the task waits 5 s for
// an answer whose write end slurmstepd leaked, and slurmstepd keeps a copy of Slurm's
// stdout (and the task's pipe) for ever, so Slurm's own reader never sees that EOF.
TEST(NodeRelayOutOfMemory, Adv12_AHandoffThatFailsOutOfMemoryIsRefusedAtOnceAndLeavesNoFd) {
  t_test_thread = true;
  const int before = open_fd_count();
  int child_status = -1;
  {
    NodeRelay relay;
    ASSERT_FALSE(relay.start());
    int dest[2];
    ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
    ::usleep(100 * 1000);  // the thread's loop has its buffers
    g_out_of_memory = true;
    RelayPlan plan;
    plan.tag = "[h:0]";
    plan.out = true;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(dest[1], 1);
      const double t0 = mono_now();
      const auto why = hand_to_node_relay(relay.task_socket(), plan, 0);
      const bool refused = why.has_value();
      if (why) ::write(2, why->data(), why->size());
      ::_exit(!refused ? 2 : mono_now() - t0 < 2.0 ? 0 : 1);
    }
    ::close(dest[1]);
    ::waitpid(pid, &child_status, 0);
    g_out_of_memory = false;
    relay.stop();
    ::close(dest[0]);
  }
  EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0)
      << "1: refused only after the task's 5 s wait for an answer; 2: accepted (status " << child_status << ")";
  EXPECT_EQ(open_fd_count(), before) << "fds the handoff carried are still open in slurmstepd";
}

// ARCHITECTURE: "at stop, out of memory or not, it writes only what srun takes now". Out
// of memory each read of a stream is written with write_now, which waits up to 5 s for a
// srun that takes nothing, and the stop word is not looked at until the round is over:
// every stream whose srun is stuck costs NodeRelay::stop 5 s more (3 here: 15 s; a node's
// 64 tasks with stdout and stderr: over 10 minutes).
TEST(NodeRelayOutOfMemory, Adv12_StopDoesNotWaitFiveSecondsPerStreamOutOfMemory) {
  t_test_thread = true;
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  constexpr int kTasks = 3;
  int dest[kTasks][2];
  pid_t pid[kTasks];
  for (int t = 0; t < kTasks; ++t) {
    ASSERT_EQ(::pipe2(dest[t], O_CLOEXEC), 0);
    pid[t] = hand_over_and_exec(relay, dest[t][1], t, "exec yes 0123456789");
    ::close(dest[t][1]);
  }
  ::usleep(300 * 1000);
  g_out_of_memory = true;
  {
    std::vector<std::thread> readers;
    for (int t = 0; t < kTasks; ++t)
      readers.emplace_back([fd = dest[t][0]] {
        t_test_thread = true;
        take_for(fd, 300);  // then srun is stuck
      });
    for (auto& r : readers) r.join();
  }
  ::usleep(200 * 1000);
  const double t0 = mono_now();
  relay.stop();
  const double took = mono_now() - t0;
  g_out_of_memory = false;
  for (int t = 0; t < kTasks; ++t) {
    ::kill(pid[t], SIGKILL);
    ::waitpid(pid[t], nullptr, 0);
    ::close(dest[t][0]);
  }
  EXPECT_LT(took, 6.0) << "slurmstepd's stop waited for the relay thread";
}

// A task's stdout and stderr to one file (srun -o FILE), each with a partial line held by
// the tagging, when the loop's fallback (pass_all_raw) takes over: stdout's notice and
// held "headA" go out, then stderr's notice lands right after "headA", inside that line.
// (The held lines themselves interleave as they would without the relay; the notice is
// the relay's own, and should start a line.)
TEST(NodeRelayOutOfMemory, Adv12_TheFallbacksNoticeNeverLandsInsideAnotherStreamsLine) {
  t_test_thread = true;
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int dest[2];
  ASSERT_EQ(::pipe2(dest, O_CLOEXEC), 0);
  const pid_t pid = hand_over_and_exec(
      relay, dest[1], 0, "printf headA; printf headB >&2; sleep 0.8; printf 'tailA\\n'; printf 'tailB\\n' >&2",
      plan_for(0, true));
  ::close(dest[1]);
  ::usleep(300 * 1000);  // both partial lines are held
  g_out_of_memory = true;
  relay.task_exited(7);  // ended_.insert throws: pass_all_raw
  ::usleep(200 * 1000);
  g_out_of_memory = false;
  const std::string got = read_to_eof(dest[0]);
  ::close(dest[0]);
  ::waitpid(pid, nullptr, 0);
  relay.stop();
  ASSERT_NE(got.find(kUntaggedNotice), std::string::npos) << got;
  for (std::size_t at = got.find(kUntaggedNotice); at != std::string::npos; at = got.find(kUntaggedNotice, at + 1))
    EXPECT_TRUE(at == 0 || got[at - 1] == '\n') << "the notice inside a line: " << got;
}
