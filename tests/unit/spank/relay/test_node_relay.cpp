// The node's relay thread, for real: the test process plays slurmstepd (it starts the
// thread and holds Slurm's pipes), forked children play the tasks (they hand their
// streams over and exec a shell command, as slurmstepd's tasks exec the program).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <atomic>
#include <thread>

#include "spank/relay/line_prefixer.h"
#include "spank/relay/node_relay.h"
#include "spank/relay/node_relay_wire.h"

using namespace gpudiag;

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// One task as slurmstepd makes it: Slurm's stdout and stderr pipes, whose read ends the
// test keeps.
struct Task {
  pid_t pid = -1;
  int out_r = -1, err_r = -1;
  std::string out, err;
};

RelayPlan plan_for(int rank) {
  RelayPlan p;
  p.tag = "[h:" + std::to_string(rank) + "]";
  p.out = p.err = true;
  return p;
}

// ahead: the handoff's message is made before the fork, as user_init makes it for a
// prepared task, and the task only sends it.
Task start_task(NodeRelay& relay, int local_id, const std::string& script, RelayPlan plan, bool ahead = false) {
  int out[2], err[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  const auto message = ahead ? handoff_message(plan, local_id) : std::nullopt;
  EXPECT_EQ(ahead, message.has_value());
  Task t;
  t.pid = ::fork();
  if (t.pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (auto e = message ? hand_over_streams(relay.task_socket(), *message, plan.out, plan.err)
                         : hand_to_node_relay(relay.task_socket(), plan, local_id)) {
      ::dprintf(2, "handoff: %s\n", e->c_str());
      ::_exit(99);
    }
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // As slurmstepd after the fork (io_close_task_fds): only the task holds the write ends.
  ::close(out[1]);
  ::close(err[1]);
  t.out_r = out[0];
  t.err_r = err[0];
  return t;
}

// Reads both of Slurm's pipes to EOF (the relay thread closed them), at most max_s.
bool read_to_eof(Task& t, double max_s = 60) {
  const auto start = std::chrono::steady_clock::now();
  int fds[2] = {t.out_r, t.err_r};
  std::string* to[2] = {&t.out, &t.err};
  char buf[65536];
  while ((fds[0] >= 0 || fds[1] >= 0) && since(start) < max_s) {
    pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !p[i].revents) continue;
      const ssize_t n = ::read(fds[i], buf, sizeof buf);
      if (n > 0) {
        to[i]->append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  t.out_r = fds[0];
  t.err_r = fds[1];
  return fds[0] < 0 && fds[1] < 0;
}

int wait_exit(Task& t) {
  int status = 0;
  ::waitpid(t.pid, &status, 0);
  return status;
}

}  // namespace

TEST(HandoffWire, RoundTrips) {
  TaskHandoff h;
  h.local_id = 7;
  h.max_line = 1024;
  h.out = true;
  h.err = false;
  h.tag_out = true;
  h.tag_err = false;
  h.tag = "[node7:31]";
  auto bytes = encode_handoff(h);
  ASSERT_TRUE(bytes);
  auto back = decode_handoff(*bytes);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->local_id, 7u);
  EXPECT_EQ(back->max_line, 1024u);
  EXPECT_TRUE(back->out);
  EXPECT_FALSE(back->err);
  EXPECT_TRUE(back->tag_out);
  EXPECT_FALSE(back->tag_err);
  EXPECT_EQ(back->tag, "[node7:31]");
  EXPECT_EQ(handoff_fd_count(*back), 3);  // and the answer pipe
}

TEST(HandoffWire, RefusesAnythingElse) {
  TaskHandoff h;
  h.max_line = 1024;
  h.out = h.err = true;
  h.tag = "[h:0]";
  const std::string good = *encode_handoff(h);
  EXPECT_FALSE(decode_handoff(""));
  EXPECT_FALSE(decode_handoff(good.substr(0, good.size() - 1)));  // short tag
  EXPECT_FALSE(decode_handoff(good + "x"));                       // trailing bytes
  std::string bad = good;
  bad[0] = 'X';
  EXPECT_FALSE(decode_handoff(bad));
  bad = good;
  bad[12] = static_cast<char>(0x10 | 3);  // an unknown flag
  EXPECT_FALSE(decode_handoff(bad));
  bad = good;
  bad[12] = 0;  // no stream
  EXPECT_FALSE(decode_handoff(bad));
  TaskHandoff odd = h;
  odd.max_line = 8;
  EXPECT_FALSE(encode_handoff(odd));
  odd.max_line = 2u << 20;
  EXPECT_FALSE(encode_handoff(odd));
  // A held line stays small beside a stream's budget (issue 30.3).
  odd.max_line = kMaxHandoffLine + 1;
  EXPECT_FALSE(encode_handoff(odd));
  odd.max_line = kMaxHandoffLine;
  EXPECT_TRUE(encode_handoff(odd));
  odd = h;
  odd.tag.assign(kMaxHandoffTag + 1, 'x');
  EXPECT_FALSE(encode_handoff(odd));
  odd = h;
  odd.out = odd.err = false;
  EXPECT_FALSE(encode_handoff(odd));
}

TEST(NodeRelay, TagsEveryTasksLinesAndClosesEachAtItsEnd) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  std::vector<Task> tasks;
  for (int i = 0; i < 3; ++i)
    tasks.push_back(start_task(relay, i, "echo out" + std::to_string(i) + "; printf 'err' >&2; exit " +
                                             std::to_string(i), plan_for(10 + i)));
  for (int i = 0; i < 3; ++i) {
    Task& t = tasks[i];
    ASSERT_TRUE(read_to_eof(t)) << "task " << i;
    const std::string tag = "[h:" + std::to_string(10 + i) + "]";
    EXPECT_EQ(t.out, tag + " out" + std::to_string(i) + "\n");
    EXPECT_EQ(t.err, tag + "+err\n");
    const int status = wait_exit(t);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), i) << "the program is the task: its own exit code";
  }
  relay.stop();
}

