// fabric/ (issue 32), the NCCL part: the unique id and results on the wire, the probe's
// lines, and one pair's two ranks through the real gpudiag-gpu-probe on the fake CUDA
// and NCCL (tests/fakes), the id passed from rank 0 to rank 1 as srun passes it.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>

#include "fabric/fabric_report.h"
#include "fabric/fabric_wire.h"
#include "fabric/nccl_pair.h"

namespace gpudiag::fabric {
namespace {

const std::string kId = std::string(200, 'a') + std::string(56, '0');

TEST(FabricWire, NcclOrdersAndReportsRoundTrip) {
  Order zero;
  zero.kind = Order::kNccl;
  zero.peer = 2;
  Order one = zero;
  one.rank = 1;
  one.nccl_id = kId;
  for (const auto& o : {zero, one}) {
    std::string l = format_order(o);
    l.pop_back();
    auto p = parse_order(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_order(*p), l + "\n");
    EXPECT_EQ(p->rank, o.rank);
    EXPECT_EQ(p->nccl_id, o.nccl_id);
  }
  EXPECT_FALSE(parse_order("nccl 2 1"));                   // rank 1 needs the id
  EXPECT_FALSE(parse_order("nccl 2 1 " + kId.substr(1)));  // 255 digits
  EXPECT_FALSE(parse_order("nccl 2 1 " + std::string(256, 'G')));
  EXPECT_FALSE(parse_order("nccl 2 2"));
  TestReport id;
  id.kind = TestReport::kNcclId;
  id.peer = 1;
  id.nccl_id = kId;
  TestReport done;
  done.kind = TestReport::kNcclDone;
  done.peer = 0;
  done.bytes = 8u << 20;
  done.usec = 12345;
  TestReport failed = done;
  failed.error = "ncclCommInitRank failed: remote process exited or there was a network error (6)";
  for (const auto& r : {id, done, failed}) {
    std::string l = format_test_report(r);
    l.pop_back();
    auto p = parse_test_report(l);
    ASSERT_TRUE(p) << l;
    EXPECT_EQ(format_test_report(*p), l + "\n");
    EXPECT_EQ(p->nccl_id, r.nccl_id);
  }
  EXPECT_FALSE(parse_test_report("nid 1 ok " + std::string(256, 'Z')));
}

TEST(NcclProbeLine, OnlyTheProbesThreeShapes) {
  auto id = parse_probe_line("{\"id\":\"" + kId + "\"}");
  ASSERT_TRUE(id);
  EXPECT_EQ(id->id, kId);
  auto res = parse_probe_line(R"({"bytes":41943040,"usec":5000,"gpu":"NVIDIA H100","probe":"pair"})");
  ASSERT_TRUE(res);
  EXPECT_EQ(*res->bytes, 41943040u);
  auto err = parse_probe_line(R"({"error":{"kind":"gpu","message":"ncclAllReduce failed\u001b[2J"},"probe":"pair"})");
  ASSERT_TRUE(err);
  EXPECT_EQ(err->error.find('\x1b'), std::string::npos) << err->error;
  EXPECT_FALSE(parse_probe_line(R"({"id":"abc"})"));
  EXPECT_FALSE(parse_probe_line(R"({"bytes":1,"usec":0})"));
  EXPECT_FALSE(parse_probe_line(R"({"bytes":-1,"usec":5})"));
  EXPECT_FALSE(parse_probe_line("not json"));
  EXPECT_FALSE(parse_probe_line("[1]"));
}

TEST(NcclVerdict, AHealthyLineGivesTheBusBandwidth) {
  std::vector<Measurement> m = {{0, 1, false, 5.0, ""}, {1, 0, false, 5.0, ""}};
  auto tcp = judge_pairs(2, m, 0.25, 0);
  auto v = fabric_verdict({}, true, tcp, 2, "", nullptr, &tcp);
  EXPECT_NE(v.lines[0].find(", 5.00-5.00 Gb/s over NCCL (bus bandwidth), nothing differs: ok"), std::string::npos)
      << v.lines[0];
}

#if defined(GPUDIAG_PROBE) && defined(GPUDIAG_FAKE_CUDA) && defined(GPUDIAG_FAKE_NCCL)
// The id holds rank 0's bootstrap address and magic: every user on the node can read a
// process's command line, only its owner its environment (adversary review, B2).
TEST(NcclPair, TheIdReachesRankOneInItsEnvironmentNeverOnItsCommandLine) {
  char dir[] = "/tmp/gpudiag-nccl-id-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir, probe = d + "/probe";
  {
    std::FILE* f = std::fopen(probe.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "#!/bin/sh\nprintf '%%s\\n' \"$*\" > %s/argv\nprintf '%%s' \"$GPUDIAG_NCCL_PAIR_ID\" > %s/id\n"
                    "exit 1\n", dir, dir);
    std::fclose(f);
  }
  ASSERT_EQ(::chmod(probe.c_str(), 0755), 0);
  auto one = run_nccl_pair(NcclProbe{probe, "", ""}, 1, kId, 10, [](const std::string&) { return false; });
  EXPECT_NE(one.error, "");  // the stand-in gives no result
  auto slurp = [&](const std::string& name) {
    std::ifstream in(d + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string argv = slurp("argv"), id = slurp("id");
  EXPECT_NE(argv.find("pair --rank 1"), std::string::npos) << argv;
  EXPECT_EQ(argv.find(kId.substr(0, 16)), std::string::npos) << argv;
  EXPECT_EQ(id, kId);
  for (const char* name : {"argv", "id", "probe"}) std::remove((d + "/" + name).c_str());
  ::rmdir(dir);
}

TEST(NcclOnTheFakes, TwoRanksThroughTheProbeWithTheIdPassedOn) {
  ::setenv("FAKE_GPUS", "1", 1);
  const NcclProbe p{GPUDIAG_PROBE, GPUDIAG_FAKE_CUDA, GPUDIAG_FAKE_NCCL};
  std::promise<std::string> id;
  auto id_said = id.get_future();
  auto zero = std::async(std::launch::async, [&] {
    return run_nccl_pair(p, 0, "", 20, [&](const std::string& i) {
      id.set_value(i);
      return true;
    });
  });
  ASSERT_EQ(id_said.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const std::string the_id = id_said.get();
  auto one = run_nccl_pair(p, 1, the_id, 20, [](const std::string&) { return false; });
  auto z = zero.get();
  EXPECT_EQ(z.error, "");
  EXPECT_EQ(one.error, "");
  EXPECT_EQ(z.bytes, 5u * (8u << 20));
  EXPECT_GT(one.usec, 0u);
  // A probe that is not there: a clear reason, at once.
  std::string why;
  EXPECT_EQ(nccl_probe_path("/nonexistent/gpudiag-gpu-probe", why), "");
  EXPECT_EQ(why, "no GPU probe at /nonexistent/gpudiag-gpu-probe");
}
#endif

}  // namespace
}  // namespace gpudiag::fabric
