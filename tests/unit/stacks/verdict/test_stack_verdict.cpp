// The hang verdict (issue 31.2, 31.3): a rank's class frames from what the stack tools
// print, the per-node report lines read back, the merge into classes, the suspect, and
// the at most five lines srun prints.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "stacks/stack_report.h"
#include "stacks/verdict/hang_verdict.h"
#include "stacks/verdict/rank_stack.h"
#include "stacks/verdict/stack_classes.h"
#include "stacks/verdict/stack_frames.h"
#include "stacks/verdict/step_reports.h"
#include "stacks/verdict/step_verdict.h"

using namespace gpudiag;

namespace {

// Real `eu-stack -m -p` output of python3.11 (Debian 12) in time.sleep, a thread beside it.
const char* kEuStack = R"(PID 13857 - process
TID 13857:
#0  0x00007f460aa14545 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
#1  0x00000000005d64b4 - /usr/bin/python3.11
#2  0x0000000000545963 - /usr/bin/python3.11
#3  0x000000000053acbc PyObject_Vectorcall - /usr/bin/python3.11
#4  0x000000000052b9e0 _PyEval_EvalFrameDefault - /usr/bin/python3.11
#5  0x00000000005236bb PyEval_EvalCode - /usr/bin/python3.11
#12 0x00007f460a96c24a __libc_start_call_main - /usr/lib/x86_64-linux-gnu/libc.so.6
TID 13864:
#0  0x00007f460aa14545 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6
#1  0x00000000005d64b4 - /usr/bin/python3.11
#11 0x00007f460a9ce1f5 start_thread - /usr/lib/x86_64-linux-gnu/libc.so.6
)";

// Real gdb `thread apply all bt` of the same process.
const char* kGdb = R"(Thread 2 (Thread 0x7f460a6896c0 (LWP 13864) "python3"):
#0  0x00007f460aa14545 in __GI___clock_nanosleep (clock_id=1, flags=1, req=0x7f460a688a30, rem=0x0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00000000005d64b4 in ?? ()
#11 0x00007f460a9ce1f5 in start_thread (arg=<optimized out>) at ./nptl/pthread_create.c:442

Thread 1 (Thread 0x7f460a944040 (LWP 13857) "python3"):
#0  0x00007f460aa14545 in __GI___clock_nanosleep (clock_id=1, flags=1, req=0x7ffcdc2ff860, rem=0x0) at ../sysdeps/unix/sysv/linux/clock_nanosleep.c:48
#1  0x00007f460aa19b63 in __GI___nanosleep (req=<optimized out>, rem=<optimized out>) at ../sysdeps/unix/sysv/linux/nanosleep.c:25
#2  0x00000000005d64b4 in ?? ()
#3  0x000000000053acbc in PyObject_Vectorcall ()
#4  0x00007f45f1b2c3d0 in c10d::ProcessGroupGloo::AsyncWork::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) () from /usr/lib/libtorch_cpu.so
)";

RankStack rs(const std::string& node, int rank, std::vector<std::string> frames,
             StackSource source = StackSource::python) {
  RankStack s;
  s.node = node;
  s.rank = rank;
  s.source = source;
  s.frames = std::move(frames);
  return s;
}

const std::vector<std::string> kAllReduce = {"all_reduce (distributed_c10d.py:1320)", "sync_grads (train.py:30)",
                                              "<module> (train.py:40)"};
const std::vector<std::string> kStuck = {"wait_for_x (train.py:88)", "<module> (train.py:38)"};

// 6 ranks on 3 nodes, rank 4 (on n3) stuck in its own function.
std::vector<RankStack> one_stuck() {
  std::vector<RankStack> r;
  for (int i = 0; i < 6; ++i) r.push_back(rs("n" + std::to_string(i / 2 + 1), i, i == 4 ? kStuck : kAllReduce));
  return r;
}

}  // namespace