// A prepared task sends a message made before the fork (user_init): the same handoff,
// whichever streams it names.
TEST(NodeRelay, AHandoffMadeAheadIsTheSameHandoff) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  RelayPlan out_only = plan_for(5);
  out_only.err = false;
  std::vector<Task> tasks;
  tasks.push_back(start_task(relay, 0, "echo a; echo b >&2", plan_for(4), true));
  tasks.push_back(start_task(relay, 1, "echo a; echo b >&2", out_only, true));
  tasks.push_back(start_task(relay, 2, "echo a; echo b >&2", plan_for(6), false));
  for (auto& t : tasks) ASSERT_TRUE(read_to_eof(t));
  EXPECT_EQ(tasks[0].out, "[h:4] a\n");
  EXPECT_EQ(tasks[0].err, "[h:4] b\n");
  EXPECT_EQ(tasks[1].out, "[h:5] a\n");
  EXPECT_EQ(tasks[1].err, "b\n") << "stderr not handed over: Slurm's own, untagged";
  EXPECT_EQ(tasks[2].out, "[h:6] a\n");
  for (auto& t : tasks) EXPECT_EQ(wait_exit(t), 0);
  EXPECT_FALSE(handoff_message(RelayPlan{}, 0)) << "no streams: no message";
  relay.stop();
}

namespace {
// `count` tasks (tags h:first_tag, h:first_tag+1, ...) handed to `relay`, each with stdout and stderr on `shared_w` (one pipe, as
// under `srun -o FIFO`), each running `script` under /bin/sh.
std::vector<pid_t> tasks_sharing(NodeRelay& relay, const int shared[2], int count, int first_tag, const char* script) {
  std::vector<pid_t> pids;
  for (int t = 0; t < count; ++t) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(shared[0]);
      ::dup2(shared[1], 1);
      ::dup2(shared[1], 2);
      if (hand_to_node_relay(relay.task_socket(), plan_for(first_tag + t), t)) ::_exit(99);
      ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pids.push_back(pid);
  }
  return pids;
}
// Reads `fd` to EOF as a slow srun does (`pause_us` after each 1500 bytes, so the pipe stays
// full and the thread's writes go short), closes it, and reaps `pid`; returns what came.
std::string read_slowly_and_reap(int fd, int pause_us, pid_t pid, int& status) {
  std::string got;
  char buf[1500];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0; ::usleep(pause_us)) got.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  ::waitpid(pid, &status, 0);
  return got;
}
}  // namespace

