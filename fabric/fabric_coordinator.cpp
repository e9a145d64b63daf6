#include "fabric/fabric_coordinator.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "fabric/fabric_report.h"
#include "fabric/launch_layout.h"
#include "fabric/node_differs.h"
#include "fabric/pair_plan.h"
#include "fabric/pair_verdict.h"
#include "util/detached_thread.h"
#include "util/private_file.h"
#include "util/tcp.h"

namespace gpudiag::fabric {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kSilent_s = 10;          // a connection without a hello is dropped
constexpr std::size_t kMaxPending = 256;  // connections without a hello; the oldest goes first
constexpr double kStepSlack_s = 6;        // a test's connect, drain and report beyond its duration
constexpr double kNcclStep_s = 25;        // a round of NCCL pairs: two probes each, CUDA and NCCL init included

int ms_until(Clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(std::min<long long>(ms, 1000));
}

void send_now(int fd, const std::string& text) { (void)::send(fd, text.data(), text.size(), MSG_DONTWAIT | MSG_NOSIGNAL); }

struct Client {
  int fd = -1;
  std::string buf;
  Clock::time_point since;
  std::optional<TaskHello> hello;
};

struct Edge {
  TestRecord rec;
  bool sent = false, received = false;
};

// One step of the plan: directed tests that run at once, or the RDMA queue pairs' setup
// for a round's pairs (made on both ends, then connected to each other's).
struct Step {
  enum Kind { kTest, kQp, kConnect, kNccl } kind = kTest;
  std::vector<TestRecord> records;  // kTest
  std::uint32_t ms = 0;             // kTest
  std::vector<Pair> pairs;          // kQp, kConnect: node ids
};

using NodePair = std::pair<int, int>;  // (node, peer)
NodePair key(int a, int b) { return a < b ? NodePair{a, b} : NodePair{b, a}; }

class Coordinator {
 public:
  Coordinator(int listen_fd, std::string token, std::string proof, CoordinatorSettings s)
      : listen_fd_(listen_fd), token_(std::move(token)), proof_(std::move(proof)), s_(std::move(s)) {}