TEST(StackFrames, EuStackMainThreadAboveLibc) {
  auto frames = eu_stack_frames(kEuStack, 13857);
  ASSERT_EQ(frames.size(), 7u);
  EXPECT_EQ(frames[0].function, "clock_nanosleep");  // the symbol version dropped
  EXPECT_EQ(frames[0].module, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(frames[1].function, "");
  auto cls = native_class_frames(frames);
  ASSERT_GE(cls.size(), 3u);
  EXPECT_EQ(cls[0], "?? (python3.11)");
  EXPECT_EQ(cls[2], "PyObject_Vectorcall");
  // The other thread's block is not mixed in; libc's outer frames stay (they are not innermost).
  EXPECT_EQ(cls.back(), "__libc_start_call_main");
  EXPECT_EQ(eu_stack_frames(kEuStack, 13864).size(), 3u);
  EXPECT_TRUE(eu_stack_frames(kEuStack, 999).empty());
}

TEST(StackFrames, GdbMainThreadAboveLibcWithoutArguments) {
  auto frames = gdb_frames(kGdb, 13857);
  ASSERT_EQ(frames.size(), 5u);
  auto cls = native_class_frames(frames);
  ASSERT_EQ(cls.size(), 3u);
  EXPECT_EQ(cls[0], "?? (?)");
  EXPECT_EQ(cls[1], "PyObject_Vectorcall");
  EXPECT_EQ(cls[2], "c10d::ProcessGroupGloo::AsyncWork::wait");
  EXPECT_EQ(gdb_frames(kGdb, 13864).size(), 3u);
}

TEST(StackFrames, OnlyLibcKeepsItsFrames) {
  std::vector<NativeFrame> f = {{"epoll_wait", "/lib/libc.so.6", ""}};
  EXPECT_EQ(native_class_frames(f), std::vector<std::string>{"epoll_wait"});
}

TEST(StackFrames, PySpyMainThread) {
  const char* dump = R"dump(Process 4242: python3 train.py
Python v3.11.2 (/usr/bin/python3.11)

Thread 4250 (idle): "Thread-1 (heartbeat)"
    heartbeat (train.py:12)
Thread 4242 (idle): "MainThread"
    wait_for_x (/home/u/train.py:88)
    <module> (/home/u/train.py:100)
)dump";
  EXPECT_EQ(py_spy_frames(dump), (std::vector<std::string>{"wait_for_x (train.py:88)", "<module> (train.py:100)"}));
  EXPECT_TRUE(py_spy_frames("garbage\n    (x\n").empty());
}

TEST(StackFrames, PythonReaderMainThread) {
  PyStacks py;
  py.threads.push_back({77, false, {{"heartbeat", "/x/train.py", 12}}});
  py.threads.push_back({42, true, {{"wait_for_x", "/x/train.py", 88}, {"<module>", "/x/train.py", 0}}});
  EXPECT_EQ(python_class_frames(py, 42), (std::vector<std::string>{"wait_for_x (train.py:88)", "<module> (train.py)"}));
  EXPECT_EQ(python_class_frames(py, 5), (std::vector<std::string>{"heartbeat (train.py:12)"}));
  EXPECT_TRUE(python_class_frames(PyStacks{}, 42).empty());
}

TEST(RankStackLine, RoundTripsAndEscapes) {
  RankStack s = rs("n2", 3, {"f\tg\n(x.py:1)", std::string(1000, 'a')}, StackSource::python);
  std::string line = rank_stack_line(s);
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  auto back = rank_stacks_in_report("header\n  " + line + line + "tail\n", 10);
  ASSERT_EQ(back.size(), 1u);  // the indented copy is process text, not ours
  EXPECT_EQ(back[0].rank, 3);
  EXPECT_EQ(back[0].node, "n2");
  EXPECT_EQ(back[0].source, StackSource::python);
  ASSERT_EQ(back[0].frames.size(), 2u);
  EXPECT_EQ(back[0].frames[0], "f\\x09g\\x0a(x.py:1)");
  EXPECT_EQ(back[0].frames[1].size(), kMaxFrameBytes);
  RankStack none;
  none.rank = 7;
  none.node = "n1";
  none.why = "the process was gone";
  auto n = rank_stacks_in_report(rank_stack_line(none), 10);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0].why, "the process was gone");
  // Lines that claim frames for no source, or a bad rank, are skipped.
  EXPECT_TRUE(rank_stacks_in_report("gpudiag-rank-stack\tx\tn1\tpython\t\tf\n", 10).empty());
  EXPECT_TRUE(rank_stacks_in_report("gpudiag-rank-stack\t1\tn1\tnone\t\tf\n", 10).empty());
  EXPECT_TRUE(rank_stacks_in_report("gpudiag-rank-stack\t1\tn1\tmagic\t\tf\n", 10).empty());
  EXPECT_EQ(rank_stacks_in_report(line + line + line, 2).size(), 2u);
}