// Under `srun -o FILE` Slurm gives a task's stdout and stderr one open file (a FIFO whose
// reader is slow, here a pipe). The thread's write of a chunk of stdout may then be partial;
// stderr's lines must wait until the rest is out, or they land inside a stdout line and
// leave its tail untagged (adversary review 9).
TEST(NodeRelay, TwoStreamsIntoOneFileNeverSpliceALine) {
  for (int round = 0; round < 3; ++round) {
    NodeRelay relay;
    ASSERT_FALSE(relay.start());
    int shared[2];
    ASSERT_EQ(::pipe2(shared, O_CLOEXEC), 0);
    // Many long stdout lines, and stderr lines between them, from one process.
    const pid_t pid = tasks_sharing(relay, shared, 1, 7,
                                    "i=0; while [ $i -lt 400 ]; do printf '%0200d\\n' $i; if [ $((i % 50)) -eq 0 ]; "
                                    "then echo err$i >&2; fi; i=$((i+1)); done")[0];
    ::close(shared[1]);
    int status = 0;
    const std::string got = read_slowly_and_reap(shared[0], 200, pid, status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    std::size_t lines = 0, pos = 0;
    while (pos < got.size()) {
      const std::size_t nl = got.find('\n', pos);
      ASSERT_NE(nl, std::string::npos);
      const std::string line = got.substr(pos, nl - pos);
      EXPECT_EQ(line.rfind("[h:7] ", 0), 0u) << "round " << round << ": " << line.substr(0, 80);
      EXPECT_LE(line.size(), 6 + 200u) << "round " << round << ": a line with another inside it";
      pos = nl + 1;
      ++lines;
    }
    EXPECT_EQ(lines, 400u + 8u);
    relay.stop();
  }
}

// The other side of taking turns: a stream that keeps a shared destination busy (stdout
// flooding a slow FIFO under `srun -o FIFO`) must not keep it for ever. Each chunk it ends
// gives a waiting stream its turn, or stderr's line would wait for the flood's end and a
// task blocked on its full stderr pipe would stall until then.
TEST(NodeRelay, AStreamThatFloodsASharedDestinationLetsTheOtherIn) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int shared[2];
  ASSERT_EQ(::pipe2(shared, O_CLOEXEC), 0);
  // The flood first, so the thread is busy with it before stderr has anything.
  const pid_t pid = tasks_sharing(relay, shared, 1, 7,
                                  "( yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901"
                                  "234567890123456789 | head -n 100000 ) & sleep 0.1; echo early >&2; wait")[0];
  ::close(shared[1]);
  int status = 0;
  const std::string got = read_slowly_and_reap(shared[0], 100, pid, status);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::size_t at = got.find("[h:7] early\n");
  ASSERT_NE(at, std::string::npos);
  EXPECT_LT(at, got.size() * 3 / 4) << "stderr's line came only as the flood ended: at " << at << " of " << got.size();
  relay.stop();
}

