// fabric/ (issue 32), the RDMA part: the queue pair's details on the wire, the port that
// NCCL_IB_HCA selects, the verdict per transport, and verbs RC writes between two
// "nodes" of this process over the fake libibverbs (tests/fakes/fake_ibverbs.cpp).
#include <gtest/gtest.h>

#include "fabric/fabric_report.h"
#include "fabric/fabric_wire.h"
#include "fabric/qp_info.h"
#include "fabric/rdma_verbs.h"

namespace gpudiag::fabric {
namespace {

QpInfo sample() {
  QpInfo q;
  q.hca = "mlx5_0";
  q.port = 1;
  q.lid = 0;
  q.qpn = 0x12345;
  q.psn = 0xabcde;
  q.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  q.gid_index = 3;
  q.mtu = 5;
  q.rkey = 0xdeadbeef;
  q.addr = 0x7f0012340000ull;
  q.length = 1u << 20;
  return q;
}

TEST(QpInfo, FormatsAndParsesBack) {
  const QpInfo q = sample();
  const std::string text = format_qp_info(q);
  EXPECT_EQ(text, "mlx5_0 1 0 74565 703710 00000000000000000000ffff0a000002 3 5 3735928559 139638282125312 1048576");
  auto back = parse_qp_info(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, q);
  QpInfo ib = q;
  ib.gid_index = -1;  // InfiniBand inside a subnet: no GRH
  ib.lid = 17;
  auto ib_back = parse_qp_info(format_qp_info(ib));
  ASSERT_TRUE(ib_back);
  EXPECT_EQ(*ib_back, ib);
}

TEST(QpInfo, RefusesWhatAnotherNodeCouldSendToHarm) {
  const std::string good = format_qp_info(sample());
  EXPECT_TRUE(parse_qp_info(good));
  auto with = [&](int field, const std::string& value) {
    std::vector<std::string> f;
    std::size_t start = 0;
    for (;;) {
      auto sp = good.find(' ', start);
      f.push_back(good.substr(start, sp == std::string::npos ? std::string::npos : sp - start));
      if (sp == std::string::npos) break;
      start = sp + 1;
    }
    f[field] = value;
    std::string s;
    for (std::size_t i = 0; i < f.size(); ++i) s += (i ? " " : "") + f[i];
    return s;
  };
  EXPECT_FALSE(parse_qp_info(with(0, "mlx5\x1b[2J")));          // control bytes reach a terminal
  EXPECT_FALSE(parse_qp_info(with(0, std::string(65, 'm'))));    // a long name
  EXPECT_FALSE(parse_qp_info(with(1, "0")));                     // ports count from 1
  EXPECT_FALSE(parse_qp_info(with(2, "65536")));                 // a LID is 16 bits
  EXPECT_FALSE(parse_qp_info(with(3, "16777216")));              // a QPN is 24 bits
  EXPECT_FALSE(parse_qp_info(with(4, "16777216")));              // so is a PSN
  EXPECT_FALSE(parse_qp_info(with(3, "0123")));                  // leading zero: not as formatted
  EXPECT_FALSE(parse_qp_info(with(3, "-1")));
  EXPECT_FALSE(parse_qp_info(with(5, std::string(31, '0'))));    // a GID is 16 bytes
  EXPECT_FALSE(parse_qp_info(with(5, std::string(31, '0') + "G")));
  EXPECT_FALSE(parse_qp_info(with(5, std::string(32, 'A'))));    // lowercase, as formatted
  EXPECT_FALSE(parse_qp_info(with(6, "256")));
  EXPECT_FALSE(parse_qp_info(with(7, "6")));                     // IBV_MTU_4096 is 5
  EXPECT_FALSE(parse_qp_info(with(7, "0")));
  EXPECT_FALSE(parse_qp_info(with(1, "256")));
  EXPECT_FALSE(parse_qp_info(with(8, "4294967296")));            // an rkey is 32 bits
  EXPECT_FALSE(parse_qp_info(with(9, "18446744073709551616")));  // 2^64
  EXPECT_FALSE(parse_qp_info(with(10, "0")));
  EXPECT_FALSE(parse_qp_info(with(10, std::to_string(65u << 20))));  // more than a test registers
  EXPECT_FALSE(parse_qp_info(good + " 1"));
  EXPECT_FALSE(parse_qp_info(good.substr(0, good.rfind(' '))));
  EXPECT_FALSE(parse_qp_info(good + std::string(400, ' ')));
  EXPECT_FALSE(parse_qp_info(""));
  EXPECT_TRUE(parse_qp_info(with(9, "18446744073709551615")));   // 2^64-1 is an address
}

TEST(FabricWire, RdmaOrdersAndReportsRoundTrip) {
  Order qp;
  qp.kind = Order::kQp;
  qp.peer = 2;
  Order conn;
  conn.kind = Order::kConnect;
  conn.peer = 1;
  conn.qp = sample();
  Order write;
  write.kind = Order::kWrite;
  write.peer = 0;
  write.ms = 500;
  for (const auto& o : {qp, conn, write}) {
    std::string l = format_order(o);
    l.pop_back();
    auto p = parse_order(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_order(*p), l + "\n");
    EXPECT_EQ(p->kind, o.kind);
  }
  EXPECT_EQ(parse_order("connect 1 " + format_qp_info(sample()))->qp, sample());
  EXPECT_FALSE(parse_order("write 1 60001"));  // longer than any test
  EXPECT_FALSE(parse_order("connect 1 mlx5_0 1"));
  EXPECT_FALSE(parse_order("qp x"));
  TestReport made;
  made.kind = TestReport::kQp;
  made.peer = 1;
  made.qp = sample();
  TestReport failed = made;
  failed.error = "ibv_reg_mr: Cannot allocate memory (ulimit -l: locked memory?)";
  TestReport ready;
  ready.kind = TestReport::kReady;
  ready.peer = 2;
  TestReport written;
  written.kind = TestReport::kWritten;
  written.peer = 2;
  written.bytes = 1u << 30;
  written.usec = 500000;
  TestReport write_failed = written;
  write_failed.error = "RDMA write failed: transport retry counter exceeded (status 12)";
  for (const auto& r : {made, failed, ready, written, write_failed}) {
    std::string l = format_test_report(r);
    l.pop_back();
    auto p = parse_test_report(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_test_report(*p), l + "\n");
    EXPECT_EQ(p->kind, r.kind);
    EXPECT_EQ(p->error, r.error);
  }
  EXPECT_FALSE(parse_test_report("qp 1 ok mlx5_0 1 0"));
  EXPECT_FALSE(parse_test_report("wtx 1 ok 100"));
  EXPECT_FALSE(parse_test_report("ready 1 ok extra"));
  EXPECT_FALSE(parse_test_report("wtx 1 err \x1b[2J"));
}

TEST(RdmaPort, TheFirstActivePortThatNcclIbHcaSelects) {
  const std::vector<Hca> hcas = {{"mlx5_0", {{1, false, false}}},
                                 {"mlx5_1", {{1, true, false}, {2, true, false}}},
                                 {"mlx5_10", {{1, true, true}}}};
  using P = std::pair<std::string, int>;
  EXPECT_EQ(pick_hca_port(hcas, ""), P("mlx5_1", 1));        // all: the first active
  EXPECT_EQ(pick_hca_port(hcas, "mlx5_1:2"), P("mlx5_1", 2));
  EXPECT_EQ(pick_hca_port(hcas, "=mlx5_10"), P("mlx5_10", 1));
  EXPECT_EQ(pick_hca_port(hcas, "mlx5_1"), P("mlx5_1", 1));  // a prefix: mlx5_10 too, mlx5_1 first
  EXPECT_EQ(pick_hca_port(hcas, "^mlx5_1"), std::nullopt);   // a prefix excludes mlx5_10 as well
  EXPECT_EQ(pick_hca_port(hcas, "^=mlx5_1"), P("mlx5_10", 1));
  EXPECT_EQ(pick_hca_port(hcas, "mlx5_0"), std::nullopt);    // listed but down
  EXPECT_EQ(pick_hca_port(hcas, "mlx5_1:3"), std::nullopt);
  EXPECT_EQ(pick_hca_port({}, ""), std::nullopt);
}

TEST(RdmaVerdict, EachTransportIsJudgedAndNamedApart) {
  std::vector<NodeEntry> nodes = {{"n1", "10.0.0.1", 1}, {"n2", "10.0.0.2", 2}, {"n3", "10.0.0.3", 3}};
  auto rec = [](int from, int to, std::uint64_t bytes, const char* transport) {
    TestRecord t;
    t.from = from, t.to = to, t.bytes = bytes, t.usec = 1000000, t.transport = transport;
    return t;
  };
  // TCP is fine everywhere; over RDMA n3 is slow with both partners.
  std::vector<TestRecord> tests;
  for (auto [a, b] : {std::pair{0, 1}, {0, 2}, {1, 2}}) {
    tests.push_back(rec(a, b, 1250000000, "tcp"));
    tests.push_back(rec(b, a, 1250000000, "tcp"));
    const std::uint64_t rdma = (a == 2 || b == 2) ? 10000000 : 5000000000;
    tests.push_back(rec(a, b, rdma, "rdma"));
    tests.push_back(rec(b, a, rdma, "rdma"));
  }
  auto tcp = judge_pairs(3, measurements(tests), 0.25, 0);
  EXPECT_TRUE(tcp.slow.empty());
  EXPECT_EQ(tcp.pairs.size(), 3u);
  RdmaSummary r;
  r.hca = {"mlx5_0:1", "mlx5_0:1", "mlx5_0:1"};
  r.none = {"", "", ""};
  r.tested = true;
  r.judgement = judge_pairs(3, measurements(tests, "rdma"), 0.25, 0);
  EXPECT_EQ(r.judgement.bad_nodes, std::vector<int>{2});
  EXPECT_TRUE(pair_findings(nodes, tests, tcp, 1).empty());
  auto f = pair_findings(nodes, tests, r.judgement, 1, "rdma");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_NE(f[0].message.find("n3 is slow with every partner over RDMA"), std::string::npos) << f[0].message;
  auto failing = fabric_verdict(f, true, tcp, 3, "", &r);
  EXPECT_NE(failing.lines.back().find("scontrol update NodeName=n3 State=DRAIN"), std::string::npos);
  // Healthy RDMA: one line with both transports' figures.
  RdmaSummary ok = r;
  ok.judgement = tcp;
  auto v = fabric_verdict({}, true, tcp, 3, "", &ok);
  ASSERT_EQ(v.lines.size(), 1u);
  EXPECT_EQ(v.lines[0], "gpudiag: fabric: 3 nodes, 3 pairs, 10.0-10.0 Gb/s over TCP, 10.0-10.0 Gb/s over RDMA "
                        "(mlx5_0:1), nothing differs: ok");
  // Nodes without RDMA: said once, not a failure.
  RdmaSummary none;
  none.hca = {"", "", ""};
  none.none = {"no libibverbs.so.1", "no libibverbs.so.1", "no libibverbs.so.1"};
  EXPECT_TRUE(rdma_findings(nodes, none).empty());
  auto w = fabric_verdict({}, true, tcp, 3, "", &none);
  EXPECT_NE(w.lines[0].find(", no RDMA (no libibverbs.so.1), nothing differs: ok"), std::string::npos) << w.lines[0];
  // Some with, some without: a note naming them.
  RdmaSummary mixed = none;
  mixed.hca = {"mlx5_0:1", "mlx5_0:1", ""};
  auto m = rdma_findings(nodes, mixed);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_FALSE(m[0].fatal);
  EXPECT_EQ(m[0].subject, "n3");
  // fabric.json: the transport of every test and pair, the node to drain from RDMA too.
  FabricReport rep;
  rep.nodes = nodes;
  rep.tests = tests;
  rep.judgement = tcp;
  rep.rdma = r;
  rep.findings = f;
  rep.verdict = fabric_verdict(f, true, tcp, 3, "", &r);
  const std::string json = fabric_json(rep);
  EXPECT_NE(json.find("\"transport\": \"rdma\""), std::string::npos);
  EXPECT_NE(json.find("\"drain\": [\n    \"n3\"\n  ]"), std::string::npos) << json;
}

#ifdef GPUDIAG_FAKE_IBVERBS
// Two nodes in one process, each with its own device context, over the fake library:
// make, exchange, connect, write both ways, and a write to a key the peer never gave.
TEST(RdmaOnTheFake, RcWritesMoveBytesBothWaysAndABadKeyFails) {
  std::string why;
  auto a = RdmaNode::open(GPUDIAG_FAKE_IBVERBS, "", "", why);
  ASSERT_TRUE(a) << why;
  auto b = RdmaNode::open(GPUDIAG_FAKE_IBVERBS, "mlx5", "", why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(a->hca_port(), "mlx5_0:1");
  std::string error;
  auto qa = a->make_qp(1, error);
  ASSERT_TRUE(qa) << error;
  auto qb = b->make_qp(0, error);
  ASSERT_TRUE(qb) << error;
  EXPECT_EQ(qa->gid_index, 0);  // RoCE: the IPv4-mapped GID
  ASSERT_EQ(b->connect(0, *qa), "");
  ASSERT_EQ(a->connect(1, *qb), "");
  auto there = a->write_for(1, 100);
  EXPECT_EQ(there.error, "");
  EXPECT_GT(there.bytes, 0u);
  EXPECT_GT(there.usec, 0u);
  auto back = b->write_for(0, 100);
  EXPECT_EQ(back.error, "");
  EXPECT_GT(back.bytes, 0u);
  // A new queue pair for the same peer with a key that names nothing there.
  auto again = a->make_qp(1, error);
  ASSERT_TRUE(again);
  auto qb2 = b->make_qp(0, error);
  ASSERT_TRUE(qb2);
  QpInfo forged = *qb2;
  forged.rkey ^= 0x5a5a;
  ASSERT_EQ(b->connect(0, *again), "");
  ASSERT_EQ(a->connect(1, forged), "");
  auto bad = a->write_for(1, 50);
  EXPECT_NE(bad.error.find("RDMA write failed: remote access error"), std::string::npos) << bad.error;
  // No library: a clear reason, no RDMA.
  EXPECT_FALSE(RdmaNode::open("/nonexistent/libibverbs.so.1", "", "", why));
  EXPECT_EQ(why.rfind("no libibverbs.so.1 (tried /nonexistent/libibverbs.so.1", 0), 0u) << why;
  EXPECT_FALSE(RdmaNode::open(GPUDIAG_FAKE_IBVERBS, "mlx4", "", why));
  EXPECT_EQ(why, "no active port that NCCL_IB_HCA=mlx4 selects");
}
#endif

}  // namespace
}  // namespace gpudiag::fabric