  void run() {
    start_ = Clock::now();
    const auto until = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s_.cfg.timeout_s));
    while (!finished_) {
      if (Clock::now() >= until) {
        timed_out_ = true;
        finish();
        break;
      }
      std::vector<pollfd> fds;
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const auto& c : clients_) fds.push_back({c.fd, POLLIN, 0});
      int n = ::poll(fds.data(), fds.size(), ms_until(std::min(until, step_until_)));
      if (n < 0 && errno != EINTR) break;
      if (fds[0].revents & POLLIN) accept_all();
      for (std::size_t i = 0; i < clients_.size(); ++i) {
        const short rev = i + 1 < fds.size() && fds[i + 1].fd == clients_[i].fd ? fds[i + 1].revents : 0;
        if (rev & (POLLIN | POLLHUP | POLLERR)) read_client(clients_[i]);
        if (!clients_[i].hello && clients_[i].fd >= 0 &&
            Clock::now() - clients_[i].since > std::chrono::duration<double>(kSilent_s))
          drop(clients_[i]);
      }
      clients_.erase(std::remove_if(clients_.begin(), clients_.end(), [](const Client& c) { return c.fd < 0; }),
                     clients_.end());
      advance();
    }
    for (auto& c : clients_)
      if (c.fd >= 0) ::close(c.fd);
    ::close(listen_fd_);
  }

 private:
  void drop(Client& c) {
    if (c.fd < 0) return;
    ::close(c.fd);
    c.fd = -1;
    if (c.hello && c.hello->local_rank == 0) {
      lost_.push_back(c.hello->node_id);
      leader_fd_.erase(c.hello->node_id);
    }
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) break;
      if (testing_ || finished_) {  // every task said hello: nobody else belongs here
        ::close(fd);
        continue;
      }
      std::size_t pending = std::count_if(clients_.begin(), clients_.end(), [](const Client& c) { return !c.hello; });
      if (pending >= kMaxPending) {
        auto oldest = std::find_if(clients_.begin(), clients_.end(), [](const Client& c) { return !c.hello && c.fd >= 0; });
        if (oldest != clients_.end()) drop(*oldest);
      }
      clients_.push_back(Client{fd, {}, Clock::now(), std::nullopt});
    }
  }

  void read_client(Client& c) {
    char chunk[16384];
    ssize_t got = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (got <= 0) {
      drop(c);
      return;
    }
    c.buf.append(chunk, static_cast<std::size_t>(got));
    for (auto nl = c.buf.find('\n'); nl != std::string::npos && c.fd >= 0; nl = c.buf.find('\n')) {
      const std::string line = c.buf.substr(0, nl);
      c.buf.erase(0, nl + 1);
      if (!c.hello) {
        auto h = parse_hello(line, token_);
        if (!h || h->rank >= s_.total_tasks || hellos_.count(h->rank)) {
          drop(c);  // not one of this step's tasks, or a rank twice
          return;
        }
        c.hello = h;
        hellos_[h->rank] = *h;
        send_now(c.fd, format_srun_proof(proof_));  // before any order
        if (h->local_rank == 0) leader_fd_[h->node_id] = c.fd;
      } else if (auto r = parse_test_report(line)) {
        if (c.hello->local_rank == 0) on_report(c.hello->node_id, *r);
      }
    }
    if (c.fd >= 0 && c.buf.size() >= (c.hello ? kLineMax : kHelloMax)) drop(c);
  }

  void on_report(std::uint32_t node, const TestReport& r) {
    const NodePair me{static_cast<int>(node), static_cast<int>(r.peer)};
    if (r.kind == TestReport::kQp || r.kind == TestReport::kReady) {
      auto w = waiting_.find(me);
      if (w == waiting_.end() || w->second) return;  // not asked, or said already
      w->second = true;
      if (!r.error.empty()) {
        rdma_broken_.emplace(key(me.first, me.second), nodes_[node].name + ": " + r.error);
      } else if (r.kind == TestReport::kQp) {
        qp_info_[me] = r.qp;
      }
      return;
    }
    if (r.kind == TestReport::kNcclId || r.kind == TestReport::kNcclDone) return on_nccl(me, r);
    for (auto& e : step_) {
      if (r.kind == TestReport::kWritten && e.rec.transport == "rdma" && e.rec.from == me.first &&
          e.rec.to == me.second && !e.sent) {
        e.sent = e.received = true;
        e.rec.bytes = r.bytes;
        e.rec.usec = r.usec;
        e.rec.error = r.error;
        return;
      }
      if (e.rec.transport != "tcp") continue;
      if (r.kind == TestReport::kSent && e.rec.from == static_cast<int>(node) && e.rec.to == static_cast<int>(r.peer) &&
          !e.sent) {
        e.sent = true;
        e.rec.error = r.error;
        return;
      }
      if (r.kind == TestReport::kReceived && e.rec.to == static_cast<int>(node) &&
          e.rec.from == static_cast<int>(r.peer) && !e.received) {
        e.received = true;
        e.rec.bytes = r.bytes;
        e.rec.usec = r.usec;
        return;
      }
    }
  }

  Edge* nccl_edge(int from, int to) {
    for (auto& e : step_)
      if (e.rec.transport == "nccl" && e.rec.from == from && e.rec.to == to) return &e;
    return nullptr;
  }

  // Rank 0's id goes on to rank 1; each rank's result fills its direction.
  void on_nccl(const NodePair& me, const TestReport& r) {
    Edge* mine = nccl_edge(me.first, me.second);
    Edge* theirs = nccl_edge(me.second, me.first);
    if (!mine || !theirs || mine->sent) return;
    if (r.kind == TestReport::kNcclDone) {
      mine->sent = mine->received = true;
      mine->rec.bytes = r.bytes;
      mine->rec.usec = r.usec;
      mine->rec.error = r.error;
      return;
    }
    if (!nccl_id_heard_.insert(me).second) return;  // an id said twice
    auto fd = leader_fd_.find(static_cast<std::uint32_t>(me.second));
    if (!r.error.empty() || fd == leader_fd_.end()) {
      const std::string why = !r.error.empty() ? nodes_[me.first].name + ": " + r.error
                                               : nodes_[me.second].name + "'s task left the test";
      for (Edge* e : {mine, theirs}) {
        e->sent = e->received = true;
        e->rec.error = why;
      }
      return;
    }
    Order o;
    o.kind = Order::kNccl;
    o.peer = static_cast<std::uint32_t>(me.first);
    o.rank = 1;
    o.nccl_id = r.nccl_id;
    send_now(fd->second, format_order(o));
  }

  void start_nccl(const Step& st) {
    step_kind_ = Step::kTest;
    for (const auto& rec : st.records) step_.push_back(Edge{rec});
    for (const Pair& p : st.pairs) {
      auto fd = leader_fd_.find(static_cast<std::uint32_t>(p.a));
      if (fd == leader_fd_.end()) {
        for (Edge* e : {nccl_edge(p.a, p.b), nccl_edge(p.b, p.a)}) {
          e->sent = e->received = true;
          e->rec.error = nodes_[p.a].name + "'s task left the test";
        }
        continue;
      }
      Order o;
      o.kind = Order::kNccl;
      o.peer = static_cast<std::uint32_t>(p.b);
      o.rank = 0;
      send_now(fd->second, format_order(o));
    }
    step_until_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kNcclStep_s));
    in_step_ = true;
  }

  // Everyone said hello: the nodes and the plan.
  void begin_tests() {
    testing_ = true;
    nnodes_ = hellos_.begin()->second.nnodes;
    nodes_.assign(nnodes_, NodeEntry{});
    for (const auto& [rank, h] : hellos_) {
      if (h.nnodes != nnodes_ || h.node_id >= nnodes_) {
        setup_error_ = "the tasks disagree on the step's node count";
        continue;
      }
      if (h.local_rank != 0) continue;
      nodes_[h.node_id] = NodeEntry{h.node, h.listen_addr, h.listen_port};
      if (!h.listen_error.empty()) listen_errors_.push_back(Finding{"unreachable", true, h.node, h.node + ": " + h.listen_error});
    }
    for (std::uint32_t n = 0; n < nnodes_; ++n)
      if (nodes_[n].name.empty()) setup_error_ = "node " + std::to_string(n) + " has no first task";
    if (!setup_error_.empty()) return;
    rdma_.hca.assign(nnodes_, "");
    rdma_.none.assign(nnodes_, "");
    for (const auto& [rank, h] : hellos_) {
      if (h.local_rank != 0) continue;
      rdma_.hca[h.node_id] = h.rdma_hca;
      rdma_.none[h.node_id] = h.rdma_hca.empty() ? (h.rdma_none.empty() ? "no RDMA" : h.rdma_none) : "";
      if (!h.rdma_hca.empty()) rdma_ids_.push_back(static_cast<int>(h.node_id));
      if (h.nccl) nccl_ids_.push_back(static_cast<int>(h.node_id));
      else nccl_none_[h.node_id] = h.nccl_none;
    }
    const std::uint32_t ms = static_cast<std::uint32_t>(s_.cfg.seconds * 1000);
    if (nnodes_ >= 2) {
      std::vector<TestRecord> reach;
      for (std::uint32_t n = 1; n < nnodes_; ++n) reach.push_back(record(n, 0, true, 0, false));
      plan_.push_back(Step{Step::kTest, reach, 0, {}});
    }
    int round = 0;
    for (const Round& r : first_rounds(static_cast<int>(nnodes_))) queue_round(r, ++round, false, ms, "tcp");
    rounds_ = round;
  }

  TestRecord record(int from, int to, bool reach, int round, bool retest, const std::string& transport = "tcp") {
    TestRecord t;
    t.transport = transport;
    t.from = from;
    t.to = to;
    t.reach = reach;
    t.round = round;
    t.retest = retest;
    return t;
  }

  // Both directions of a round's pairs, one direction at a time (over RDMA, after the
  // queue pairs' setup: one RC connection serves both directions).
  void queue_round(const Round& r, int round, bool retest, std::uint32_t ms, const std::string& transport) {
    std::vector<TestRecord> there, back;
    for (const Pair& p : r) {
      there.push_back(record(p.a, p.b, false, round, retest, transport));
      back.push_back(record(p.b, p.a, false, round, retest, transport));
    }
    if (transport == "rdma") {
      plan_.push_back(Step{Step::kQp, {}, 0, r});
      plan_.push_back(Step{Step::kConnect, {}, 0, r});
    }
    plan_.push_back(Step{Step::kTest, there, ms, {}});
    plan_.push_back(Step{Step::kTest, back, ms, {}});
  }

  // RDMA (NCCL) pairs over the nodes that have RDMA (a GPU): the plan's functions see them as 0..k-1.
  std::vector<Pair> to_nodes(const std::vector<Pair>& pairs, const std::vector<int>& ids) const {
    std::vector<Pair> out;
    for (const Pair& p : pairs) out.push_back(Pair{ids[p.a], ids[p.b]});
    return out;
  }
  std::vector<Pair> to_nodes(const std::vector<Pair>& pairs) const { return to_nodes(pairs, rdma_ids_); }
  std::vector<Pair> to_subset(const std::vector<Pair>& pairs) const {
    std::vector<Pair> out;
    auto index = [&](int n) {
      return static_cast<int>(std::find(rdma_ids_.begin(), rdma_ids_.end(), n) - rdma_ids_.begin());
    };
    for (const Pair& p : pairs) {
      const int a = index(p.a), b = index(p.b);
      if (a < static_cast<int>(rdma_ids_.size()) && b < static_cast<int>(rdma_ids_.size()))
        out.push_back(a < b ? Pair{a, b} : Pair{b, a});
    }
    return out;
  }

  void start_setup(const Step& st) {
    step_kind_ = st.kind;
    for (const Pair& p : st.pairs) {
      if (rdma_broken_.count(key(p.a, p.b))) continue;
      for (auto [x, y] : {NodePair{p.a, p.b}, NodePair{p.b, p.a}}) {
        auto fd = leader_fd_.find(static_cast<std::uint32_t>(x));
        if (fd == leader_fd_.end()) {
          rdma_broken_.emplace(key(x, y), nodes_[x].name + "'s task left the test");
          continue;
        }
        Order o;
        o.peer = static_cast<std::uint32_t>(y);
        if (st.kind == Step::kQp) {
          o.kind = Order::kQp;
        } else {
          auto info = qp_info_.find(NodePair{y, x});
          if (info == qp_info_.end()) continue;  // broken above
          o.kind = Order::kConnect;
          o.qp = info->second;
        }
        waiting_[NodePair{x, y}] = false;
        send_now(fd->second, format_order(o));
      }
    }
    step_until_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kStepSlack_s));
    in_step_ = true;
  }

  void start_step() {
    Step st = plan_.front();
    plan_.pop_front();
    step_.clear();
    waiting_.clear();
    if (st.kind == Step::kNccl) return start_nccl(st);
    if (st.kind != Step::kTest) return start_setup(st);
    step_kind_ = Step::kTest;
    const std::uint32_t ms = st.ms;
    for (auto& rec : st.records) {
      Edge e{rec};
      const NodeEntry& to = nodes_[rec.to];
      auto fd = leader_fd_.find(rec.from);
      auto broken = rdma_broken_.find(key(rec.from, rec.to));
      if (rec.transport == "rdma" && broken != rdma_broken_.end()) {
        e.rec.error = broken->second;
        e.sent = e.received = true;
      } else if (rec.transport == "rdma" && fd != leader_fd_.end()) {
        Order o;
        o.kind = Order::kWrite;
        o.peer = static_cast<std::uint32_t>(rec.to);
        o.ms = ms;
        send_now(fd->second, format_order(o));
      } else if (rec.transport == "tcp" && (to.addr.empty() || to.port == 0)) {
        e.rec.error = to.name + " has no listener";
        e.sent = e.received = true;
      } else if (fd == leader_fd_.end()) {
        e.rec.error = nodes_[rec.from].name + "'s task left the test";
        e.sent = e.received = true;
      } else {
        Order o;
        o.kind = Order::kSend;
        o.peer = static_cast<std::uint32_t>(rec.to);
        o.addr = to.addr;
        o.port = to.port;
        o.ms = ms;
        send_now(fd->second, format_order(o));
      }
      step_.push_back(e);
    }
    step_until_ = Clock::now() + std::chrono::milliseconds(ms) +
                  std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kStepSlack_s));
    in_step_ = true;
  }

  bool step_done() const {
    if (step_kind_ != Step::kTest)
      return std::all_of(waiting_.begin(), waiting_.end(), [](const auto& w) { return w.second; });
    return std::all_of(step_.begin(), step_.end(),
                       [](const Edge& e) { return e.sent && (e.received || !e.rec.error.empty()); });
  }

  void end_step() {
    for (const auto& [who, answered] : waiting_)
      if (!answered)
        rdma_broken_.emplace(key(who.first, who.second), "no answer from " + nodes_[who.first].name + " in time");
    waiting_.clear();
    for (auto& e : step_) {
      if (e.rec.error.empty() && !e.sent) e.rec.error = "no report from " + nodes_[e.rec.from].name + " in time";
      else if (e.rec.error.empty() && !e.received)
        e.rec.error = nodes_[e.rec.to].name + " received nothing from " + nodes_[e.rec.from].name;
      tests_.push_back(e.rec);
    }
    step_.clear();
    in_step_ = false;
    step_until_ = Clock::time_point::max();
  }

  void advance() {
    if (finished_) return;
    if (!testing_) {
      if (hellos_.size() == s_.total_tasks) {
        begin_tests();
        if (!setup_error_.empty()) return finish();
      } else {
        return;
      }
    }
    if (in_step_ && !step_done() && Clock::now() < step_until_) return;
    if (in_step_) end_step();
    if (plan_.empty() && !retested_ && nnodes_ >= 2) {
      retested_ = true;
      const auto j = judge_pairs(static_cast<int>(nnodes_), measurements(tests_), s_.cfg.slow_fraction, s_.cfg.min_gbps);
      std::vector<Pair> tested;
      for (const auto& p : j.pairs) tested.push_back(p.pair);
      const std::uint32_t ms = static_cast<std::uint32_t>(s_.cfg.seconds * 1000);
      for (const Round& r : pack_rounds(retest_pairs(static_cast<int>(nnodes_), tested, j.slow)))
        queue_round(r, ++rounds_, true, ms, "tcp");
    }
    const int k = static_cast<int>(rdma_ids_.size());
    const std::uint32_t ms = static_cast<std::uint32_t>(s_.cfg.seconds * 1000);
    if (plan_.empty() && !rdma_started_ && k >= 2) {
      rdma_started_ = true;
      rdma_.tested = true;
      for (const Round& r : first_rounds(k)) queue_round(to_nodes(r), ++rounds_, false, ms, "rdma");
    } else if (plan_.empty() && rdma_started_ && !rdma_retested_) {
      rdma_retested_ = true;
      const auto j = judge_pairs(static_cast<int>(nnodes_), measurements(tests_, "rdma"), s_.cfg.slow_fraction,
                                 s_.cfg.rdma_min_gbps);
      std::vector<Pair> tested;
      for (const auto& p : j.pairs) tested.push_back(p.pair);
      for (const Round& r : pack_rounds(retest_pairs(k, to_subset(tested), to_subset(j.slow))))
        queue_round(to_nodes(r), ++rounds_, true, ms, "rdma");
    }
    if (plan_.empty() && !nccl_started_ && nccl_ids_.size() >= 2) {
      nccl_started_ = true;
      // Each round: every pair's all_reduce at once, both ranks' figures (no re-test:
      // a probe's start costs seconds, and the pairs above already tell node from link).
      for (const Round& r : first_rounds(static_cast<int>(nccl_ids_.size()))) {
        Step st{Step::kNccl, {}, 0, to_nodes(r, nccl_ids_)};
        ++rounds_;
        for (const Pair& p : st.pairs) {
          st.records.push_back(record(p.a, p.b, false, rounds_, false, "nccl"));
          st.records.push_back(record(p.b, p.a, false, rounds_, false, "nccl"));
        }
        plan_.push_back(st);
      }
    }
    if (plan_.empty()) return finish();
    start_step();
  }

  void finish() {
    finished_ = true;
    if (in_step_) end_step();
    std::vector<TaskHello> tasks;
    for (const auto& [rank, h] : hellos_) tasks.push_back(h);
    FabricReport rep;
    rep.job_step = s_.job_step;
    rep.nodes = nodes_;
    rep.tests = tests_;
    rep.rounds = rounds_;
    std::vector<Finding> findings;
    if (!testing_ || !setup_error_.empty()) {
      std::string missing;
      std::size_t count = 0;
      for (std::uint32_t r = 0; r < s_.total_tasks; ++r)
        if (!hellos_.count(r) && count++ < 8) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      const std::string why = !setup_error_.empty()
                                  ? setup_error_
                                  : "no hello from " + std::to_string(s_.total_tasks - hellos_.size()) + " of " +
                                        std::to_string(s_.total_tasks) + " tasks (ranks " + missing +
                                        (count > 8 ? ",..." : "") + ") within " +
                                        std::to_string(static_cast<int>(s_.cfg.timeout_s)) +
                                        " s: a node did not launch, or cannot reach srun";
      findings.push_back(Finding{"unreachable", true, "srun", why});
    } else {
      rep.judgement = judge_pairs(static_cast<int>(nnodes_), measurements(tests_), s_.cfg.slow_fraction, s_.cfg.min_gbps);
      rdma_.judgement = judge_pairs(static_cast<int>(nnodes_), measurements(tests_, "rdma"), s_.cfg.slow_fraction,
                                    s_.cfg.rdma_min_gbps);
      findings = listen_errors_;
      int port = 0;
      if (!nodes_.empty()) port = nodes_[0].port;
      for (auto& f : pair_findings(nodes_, tests_, rep.judgement, port)) findings.push_back(f);
      for (auto& f : pair_findings(nodes_, tests_, rdma_.judgement, port, "rdma")) findings.push_back(f);
      for (auto& f : rdma_findings(nodes_, rdma_)) findings.push_back(f);
      rep.nccl_tested = nccl_started_;
      rep.nccl_judgement = judge_pairs(static_cast<int>(nnodes_), measurements(tests_, "nccl"), s_.cfg.slow_fraction, 0);
      for (auto& f : pair_findings(nodes_, tests_, rep.nccl_judgement, port, "nccl")) findings.push_back(f);
      for (const auto& [n, why] : nccl_none_) rep.nccl_none[nodes_[n].name] = why;
      if (timed_out_)
        findings.push_back(Finding{"unreachable", true, "srun",
                                   "the test did not finish within fabric.timeout (" +
                                       std::to_string(static_cast<int>(s_.cfg.timeout_s)) + " s)"});
    }
    for (auto& f : find_lists_matching_nothing(tasks)) findings.push_back(f);
    for (auto& f : find_differences(tasks)) findings.push_back(f);
    for (auto& f : find_layout_mistakes(tasks, s_.total_tasks)) findings.push_back(f);
    rep.findings = findings;
    rep.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    const std::string path = s_.report_dir.empty() ? "" : s_.report_dir + "/fabric.json";
    rep.rdma = rdma_;
    rep.verdict = fabric_verdict(findings, s_.cfg.action == "fail", rep.judgement, nodes_.size(), path, &rdma_,
                                 &rep.nccl_judgement);
    std::string write_error = path.empty() ? "no diag dir" : (s_.dir_check ? s_.dir_check(s_.report_dir) : "");
    if (write_error.empty()) write_error = write_report_file(s_.report_dir, "fabric.json", fabric_json(rep), s_.uid);
    std::string text;
    for (auto line : rep.verdict.lines) {
      auto at = line.find(" (all figures: ");
      if (!write_error.empty() && at != std::string::npos)  // never point at a file that is not there
        line = line.substr(0, at) + " (no fabric.json: " + write_error + ")";
      text += line + "\n";
    }
    (void)!::write(STDERR_FILENO, text.data(), text.size());
    const std::string end = format_order(Order{Order::kEnd, 0, "", 0, 0, rep.verdict.start});
    for (auto& c : clients_)
      if (c.hello && c.fd >= 0) send_now(c.fd, end);
  }

  int listen_fd_;
  std::string token_;
  std::string proof_;
  CoordinatorSettings s_;
  Clock::time_point start_;
  std::vector<Client> clients_;
  std::map<std::uint32_t, TaskHello> hellos_;
  std::map<std::uint32_t, int> leader_fd_;
  std::vector<std::uint32_t> lost_;
  std::uint32_t nnodes_ = 0;
  std::vector<NodeEntry> nodes_;
  std::vector<Finding> listen_errors_;
  std::string setup_error_;
  std::deque<Step> plan_;
  Step::Kind step_kind_ = Step::kTest;
  std::map<NodePair, bool> waiting_;          // setup replies asked for: answered yet
  std::map<NodePair, QpInfo> qp_info_;        // (node, peer): the queue pair node made for peer
  std::map<NodePair, std::string> rdma_broken_;  // key(a, b): why RDMA between them cannot run
  std::vector<int> rdma_ids_;                 // nodes with RDMA, by id
  RdmaSummary rdma_;
  bool rdma_started_ = false, rdma_retested_ = false, nccl_started_ = false;
  std::vector<int> nccl_ids_;                  // nodes that run NCCL pairs, by id
  std::set<NodePair> nccl_id_heard_;           // (rank 0, rank 1) whose id went on
  std::map<std::uint32_t, std::string> nccl_none_;  // why the others do not
  std::vector<Edge> step_;
  std::vector<TestRecord> tests_;
  Clock::time_point step_until_ = Clock::time_point::max();
  bool testing_ = false, in_step_ = false, retested_ = false, finished_ = false, timed_out_ = false;
  int rounds_ = 0;
};