// As slurmstepd does it: the socket opened before the tasks fork, the thread started after
// (task_post_fork), so no fork copies it. A task forked before the thread existed still
// sees a relay it may hand to, and its handoff, sent before the thread starts, is taken.
TEST(NodeRelay, TasksForkedBeforeTheThreadStartsAreRelayed) {
  NodeRelay relay;
  ASSERT_FALSE(relay.open(2));
  EXPECT_TRUE(relay.accepting());
  EXPECT_FALSE(relay.running());
  std::vector<Task> tasks;
  for (int i = 0; i < 2; ++i) tasks.push_back(start_task(relay, i, "echo early" + std::to_string(i), plan_for(i)));
  ::usleep(100 * 1000);  // the handoffs wait in the socket
  ASSERT_FALSE(relay.start_thread());
  EXPECT_TRUE(relay.running());
  EXPECT_FALSE(relay.start_thread()) << "a second task_post_fork starts nothing";
  for (int i = 0; i < 2; ++i) {
    Task& t = tasks[i];
    ASSERT_TRUE(read_to_eof(t)) << "task " << i;
    EXPECT_EQ(t.out, "[h:" + std::to_string(i) + "] early" + std::to_string(i) + "\n");
    const int status = wait_exit(t);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  relay.stop();
  EXPECT_FALSE(relay.accepting());
}

// A socket whose thread never starts (slurmstepd ends the step before any task runs)
// closes at stop, and stop returns.
TEST(NodeRelay, AnOpenedRelayWithoutItsThreadStops) {
  NodeRelay relay;
  ASSERT_FALSE(relay.open());
  relay.task_exited(0);
  relay.stop();
  EXPECT_FALSE(relay.accepting());
  EXPECT_EQ(relay.task_socket(), -1);
}

namespace {

// A task forked now that hands over only once released (`go`), as slurmstepd's tasks wait
// for their release, and exits 0 if its handoff was refused at once, 13 if it was taken,
// 14 if it waited a second or more, 12 if it was never released. -1: no fork.
struct HeldTask {
  pid_t pid = -1;
  int go = -1;
};

HeldTask fork_held_handoff(NodeRelay& relay, int local_id) {
  int go[2];
  if (::pipe(go) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(12);
    const auto t0 = std::chrono::steady_clock::now();
    auto err = hand_to_node_relay(relay.task_socket(), plan_for(local_id), local_id);
    if (!err) ::_exit(13);
    ::_exit(since(t0) < 1.0 ? 0 : 14);
  }
  ::close(go[0]);
  return {pid, go[1]};
}

// Runs `stepd` in a forked process of its own (it changes limits and ids there); its exit
// code, or -1 when it did not exit.
template <class F>
int in_own_process(F stepd) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(stepd());
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Releases the task and waits for it; its exit code, or 20 when it did not exit.
int release(HeldTask& t) {
  if (::write(t.go, "g", 1) != 1) return 21;
  int status = 0;
  ::waitpid(t.pid, &status, 0);
  ::close(t.go);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 20;
}

}  // namespace

// The thread cannot start (here: the process limit) after the tasks forked with copies of
// the socket: their handoffs fail at once, so each relays itself without the 5 s wait for
// an answer that never comes.
TEST(NodeRelay, AThreadThatCannotStartRefusesTheHandoffsAtOnce) {
  const int code = in_own_process([] {
    NodeRelay relay;
    if (relay.open(1)) return 10;
    HeldTask task = fork_held_handoff(relay, 0);
    if (task.pid < 0) return 11;
    // RLIMIT_NPROC (a thread counts) binds no root: as nobody, with no room under it.
    if (::geteuid() == 0 && ::setresuid(65534, 65534, 65534) != 0) return 15;
    struct rlimit none {1, 1};
    if (::setrlimit(RLIMIT_NPROC, &none) != 0) return 16;
    auto err = relay.start_thread();
    if (!err || err->find("cannot start the relay thread") == std::string::npos) return 17;
    if (relay.accepting()) return 18;
    const int released = release(task);
    relay.stop();
    return released;
  });
  EXPECT_EQ(code, 0) << "10-21: see the exit codes above; 14: the handoff waited";
}

// The thread ends early (here its poll fails: more fds than RLIMIT_NOFILE) while tasks
// still hand over: none may wait 5 s for an answer that never comes (adversary review 6).
// The poll fails at the thread's first poll or at its next, after task 1's handoff (whose
// fds it then cannot receive: refused); task 2 hands over once the thread is gone.
TEST(NodeRelay, AThreadThatEndsEarlyLeavesNoHandoffWaiting) {
  const int code = in_own_process([] {
    NodeRelay relay;
    if (relay.start(2)) return 10;
    HeldTask task[2] = {fork_held_handoff(relay, 0), fork_held_handoff(relay, 1)};
    if (task[0].pid < 0 || task[1].pid < 0) return 11;
    struct rlimit one {1, 1};
    if (::setrlimit(RLIMIT_NOFILE, &one) != 0) return 15;
    const int first = release(task[0]);
    ::usleep(200 * 1000);  // the thread's next poll fails, and it ends
    const int second = release(task[1]);
    relay.stop();
    return first != 0 ? 30 + first % 10 : second != 0 ? 40 + second % 10 : 0;
  });
  EXPECT_EQ(code, 0) << "1x: setup; 3x: task 1, 4x: task 2 (x4: it waited; x3: it was taken)";
}

TEST(NodeRelay, LosesNoByteWhenSlurmReadsSlowly) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  // 4 MB with lines of every length, half of them without a final newline in one write.
  const std::string script =
      "i=0; while [ $i -lt 20000 ]; do printf '%0*d\\n' $((i % 3000)) $i; i=$((i+1)); done; printf tail";
  Task t = start_task(relay, 0, script, plan_for(0));
  // Let the pipes fill before reading anything.
  ::usleep(300 * 1000);
  ASSERT_TRUE(read_to_eof(t, 120));
  EXPECT_EQ(WEXITSTATUS(wait_exit(t)), 0);
  // Stripping the tags gives back exactly what the same command writes unrelayed.
  FILE* p = ::popen(script.c_str(), "r");
  ASSERT_TRUE(p);
  std::string plain;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) plain.append(buf, n);
  ::pclose(p);
  EXPECT_GT(plain.size(), 1u << 20);
  const std::string got = strip_prefixes(t.out, "[h:0]");
  EXPECT_EQ(got.size(), plain.size());
  EXPECT_TRUE(got == plain);
  for (std::size_t at = 0; at < t.out.size();) {
    const std::size_t nl = t.out.find('\n', at);
    ASSERT_NE(nl, std::string::npos);
    ASSERT_LE(nl + 1 - at, kSlurmIoMessage) << "a line longer than slurmstepd's message";
    ASSERT_EQ(t.out.compare(at, 5, "[h:0]"), 0);
    at = nl + 1;
  }
  relay.stop();
}

