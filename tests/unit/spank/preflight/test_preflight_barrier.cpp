// The preflight barrier (issue 17.5): the line formats, the verdict rule, and srun's
// server with real tasks (threads here) and a hostile client over loopback TCP.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <future>
#include <thread>
#include <vector>
#include <string>

#include "spank/preflight/preflight_barrier.h"
#include "tests/unit/loopback.h"

using namespace gpudiag;

namespace {

const std::string kToken = "0123456789abcdef0123456789abcdef";
const std::string kProof = "fedcba9876543210fedcba9876543210";

BarrierReport report(std::uint32_t rank, bool passed, const std::string& node, const std::string& token = kToken) {
  return BarrierReport{token, rank, passed, node};
}

std::future<BarrierOutcome> task(const BarrierEndpoint& e, std::uint32_t rank, bool passed, const std::string& node,
                                 double deadline_s = 20) {
  return std::async(std::launch::async,
                    [=] { return await_barrier("127.0.0.1", e, report(rank, passed, node, e.token), 5, deadline_s); });
}

// A raw connection that sends `text` and leaves the socket open.
int hostile(int port, const std::string& text) { return test::loopback_say(port, text); }

}  // namespace

TEST(PreflightBarrier, LinesRoundTripAndAnythingElseIsRejected) {
  const std::string line = format_barrier_report(report(7, true, "gpu017"));
  ASSERT_EQ(line.back(), '\n');
  auto r = parse_barrier_report(line.substr(0, line.size() - 1));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->rank, 7u);
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->node, "gpu017");
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " 1 maybe n1"));
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " -1 ok n1"));
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " 99999999999 ok n1"));
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier short 1 ok n1"));
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " 06 ok n1"));  // one spelling per rank (fuzz_barrier)
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " 1 fail n1\x1b[2J"));  // no escape to the terminal
  EXPECT_FALSE(parse_barrier_report("gpudiag-barrier " + kToken + " 1 fail n1 extra"));
  EXPECT_FALSE(parse_barrier_report(""));
  EXPECT_FALSE(parse_barrier_report(std::string(600, 'a')));
  EXPECT_EQ(parse_barrier_verdict("go " + kProof)->go, true);
  EXPECT_EQ(parse_barrier_verdict("go " + kProof)->proof, kProof);
  EXPECT_EQ(parse_barrier_verdict("stop " + kProof + " n2")->failed_node, "n2");
  EXPECT_EQ(format_barrier_verdict(*parse_barrier_verdict("stop " + kProof + " n2")), "stop " + kProof + " n2\n");
  EXPECT_FALSE(parse_barrier_verdict("go"));  // a verdict without srun's proof
  EXPECT_FALSE(parse_barrier_verdict("stop n2"));
  EXPECT_FALSE(parse_barrier_verdict("stop " + kProof + " "));
  EXPECT_FALSE(parse_barrier_verdict("go " + kProof.substr(1)));
  EXPECT_FALSE(parse_barrier_verdict("GO " + kProof));
  auto e = parse_barrier_env("40123:" + kToken + ":" + kProof);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->proof, kProof);
  EXPECT_EQ(format_barrier_env(*e), "40123:" + kToken + ":" + kProof);
  EXPECT_FALSE(parse_barrier_env("40123:" + kToken));  // no proof
  EXPECT_FALSE(parse_barrier_env("0:" + kToken + ":" + kProof));
  EXPECT_FALSE(parse_barrier_env("040123:" + kToken + ":" + kProof));
  EXPECT_FALSE(parse_barrier_env("70000:" + kToken + ":" + kProof));
  EXPECT_FALSE(parse_barrier_env("40123:" + kToken.substr(1) + ":" + kProof));
  EXPECT_FALSE(parse_barrier_env("40123:" + kToken + ":" + kProof + ":"));
  EXPECT_FALSE(parse_barrier_env("40123"));
}