TEST(StackClasses, CompactRanks) {
  std::vector<RankRef> r = {{"n1", 0}, {"n1", 1}, {"n2", 2}, {"n2", 3}, {"n3", 5}};
  EXPECT_EQ(compact_ranks(r), "[n1:0-1,n2:2-3,n3:5]");
  EXPECT_EQ(compact_ranks({{"n1", -1}, {"n1", -1}}), "[n1:?,n1:?]");
  EXPECT_EQ(compact_ranks({}), "[]");
  std::vector<RankRef> many;
  for (int i = 0; i < 1000; i += 2) many.push_back({"n" + std::to_string(i), i});
  std::string cut = compact_ranks(many, 100);
  EXPECT_LE(cut.size(), 100u);
  EXPECT_NE(cut.find(" more]"), std::string::npos);
}

TEST(StackClasses, TheRankAloneIsTheSuspect) {
  auto classes = stack_classes(one_stuck());
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks.size(), 5u);
  EXPECT_FALSE(classes[0].suspect);
  EXPECT_EQ(compact_ranks(classes[0].ranks), "[n1:0-1,n2:2-3,n3:5]");
  EXPECT_TRUE(classes[1].suspect);
  EXPECT_EQ(compact_ranks(classes[1].ranks), "[n3:4]");
  std::string text = classes_text(classes);
  EXPECT_NE(text.find("stack classes: 6 rank(s) in 2 class(es)"), std::string::npos) << text;
  EXPECT_NE(text.find("1 rank(s) [n3:4] python  <- SUSPECT\n      wait_for_x (train.py:88)"), std::string::npos) << text;
}

TEST(StackClasses, EqualHalvesHaveNoSuspectAndUnknownRanksNeverAre) {
  std::vector<RankStack> r;
  for (int i = 0; i < 4; ++i) r.push_back(rs("n1", i, i < 2 ? kStuck : kAllReduce));
  RankStack gone;
  gone.node = "n2";
  gone.rank = 4;
  gone.why = "the process was gone";
  r.push_back(gone);
  auto classes = stack_classes(r);
  ASSERT_EQ(classes.size(), 3u);
  for (const auto& c : classes) EXPECT_FALSE(c.suspect);
  EXPECT_EQ(classes.back().source, StackSource::none);
  // Much smaller, not alone: 2 of 10.
  std::vector<RankStack> ten;
  for (int i = 0; i < 10; ++i) ten.push_back(rs("n1", i, i < 2 ? kStuck : kAllReduce));
  EXPECT_TRUE(stack_classes(ten)[1].suspect);
  std::vector<RankStack> five;
  for (int i = 0; i < 5; ++i) five.push_back(rs("n1", i, i < 2 ? kStuck : kAllReduce));
  EXPECT_FALSE(stack_classes(five)[1].suspect);  // 2 against 3 is no outlier
}

TEST(HangVerdict, NamesTheSuspectItsNodeAndWhereTheOthersWait) {
  VerdictInputs in;
  in.classes = stack_classes(one_stuck());
  in.nodes_reported = 3;
  in.diag_dir = "/home/u/gpudiag-12.0";
  auto lines = hang_verdict(in);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "gpudiag: hang: [n3:4] in wait_for_x (train.py:88) from <module>, while 5 ranks [n1:0-1,n2:2-3,n3:5] wait "
            "in all_reduce (distributed_c10d.py:1320) from sync_grads\n");
  EXPECT_EQ(lines[1], "gpudiag: stack classes and every rank's stacks: /home/u/gpudiag-12.0/hang.*.txt\n");
}