TEST(NodeRelay, AChildThatOutlivesItsTaskHoldsTheOutputBoundedly) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  // The program leaves a silent child holding its pipes and exits.
  Task t = start_task(relay, 4, "echo bye; sleep 60 & echo $! >&2; exit 0", plan_for(4));
  EXPECT_EQ(WEXITSTATUS(wait_exit(t)), 0);
  const auto exited = std::chrono::steady_clock::now();
  relay.task_exited(4);
  ASSERT_TRUE(read_to_eof(t, 20));
  EXPECT_LT(since(exited), 6.0) << "the drain limit is 5 s";
  EXPECT_EQ(t.out, "[h:4] bye\n");
  relay.stop();
  const pid_t holder = std::atoi(t.err.c_str() + std::strlen("[h:4] "));
  if (holder > 1) ::kill(holder, SIGKILL);
}

TEST(NodeRelay, RefusesAMessageThatIsNotAHandoffAndClosesItsFds) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  // Garbage bytes with two fds attached: the thread must close them, not keep them.
  const char junk[] = "GDR1 but not quite";
  iovec iov{const_cast<char*>(junk), sizeof junk};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * 2);
  int fds[2] = {p[0], p[0]};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ASSERT_EQ(::sendmsg(relay.task_socket(), &msg, 0), static_cast<ssize_t>(sizeof junk));
  ::close(p[0]);
  // Once the thread closed its copies, the pipe has no reader left.
  ::signal(SIGPIPE, SIG_IGN);
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && since(start) < 10) {
    closed = ::write(p[1], "x", 1) < 0 && errno == EPIPE;
    if (!closed) ::usleep(20 * 1000);
  }
  EXPECT_TRUE(closed) << "the refused message's fds stayed open in the relay";
  ::close(p[1]);
  // The thread still serves real tasks after it.
  Task t = start_task(relay, 0, "echo still", plan_for(0));
  ASSERT_TRUE(read_to_eof(t));
  EXPECT_EQ(t.out, "[h:0] still\n");
  wait_exit(t);
  relay.stop();
}

TEST(NodeRelay, StopReturnsWhileNobodyReadsSlurmsSide) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  // srun stopped: nobody reads Slurm's pipe, the program blocks; stop must not wait.
  Task t = start_task(relay, 0, "exec yes", plan_for(0));
  ::usleep(300 * 1000);
  const auto start = std::chrono::steady_clock::now();
  relay.stop();
  EXPECT_LT(since(start), 3.0);
  ::kill(t.pid, SIGKILL);
  wait_exit(t);
  ::close(t.out_r);
  ::close(t.err_r);
}

TEST(NodeRelay, AForkedCopyNeitherStopsNorJoins) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  pid_t child = ::fork();
  if (child == 0) {
    relay.stop();  // would hang on a thread that is not in this process
    relay.task_exited(0);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_TRUE(relay.running());
  relay.stop();
  EXPECT_FALSE(relay.running());
}

namespace {

// Waits at most max_s for the task's program to exit; false if it is still running.
bool exited_within(Task& t, double max_s, int& status) {
  const auto start = std::chrono::steady_clock::now();
  while (since(start) < max_s) {
    if (::waitpid(t.pid, &status, WNOHANG) == t.pid) return true;
    ::usleep(10 * 1000);
  }
  return false;
}

}  // namespace