TEST(PreflightBarrier, VerdictRuleFirstFailureStopsAllOkGoes) {
  BarrierTally t;
  t.total = 3;
  tally_report(t, report(0, true, "n1"));
  tally_report(t, report(0, true, "n1"));  // twice: still one rank
  tally_report(t, report(9, true, "n9"));  // out of range: not counted
  EXPECT_FALSE(barrier_verdict(t));
  tally_report(t, report(1, true, "n2"));
  EXPECT_FALSE(barrier_verdict(t));
  tally_report(t, report(2, true, "n3"));
  ASSERT_TRUE(barrier_verdict(t));
  EXPECT_TRUE(barrier_verdict(t)->go);
  BarrierTally f;
  f.total = 3;
  tally_report(f, report(0, true, "n1"));
  tally_report(f, report(1, false, "n2"));
  tally_report(f, report(2, false, "n3"));
  ASSERT_TRUE(barrier_verdict(f));
  EXPECT_FALSE(barrier_verdict(f)->go);
  EXPECT_EQ(barrier_verdict(f)->failed_node, "n2");  // the first failure is named
}

TEST(PreflightBarrier, EveryTaskGoesOnlyWhenAllPassed) {
  auto s = start_barrier_server(3, 30);
  ASSERT_TRUE(s.endpoint) << s.error;
  auto a = task(*s.endpoint, 0, true, "n1");
  auto b = task(*s.endpoint, 1, true, "n2");
  // Neither may go before the third task reported.
  EXPECT_EQ(a.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  auto c = task(*s.endpoint, 2, true, "n3");
  EXPECT_EQ(a.get().kind, BarrierOutcome::kGo);
  EXPECT_EQ(b.get().kind, BarrierOutcome::kGo);
  EXPECT_EQ(c.get().kind, BarrierOutcome::kGo);
}

TEST(PreflightBarrier, OneFailureStopsTheOthersNamingTheFailingNode) {
  auto s = start_barrier_server(3, 30);
  ASSERT_TRUE(s.endpoint) << s.error;
  auto a = task(*s.endpoint, 0, true, "n1");
  auto bad = task(*s.endpoint, 1, false, "n2");
  EXPECT_EQ(bad.get().kind, BarrierOutcome::kNoVerdict);  // a failing task does not wait
  auto out = a.get();
  EXPECT_EQ(out.kind, BarrierOutcome::kStop);
  EXPECT_EQ(out.failed_node, "n2");
  // A task that reports after the verdict gets it at once.
  auto late = task(*s.endpoint, 2, true, "n3").get();
  EXPECT_EQ(late.kind, BarrierOutcome::kStop);
  EXPECT_EQ(late.failed_node, "n2");
}

TEST(PreflightBarrier, AnotherUsersConnectionsCannotForgeOrBlockTheVerdict) {
  auto s = start_barrier_server(2, 30);
  ASSERT_TRUE(s.endpoint) << s.error;
  const int port = s.endpoint->port;
  // Wrong token, garbage, an endless line, and a connection that says nothing.
  const std::string wrong = "ffffffffffffffffffffffffffffffff";
  int f1 = hostile(port, format_barrier_report(report(1, false, "evil", wrong)));
  int f2 = hostile(port, "\x01\x02 garbage\n");
  int f3 = hostile(port, std::string(4000, 'x'));
  int f4 = hostile(port, "");
  auto a = task(*s.endpoint, 0, true, "n1");
  auto b = task(*s.endpoint, 1, true, "n2");
  EXPECT_EQ(a.get().kind, BarrierOutcome::kGo);  // the forged failure was not counted
  EXPECT_EQ(b.get().kind, BarrierOutcome::kGo);
  for (int fd : {f1, f2, f3, f4})
    if (fd >= 0) ::close(fd);
}

TEST(PreflightBarrier, WithoutAVerdictTheTaskGivesUpAtItsDeadline) {
  auto s = start_barrier_server(2, 30);
  ASSERT_TRUE(s.endpoint) << s.error;
  auto out = task(*s.endpoint, 0, true, "n1", 0.5).get();  // rank 1 never reports
  EXPECT_EQ(out.kind, BarrierOutcome::kNoVerdict);
  EXPECT_NE(out.detail.find("no verdict"), std::string::npos) << out.detail;
}

TEST(PreflightBarrier, NoServerIsUnreachableNotAHang) {
  auto s = start_barrier_server(1, 0.01);  // serves 10 ms, then closes its port
  ASSERT_TRUE(s.endpoint) << s.error;
  ::usleep(300 * 1000);
  auto out = task(*s.endpoint, 0, true, "n1", 5).get();
  EXPECT_EQ(out.kind, BarrierOutcome::kUnreachable);
}

namespace {

// Another user's flood: threads that open connections to srun's port as fast as they
// can, say nothing, and hold up to `hold` each (closing the oldest), until `stop`.
void flood(int port, std::atomic<bool>& stop, std::size_t hold) {
  std::deque<int> open;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  while (!stop) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    (void)::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    open.push_back(fd);
    if (open.size() > hold) {
      ::close(open.front());
      open.pop_front();
    }
  }
  for (int fd : open) ::close(fd);
}

}  // namespace

