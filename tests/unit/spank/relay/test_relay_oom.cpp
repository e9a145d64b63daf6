// Both relays out of memory (the node's relay thread in slurmstepd, the relay process of a
// watched task): a binary of its own, because it replaces operator new, so that every
// allocation outside the test's own thread fails while the test says so.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "spank/relay/line_prefixer.h"
#include "spank/relay/node_relay.h"
#include "spank/relay/node_relay_wire.h"
#include "spank/relay/output_relay.h"

namespace {
std::atomic<bool> g_out_of_memory{false};
thread_local bool t_test_thread = false;  // the test's own allocations never fail
}  // namespace

// Whatever this binary allocates goes through these two (malloc and free), sanitizers too.
void* operator new(std::size_t n) {
  if (g_out_of_memory.load() && !t_test_thread) throw std::bad_alloc();
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
    RelayPlan plan;
    plan.tag = "[h:7]";
    plan.out = plan.err = true;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(shared[0]);
      ::dup2(shared[1], 1);
      ::dup2(shared[1], 2);
      if (hand_to_node_relay(relay.task_socket(), plan, 0)) ::_exit(99);
      // 80 KB of stdout (more than the shared pipe holds, less than it, the thread and the
      // task's own pipe hold together, so the task goes on), then stderr's line while the
      // thread still holds the rest of a chunk.
      ::execl("/bin/sh", "sh", "-c",
              "i=0; while [ $i -lt 400 ]; do printf '%0200d\\n' $i; i=$((i+1)); done; sleep 0.2; echo late >&2",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(shared[1]);
    ::usleep(200 * 1000);  // nobody reads: the pipe fills and a chunk stays half written
    g_out_of_memory = true;
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
  }
}

// The relay process of a watched task (the task itself, forked from slurmstepd) out of
// memory while it tags: the stream goes on untagged after the notice, the partial line the
// tagging held first, and every byte of the program's output arrives, in order.
TEST(OutputRelayOutOfMemory, TheStreamGoesOnUntaggedAndLosesNoByte) {
  t_test_thread = true;
  int out[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  const pid_t task = ::fork();
  if (task == 0) {
    t_test_thread = false;
    ::dup2(out[1], 1);
    // Memory runs out once the program has written its first lines and a partial one.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      g_out_of_memory = true;
    }).detach();
    RelayPlan plan;
    plan.tag = "[h:0]";
    plan.out = true;
    if (start_relay(plan)) ::_exit(99);  // the relay never returns; the program does
    // Then one write of the line's rest and 300 more lines: tagging them needs more room.
    ::execl("/bin/sh", "sh", "-c",
            "i=0; while [ $i -lt 10 ]; do printf '%0200d\\n' $i; i=$((i+1)); done; printf partial; sleep 0.6; "
            "s=$(i=10; while [ $i -lt 310 ]; do printf '%0200d\\n' $i; i=$((i+1)); done); printf 'rest\\n%s\\n' \"$s\"",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
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