TEST(NodeRelay, LosesNoByteThatAProgramWroteBeforeItExitedWhileSlurmWasNotReading) {
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  // 100 kB: more than Slurm's pipe takes while nobody reads it, less than Slurm's pipe
  // and the task's pipe together, so the program exits with its tail still in its pipe
  // and the thread held back by bytes it cannot write (srun slow, or stopped).
  const std::string script =
      "i=0; while [ $i -lt 1000 ]; do printf '%099d\\n' $i; i=$((i+1)); done";
  Task t = start_task(relay, 0, script, plan_for(0));
  int status = 0;
  ASSERT_TRUE(exited_within(t, 20, status)) << "the program blocked: the pipes hold less than this test assumes";
  relay.task_exited(0);
  // Longer than the quiet limit (0.2 s) before srun takes anything.
  ::usleep(1000 * 1000);
  ASSERT_TRUE(read_to_eof(t, 30));
  const std::string got = strip_prefixes(t.out, "[h:0]");
  EXPECT_EQ(got.size(), 100000u) << "the tail the program left in its pipe was dropped";
  relay.stop();
}

TEST(NodeRelay, AChildOfAnEndedTaskIsRelayedWhileAnotherTaskOfTheNodeRuns) {
  // Without gpudiag, slurmstepd relays a task's stdout until EOF and ends what is left
  // of the step only once every task exited: the child's late line reaches srun.
  NodeRelay relay;
  ASSERT_FALSE(relay.start(2));
  Task a = start_task(relay, 0, "(sleep 0.6; echo late) & echo early; exit 0", plan_for(0));
  Task b = start_task(relay, 1, "sleep 1.5; echo b", plan_for(1));
  EXPECT_EQ(WEXITSTATUS(wait_exit(a)), 0);
  relay.task_exited(0);
  EXPECT_EQ(WEXITSTATUS(wait_exit(b)), 0);
  relay.task_exited(1);
  ASSERT_TRUE(read_to_eof(a, 20));
  ASSERT_TRUE(read_to_eof(b, 20));
  EXPECT_EQ(a.out, "[h:0] early\n[h:0] late\n");
  EXPECT_EQ(b.out, "[h:1] b\n");
  relay.stop();
}

TEST(NodeRelay, AHandoffTheThreadCannotTakeFailsInTheTaskInsteadOfLosingTheOutput) {
  // slurmstepd out of fds: the thread cannot receive the streams and drops the message.
  // The task must learn it before its exec (and keep Slurm's fds, relaying itself),
  // not exec with pipes nobody reads.
  NodeRelay relay;
  ASSERT_FALSE(relay.start());
  int out[2], err[2];
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(err, O_CLOEXEC), 0);
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  const int probe = ::dup(0);  // the lowest free fd: the thread can install none at or above it
  ::close(probe);
  rlimit tight = before;
  tight.rlim_cur = static_cast<rlim_t>(probe);
  // Tight before the fork, so that the thread cannot see the handoff earlier; the task
  // (a process of its own) takes the old limit back for its pipes.
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setrlimit(RLIMIT_NOFILE, &before);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    auto e = hand_to_node_relay(relay.task_socket(), plan_for(0), 0);
    ::dprintf(1, e ? "refused\n" : "handed over\n");
    ::_exit(0);
  }
  ::close(out[1]);
  ::close(err[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::usleep(200 * 1000);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &before), 0);
  Task t;
  t.pid = pid;
  t.out_r = out[0];
  t.err_r = err[0];
  ASSERT_TRUE(read_to_eof(t, 10));
  EXPECT_EQ(t.out, "refused\n") << "the task believed the thread took streams that it dropped";
  relay.stop();
}

namespace {

long rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "r");
  long kb = 0;
  char line[256];
  while (f && std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld", &kb) == 1) break;
  if (f) std::fclose(f);
  return kb;
}

// Issue 30.3 in a task: both pipes enlarged to 1 MiB and filled with bare newlines (each
// a whole tagged line, 7 bytes for 1), then the program exits.
const char kFloodNewlines[] =
    "exec /usr/bin/python3 -c 'import fcntl\n"
    "for fd in (1, 2):\n"
    "    fcntl.fcntl(fd, 1031, 1 << 20)\n"  // F_SETPIPE_SZ
    "    assert fcntl.fcntl(fd, 1032) == 1 << 20\n"
    "for fd in (1, 2):\n"
    "    b = memoryview(bytes([10]) * (1 << 20))\n"
    "    while b:\n"
    "        b = b[__import__(\"os\").write(fd, b):]\n"
    "'";