// A flood may make a healthy task give up (the step fails), but never lets a program
// start while another node failed. Found by the adversary pass: a flood that fills srun's
// accept queue drops the task's SYNs, its connect gets no answer within 5 s, and that
// read as "srun is unreachable behind a firewall", which started the program (5 runs of
// 7 on 2 shared cores). A task that cannot reach srun now does not start.
TEST(PreflightBarrier, AFloodNeverStartsTheProgramBesideAFailedNode) {
  auto s = start_barrier_server(2, 30);
  ASSERT_TRUE(s.endpoint) << s.error;
  std::atomic<bool> stop{false};
  std::vector<std::thread> flooders;
  for (int i = 0; i < 8; ++i) flooders.emplace_back(flood, s.endpoint->port, std::ref(stop), 200);
  ::usleep(500 * 1000);  // the flood is under way before the tasks come
  auto bad = task(*s.endpoint, 0, false, "bad");
  auto good = task(*s.endpoint, 1, true, "good");
  const auto g = good.get();
  bad.get();
  stop = true;
  for (auto& t : flooders) t.join();
  EXPECT_NE(g.kind, BarrierOutcome::kGo);
  EXPECT_FALSE(barrier_allows_start(true, g.kind)) << g.detail;
}

TEST(PreflightBarrier, OnlySrunsGoStartsAProgram) {
  EXPECT_TRUE(barrier_allows_start(true, BarrierOutcome::kGo));
  EXPECT_FALSE(barrier_allows_start(false, BarrierOutcome::kGo));
  for (auto k : {BarrierOutcome::kStop, BarrierOutcome::kUnreachable, BarrierOutcome::kNoVerdict}) {
    EXPECT_FALSE(barrier_allows_start(true, k));
    EXPECT_FALSE(barrier_allows_start(false, k));
  }
}

// srun --async (26.05): the step manager launches the tasks with no srun behind them, and
// SLURM_STEP_LAUNCHER_PORT=0 says so; a port, or no variable at all, is not that.
TEST(PreflightBarrier, OnlyALauncherPortOfZeroMeansNoSrun) {
  EXPECT_TRUE(gpudiag::step_has_no_srun(std::string("0")));
  EXPECT_FALSE(gpudiag::step_has_no_srun(std::string("43725")));
  EXPECT_FALSE(gpudiag::step_has_no_srun(std::nullopt));
  EXPECT_FALSE(gpudiag::step_has_no_srun(std::string("")));
}