TEST(HangVerdict, NoClassStandsOutSaysWhatToReadNext) {
  std::vector<RankStack> r;
  for (int i = 0; i < 6; ++i) r.push_back(rs("n" + std::to_string(i / 2 + 1), i, kAllReduce));
  VerdictInputs in;
  in.classes = stack_classes(r);
  in.nodes_reported = 3;
  in.diag_dir = "/d";
  auto lines = hang_verdict(in);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "gpudiag: hang: no rank stands out: all 6 ranks [n1:0-1,n2:2-3,n3:4-5] wait in all_reduce "
            "(distributed_c10d.py:1320) from sync_grads; look next at the NCCL logs (gpudiag nccl-log /d) and torch's "
            "flight recorder (fr_trace.rank* there)\n");
  in.nodes_reported = 0;
  EXPECT_TRUE(hang_verdict(in).empty());
}

TEST(HangVerdict, AtMostFiveBoundedLinesForAnyRankCount) {
  // 4,096 ranks: most in one place, 40 each alone somewhere else, some unreadable.
  std::vector<RankStack> r;
  for (int i = 0; i < 4096; ++i) {
    auto s = rs("node" + std::to_string(i / 8), i, kAllReduce);
    if (i % 100 == 7) s.frames = {"spin_" + std::to_string(i) + " (x.py:1)"};
    if (i % 1000 == 9) {
      s.source = StackSource::none;
      s.frames.clear();
      s.why = "not looked at";
    }
    r.push_back(s);
  }
  VerdictInputs in;
  in.classes = stack_classes(r);
  in.nodes_reported = 512;
  in.diag_dir = "/d";
  in.findings = {"gpudiag: flight recorder: a", "gpudiag: nccl: b", "gpudiag: c"};
  auto lines = hang_verdict(in);
  EXPECT_LE(lines.size(), kMaxVerdictLines);
  EXPECT_GE(lines.size(), 4u);
  for (const auto& l : lines) {
    EXPECT_LE(l.size(), kMaxVerdictLineBytes + 1);
    EXPECT_EQ(l.rfind("gpudiag: ", 0), 0u) << l;
  }
  EXPECT_NE(lines[0].find("more suspect class(es)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("no stack for 5 ranks"), std::string::npos) << lines[1];
}

TEST(StepReports, ReportNames) {
  EXPECT_EQ(hang_report_node("hang.n2.txt"), "n2");
  EXPECT_EQ(hang_report_node("hang.n2.k3x9qa.txt"), "n2");
  EXPECT_EQ(hang_report_node("hang.declared"), "");
  EXPECT_EQ(hang_report_node("hang..txt"), "");
  EXPECT_EQ(hang_report_node("nccl.n1.log"), "");
}

TEST(StepReports, ReadsEveryNodesReportAndSkipsLinks) {
  char tmpl[] = "/tmp/gpudiag-verdict-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto all = one_stuck();
  for (int node = 1; node <= 3; ++node) {
    std::ofstream f(dir + "/hang.n" + std::to_string(node) + ".txt");
    f << "gpudiag hang report: step 1.0 on n" << node << "\n";
    for (const auto& r : all)
      if (r.node == "n" + std::to_string(node)) f << rank_stack_line(r);
  }
  std::ofstream(dir + "/elsewhere.txt") << rank_stack_line(rs("n9", 9, kStuck));
  ASSERT_EQ(::symlink((dir + "/elsewhere.txt").c_str(), (dir + "/hang.n9.txt").c_str()), 0);
  auto got = read_step_reports(dir, ::getuid());
  EXPECT_EQ(got.nodes, 3);
  EXPECT_EQ(got.ranks.size(), 6u);
  ASSERT_EQ(got.problems.size(), 1u);
  EXPECT_EQ(got.problems[0].rfind("hang.n9.txt: ", 0), 0u) << got.problems[0];
  std::string verdict = hang_step_verdict(dir, ::getuid());
  EXPECT_EQ(verdict.rfind("gpudiag: hang: [n3:4] in wait_for_x (train.py:88)", 0), 0u) << verdict;
  EXPECT_NE(verdict.find("gpudiag: hang reports skipped: hang.n9.txt"), std::string::npos) << verdict;
  // Someone else's reports are not the job's: nothing read, only the refusals said.
  EXPECT_EQ(read_step_reports(dir, ::getuid() + 1).nodes, 0);
  EXPECT_EQ(hang_step_verdict(dir + "/missing", ::getuid()), "");
  // srun's way (adversary2 B1): the dir opened once, every reader relative to that fd,
  // in turn; the fd stays open and each reader sees the whole dir.
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(read_step_reports(dfd, ::getuid()).nodes, 3);
  EXPECT_EQ(hang_step_verdict(dfd, dir, ::getuid()), verdict);
  EXPECT_EQ(read_step_reports(dfd, ::getuid()).nodes, 3);
  ::close(dfd);
  std::system(("rm -rf " + dir).c_str());
}

// The whole report on a real process: it opens with the node's classes and ends with
// the rank's line for the step's merge.
TEST(StackReportClasses, OpensWithClassesAndEndsWithRankLines) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::usleep(100 * 1000);
  std::string report = stack_report("head", {{0, child}, {1, 999999}}, find_stack_tools(), 10);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  auto classes_at = report.find("stack classes: 2 rank(s)");
  auto task_at = report.find("== task rank 0");
  ASSERT_NE(classes_at, std::string::npos) << report;
  EXPECT_LT(classes_at, task_at);
  auto ranks = rank_stacks_in_report(report, 10);
  ASSERT_EQ(ranks.size(), 2u) << report;
  EXPECT_NE(ranks[0].source, StackSource::none) << report;
  EXPECT_EQ(ranks[1].source, StackSource::none);
  EXPECT_EQ(ranks[1].why, "the process was gone");
}

TEST(StackFrames, CppNamesLoseTheirParameterLists) {
  std::string text = "TID 5:\n#0  0x1 ns::f(std::chrono::duration<long, std::ratio<1l, 1000l> >) const - /l/a.so\n"
                     "#1  0x2 std::function<void ()>::operator()() const - /l/a.so\n"
                     "#2  0x3 (anonymous namespace)::run(int) - /l/a.so\n#3  0x4 g<int(*)(int)>(x) - /l/a.so\n";
  EXPECT_EQ(native_class_frames(eu_stack_frames(text, 5)),
            (std::vector<std::string>{"ns::f", "std::function<void ()>::operator()", "(anonymous namespace)::run",
                                      "g<int(*)(int)>"}));
}

// torch 2.x wraps its collectives in a decorator (seen with torch 2.14 on Debian 14: the
// verdict said "from _exception_logger.<locals>.wrapper"): the place named is the user's
// caller beyond the wrappers; a stack of wrappers alone keeps its first frame.
TEST(HangVerdict, TheCallerIsTheUsersBeyondTorchsWrappers) {
  StackClass c;
  c.source = StackSource::python;
  c.frames = {"all_reduce (distributed_c10d.py:3913)", "_exception_logger.<locals>.wrapper (c10d_logger.py:81)",
              "wrapper (c10d_logger.py:83)", "sync_grads (train.py:30)", "<module> (train.py:40)"};
  EXPECT_EQ(class_place(c), "all_reduce (distributed_c10d.py:3913) from sync_grads");
  c.frames = {"all_reduce (distributed_c10d.py:3913)", "wrapper (c10d_logger.py:83)"};
  EXPECT_EQ(class_place(c), "all_reduce (distributed_c10d.py:3913) from wrapper");
  c.frames = kAllReduce;
  EXPECT_EQ(class_place(c), "all_reduce (distributed_c10d.py:1320) from sync_grads");
}