// Reads every task's pipes together until each reached EOF, at most max_s.
bool read_all_to_eof(std::vector<Task>& tasks, double max_s) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<char> buf(1 << 16);
  for (;;) {
    std::vector<pollfd> p;
    std::vector<std::pair<int*, std::string*>> to;
    for (Task& t : tasks)
      for (auto [fd, text] : {std::pair{&t.out_r, &t.out}, std::pair{&t.err_r, &t.err}})
        if (*fd >= 0) {
          p.push_back({*fd, POLLIN, 0});
          to.emplace_back(fd, text);
        }
    if (p.empty()) return true;
    if (since(start) > max_s) return false;
    if (::poll(p.data(), p.size(), 100) <= 0) continue;
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (!p[i].revents) continue;
      const ssize_t n = ::read(*to[i].first, buf.data(), buf.size());
      if (n > 0) {
        to[i].second->append(buf.data(), static_cast<std::size_t>(n));
      } else {
        ::close(*to[i].first);
        *to[i].first = -1;
      }
    }
  }
}

// Starts `tasks` flooding tasks while the test (srun) reads nothing, and waits until
// every program has exited and the thread has passed its drain limit.
std::vector<Task> flood_while_srun_reads_nothing(NodeRelay& relay, int tasks) {
  std::vector<Task> all;
  for (int i = 0; i < tasks; ++i) all.push_back(start_task(relay, i, kFloodNewlines, plan_for(i)));
  for (int i = 0; i < tasks; ++i) {
    int status = 0;
    EXPECT_TRUE(exited_within(all[i], 60, status)) << "task " << i << " blocked: its pipe holds less than 1 MiB";
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "task " << i;
    relay.task_exited(i);
  }
  ::usleep(1000 * 1000);  // far past the drain limit's quiet time (0.2 s)
  return all;
}

}  // namespace

TEST(NodeRelay, HoldsNoMoreThanItsBudgetsWhateverThePipesHold) {
  // 12 tasks, 24 streams of 1 MiB bare newlines each: tagged, 7 MiB per stream, 168 MiB
  // in all. The thread once read each pipe whole at the drain limit; now the step holds
  // at most kRelayStepBudget (fewer streams than 16 would hold 64 KiB each), and every
  // byte still arrives once srun reads.
  constexpr int kTasks = 12;
  NodeRelay relay;
  ASSERT_FALSE(relay.start(kTasks));
  const long before = rss_kb();
  std::vector<Task> tasks = flood_while_srun_reads_nothing(relay, kTasks);
  const long grown = rss_kb() - before;
  EXPECT_LE(relay.peak_held(), kRelayStepBudget);
  EXPECT_GT(relay.peak_held(), kRelayStepBudget / 2) << "the test no longer fills the step's budget";
  EXPECT_LT(grown, 8 * 1024) << "the relay thread grew the process by " << grown << " kB";
  // slurmstepd reads every task's pipes, as srun takes the output.
  ASSERT_TRUE(read_all_to_eof(tasks, 120));
  const std::string want(1 << 20, '\n');
  for (int i = 0; i < kTasks; ++i) {
    const std::string tag = "[h:" + std::to_string(i) + "]";
    EXPECT_TRUE(strip_prefixes(tasks[i].out, tag) == want) << "task " << i << ": stdout lost bytes";
    EXPECT_TRUE(strip_prefixes(tasks[i].err, tag) == want) << "task " << i << ": stderr lost bytes";
  }
  relay.stop();
  EXPECT_LE(relay.peak_held(), kRelayStepBudget);
}

TEST(NodeRelay, TheFinalDrainKeepsTheBudgetsAndDoesNotWait) {
  // srun never reads again: stop() relays what Slurm's pipes take at once, within the
  // budgets, and drops the rest (slurmstepd stopped waiting for the output by then).
  constexpr int kTasks = 4;
  NodeRelay relay;
  ASSERT_FALSE(relay.start(kTasks));
  std::vector<Task> tasks = flood_while_srun_reads_nothing(relay, kTasks);
  const auto start = std::chrono::steady_clock::now();
  relay.stop();
  EXPECT_LT(since(start), 3.0);
  EXPECT_LE(relay.peak_held(), kTasks * 2 * kRelayStreamBudget);
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(read_to_eof(tasks[i], 10)) << "stop left Slurm's side open";
    // What arrived is a prefix of the tagged stream: nothing torn or out of order.
    const std::string line = "[h:" + std::to_string(i) + "] \n";
    for (std::size_t at = 0; at < tasks[i].out.size(); at += line.size())
      ASSERT_EQ(tasks[i].out.compare(at, line.size(), line, 0, std::min(line.size(), tasks[i].out.size() - at)), 0)
          << "task " << i << " at byte " << at;
  }
}