// Was a break (medium; adversary review 14 of 7fa3500): the task believed any `go` or
// `stop` on srun's port, since the verdict carried no proof that its sender was srun.
// srun's server closes its port 70 s after srun's local_user_init, and a node may reach
// task_init later (a slow prolog, an image import in another plugin's user_init,
// the fabric test). Another user on srun's host who watched the port in /proc/net/tcp6
// binds it once it is free and answers: `go` starts the program with no preflight
// verdict, and since 7fa3500 a `stop` to one node sets no refusal there, so that node
// neither starts nor ends the step while the nodes told `go` wait for its ranks.
TEST(PreflightBarrier, Adv14_AVerdictFromAListenerWithoutSrunsProofIsNotBelieved) {
  auto s = start_barrier_server(2, 0.2);
  ASSERT_TRUE(s.endpoint) << s.error;
  ::usleep(400 * 1000);  // srun's server has closed its port
  // The other user takes the port, as tcp_listen would (dual-stack [::]).
  int l = ::socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(l, 0);
  int one = 1;
  ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  a.sin6_port = htons(static_cast<std::uint16_t>(s.endpoint->port));
  ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << "port still held";
  ASSERT_EQ(::listen(l, 8), 0);
  std::thread forger([l] {
    // It answers with the one secret it learns, the token of the task's report.
    for (const char* verb : {"go", "stop"}) {
      int c = ::accept(l, nullptr, nullptr);
      if (c < 0) return;
      char buf[512] = {};
      (void)::recv(c, buf, sizeof buf - 1, 0);  // the task's report, token and all
      const auto r = parse_barrier_report(std::string(buf, std::strcspn(buf, "\n")));
      const std::string token = r ? r->token : "";
      const std::string answer = std::string(verb) + " " + token + (verb[0] == 's' ? " evil\n" : "\n");
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  });
  auto first = task(*s.endpoint, 0, true, "n1", 5).get();
  auto second = task(*s.endpoint, 1, true, "n2", 5).get();
  forger.join();
  ::close(l);
  EXPECT_NE(first.kind, BarrierOutcome::kGo) << "a forged go would start the program without the preflight verdict";
  EXPECT_NE(second.kind, BarrierOutcome::kStop) << "a forged stop: no refusal, no cancel (7fa3500)";
}

// ---------------------------------------------------------------------------------------
// Adversary review 15 (of ca4eb81).

// Attack that failed: no near-miss of "go PROOF" / "stop PROOF NODE" parses, and a
// verdict from a listener that knows the token and a well-formed proof of its own (not
// srun's) is not believed.
TEST(PreflightBarrier, Adv15_AttackFailed_NoNearMissVerdictParsesAndAForeignProofIsRefused) {
  const std::string upper = "FEDCBA9876543210FEDCBA9876543210";
  for (const std::string& line : std::vector<std::string>
       {"go", "go ", "go " + kProof + " ", "go  " + kProof, "go\t" + kProof, "GO " + kProof, "go " + upper,
        "go " + kProof + "\r", "go " + kProof.substr(1), "go " + kProof + "0", " go " + kProof, "stop " + kProof,
        "stop " + kProof + " ", "stop " + kProof + " n1 extra", "stop  " + kProof + " n1", "stop n1 " + kProof,
        "stop " + kProof + " n\x1b[1", std::string("go ") + kProof.substr(0, 10) + std::string(1, '\0') +
        kProof.substr(11)})
    EXPECT_FALSE(parse_barrier_verdict(line)) << line;
  ASSERT_TRUE(parse_barrier_verdict("go " + kProof));
  ASSERT_TRUE(parse_barrier_verdict("stop " + kProof + " n1"));

  int port = 0;
  const int l = test::loopback_listener(&port);
  ASSERT_GE(l, 0);
  // A proof of its own, well formed, then srun's real one on a second line (it cannot
  // know it; a task must read only the first line).
  std::thread forger([l] { test::answer_one(l, "go 00000000000000000000000000000000\ngo " + kProof + "\n"); });
  BarrierEndpoint e{port, kToken, kProof};
  auto out = await_barrier("127.0.0.1", e, report(0, true, "n1"), 2, 3);
  forger.join();
  ::close(l);
  EXPECT_NE(out.kind, BarrierOutcome::kGo);
  EXPECT_EQ(out.detail.find(kProof), std::string::npos) << "the detail echoes a secret: " << out.detail;
}

// Attack that failed: another user who connects to srun's live server without the token
// (a guessed one, the wrong step's, a silent connection) never reads the proof, even once
// the real tasks have their verdict.
TEST(PreflightBarrier, Adv15_AttackFailed_AConnectionWithoutTheTokenNeverReadsTheProof) {
  auto s = start_barrier_server(2, 5);
  ASSERT_TRUE(s.endpoint) << s.error;
  const std::string wrong = "00112233445566778899aabbccddeeff";
  std::vector<int> spies = {hostile(s.endpoint->port, format_barrier_report(report(0, true, "n1", wrong))),
                            hostile(s.endpoint->port, ""),
                            hostile(s.endpoint->port, "gpudiag-barrier " + s.endpoint->proof + " 1 ok n2\n")};
  for (int fd : spies) ASSERT_GE(fd, 0);
  auto first = task(*s.endpoint, 0, true, "n1", 5);
  auto second = task(*s.endpoint, 1, true, "n2", 5);
  EXPECT_EQ(first.get().kind, BarrierOutcome::kGo);
  EXPECT_EQ(second.get().kind, BarrierOutcome::kGo);
  for (int fd : spies) {
    const std::string seen = test::what_a_spy_reads(fd, 400);
    EXPECT_EQ(seen.find(s.endpoint->proof), std::string::npos) << "a spy read the proof: " << seen;
    ::close(fd);
  }
}