void serve(int listen_fd, std::string token, std::string proof, CoordinatorSettings s) {
  try {
    Coordinator(listen_fd, std::move(token), std::move(proof), std::move(s)).run();
  } catch (...) {
    // srun's thread: nothing escapes. The tasks see the connection close and refuse.
  }
}

}  // namespace

std::string write_report_file(const std::string& dir, const std::string& name, const std::string& text, uid_t uid) {
  const DirOpen d = open_private_dir(dir.c_str(), uid);
  if (d.not_private) return dir + " is not your own private directory";
  if (d.fd < 0) return dir + ": " + std::strerror(d.err);
  const NewWrite w = write_new_file(d.fd, {name}, text);
  ::close(d.fd);
  return w.step == NewWrite::done ? "" : dir + "/" + name + ": " + std::strerror(w.err);
}

CoordinatorStart start_fabric_coordinator(const CoordinatorSettings& s) {
  CoordinatorStart out;
  auto token = new_step_token();
  auto proof = new_step_token();
  if (!token || !proof) {
    out.error = std::string("no random token: ") + std::strerror(errno);
    return out;
  }
  int port = 0;
  int fd = tcp_listen("", 0, 1024, port, out.error);
  if (fd < 0) return out;
  out.error = start_detached_thread([fd, token = *token, proof = *proof, s] { serve(fd, token, proof, s); });
  if (!out.error.empty()) {
    ::close(fd);
    return out;
  }
  out.endpoint = Endpoint{port, *token, *proof};
  return out;
}

}  // namespace gpudiag::fabric