// Adversary 10 (review of 4319bc9's turn-taking).
TEST(NodeRelayAdversary10, AHolderWhoseReaderGoesOrStallsHangsNothing) {
  for (bool close_reader : {true, false}) {
    NodeRelay relay;
    ASSERT_FALSE(relay.start());
    int shared[2];
    ASSERT_EQ(::pipe2(shared, O_CLOEXEC), 0);
    const std::vector<pid_t> pids = tasks_sharing(
        relay, shared, 3, 0, "i=0; while [ $i -lt 3000 ]; do printf '%0300d\\n' $i; printf '%0300d\\n' $i >&2; i=$((i+1)); done");
    ::close(shared[1]);
    char buf[1000];
    std::size_t got = 0;
    while (got < 200000) {
      const ssize_t n = ::read(shared[0], buf, sizeof buf);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
      ::usleep(50);
    }
    if (close_reader) {
      ::close(shared[0]);
      // Every task must finish: its streams see EPIPE and are read on and dropped.
      const auto start = std::chrono::steady_clock::now();
      for (pid_t p : pids) {
        int status = 0;
        while (::waitpid(p, &status, WNOHANG) == 0 && since(start) < 20) ::usleep(10000);
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "a task hung after its srun went away";
      }
      relay.stop();
    } else {
      ::usleep(300000);
      const auto start = std::chrono::steady_clock::now();
      relay.stop();  // the reader stalls: final_drain must not wait
      EXPECT_LT(since(start), 2.0);
      ::close(shared[0]);
      for (pid_t p : pids) {
        ::kill(p, SIGKILL);
        ::waitpid(p, nullptr, 0);
      }
    }
  }
}

// At stop (final_drain) a holder's half-written chunk is dropped when its Stream is reset
// (the destructor releases the destination), and the next stream then writes its lines
// right after the half line: one line of the destination holds a tag in its middle.
TEST(NodeRelayAdversary10, TheFinalDrainDoesNotSpliceAfterAHalfWrittenChunk) {
  int spliced_rounds = 0;
  for (int round = 0; round < 10; ++round) {
    NodeRelay relay;
    ASSERT_FALSE(relay.start());
    int shared[2];
    ASSERT_EQ(::pipe2(shared, O_CLOEXEC), 0);
    const std::vector<pid_t> pids = tasks_sharing(
        relay, shared, 3, 0,
        "yes 012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 & "
        "yes abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij >&2 & wait");
    ::close(shared[1]);
    std::string got;
    std::atomic<bool> quit{false};
    std::atomic<std::size_t> size{0};
    std::thread reader([&] {
      char buf[3000];
      ::fcntl(shared[0], F_SETFL, O_NONBLOCK);
      while (!quit) {
        const ssize_t n = ::read(shared[0], buf, sizeof buf);
        if (n > 0) {
          got.append(buf, static_cast<std::size_t>(n));
          size = got.size();
        } else {
          ::usleep(20);
        }
      }
    });
    ::usleep(400000);
    const std::size_t before_stop = size;
    relay.stop();
    const std::size_t after_stop = size;
    ::usleep(300000);
    quit = true;
    reader.join();
    ::close(shared[0]);
    for (pid_t p : pids) {
      ::kill(-p, SIGKILL);
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    // Every complete line: one tag at its start, none inside.
    std::size_t pos = 0;
    bool spliced = false;
    std::string example;
    while (pos < got.size()) {
      const std::size_t nl = got.find('\n', pos);
      if (nl == std::string::npos) break;  // the very last half line is fine
      const std::string line = got.substr(pos, nl - pos);
      if (line.rfind("[h:", 0) != 0 || line.find("[h:", 1) != std::string::npos) {
        spliced = true;
        example = "at byte " + std::to_string(pos) + " (stop() ran from byte " + std::to_string(before_stop) + " to " +
                  std::to_string(after_stop) + " of " + std::to_string(got.size()) + "): " + line.substr(0, 200);
      }
      pos = nl + 1;
    }
    if (spliced) {
      ++spliced_rounds;
      ADD_FAILURE() << "round " << round << ": a spliced line at stop: " << example;
    }
  }
  std::printf("spliced at stop in %d of 10 rounds\n", spliced_rounds);
}
