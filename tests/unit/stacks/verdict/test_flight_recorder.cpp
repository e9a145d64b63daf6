// torch's flight recorder, read (issue 31.4): the pickle subset torch writes, one rank's
// last collective on the default group, and the ranks missing from the one the others
// started. The dumps in tests/data/torch-fr follow torch's FlightRecorder.hpp layout
// (version 2.4 keys), pickled at protocol 2 as torch::jit::Pickler writes them: this
// machine's torch (1.13, gloo only) cannot record, so they are built from torch's source,
// not dumped by a real torch.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "stacks/verdict/flight_recorder.h"
#include "stacks/verdict/pickle_reader.h"
#include "tests/unit/slurp.h"

using namespace gpudiag;
using gpudiag::test::slurp;

namespace {

const std::string kDumps = std::string(GPUDIAG_SOURCE_DIR) + "/tests/data/torch-fr";

}  // namespace

TEST(PickleReader, ReadsTheSubsetTorchWrites) {
  auto r = read_pickle(slurp(kDumps + "/fr_trace.rank0"));
  ASSERT_TRUE(r.ok) << r.why;
  ASSERT_NE(r.value.get("version"), nullptr);
  EXPECT_EQ(r.value.get("version")->s, "2.4");
  const PickleValue* entries = r.value.get("entries");
  ASSERT_NE(entries, nullptr);
  EXPECT_EQ(entries->items.size(), 14u);
  const PickleValue& e = entries->items[0];
  EXPECT_EQ(e.get("time_created_ns")->i, 1732600000000000001);  // LONG1
  EXPECT_EQ(e.get("duration_ms")->d, 0.25);                     // BINFLOAT
  EXPECT_EQ(e.get("process_group")->kind, PickleValue::Kind::tuple);
  EXPECT_EQ(e.get("input_sizes")->items[0].items[1].i, 1024);  // BININT2
}

TEST(PickleReader, RefusesWhatTorchNeverWritesAndStaysBounded) {
  // cos.system\n(S'id'\ntR. : a GLOBAL that is not torch's list builder is never "called".
  auto evil = read_pickle(std::string("\x80\x02" "cos\nsystem\nX\x02\x00\x00\x00id\x85R.", 23));
  EXPECT_FALSE(evil.ok);
  EXPECT_NE(evil.why.find("REDUCE of os.system"), std::string::npos) << evil.why;
  EXPECT_FALSE(read_pickle("").ok);
  EXPECT_FALSE(read_pickle("\x80\x02}").ok);                           // no STOP
  EXPECT_FALSE(read_pickle(std::string("\x80\x02X\xff\xff\xff\x7f", 7)).ok);  // a length past the end
  EXPECT_FALSE(read_pickle("\x80\x02S'x'\n.").ok);                     // text opcodes are outside the subset
  std::string deep = "\x80\x02";
  for (int i = 0; i < 200; ++i) deep += "]";
  for (int i = 0; i < 199; ++i) deep += "a";
  deep += ".";
  auto d = read_pickle(deep);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.why.find("deep"), std::string::npos) << d.why;
  // A memo that doubles a list on every get: the value budget stops it.
  std::string bomb = "\x80\x02]q\x00";
  for (int i = 0; i < 40; ++i) bomb += "h\x00h\x00\x86q\x00";
  bomb += ".";
  auto b = read_pickle(std::string(bomb.data(), bomb.size()));
  EXPECT_FALSE(b.ok);
}

TEST(FlightRecorder, EachRanksLastCollectiveOnTheDefaultGroup) {
  auto r0 = flight_rank_from_dump(slurp(kDumps + "/fr_trace.rank0"), 0);
  ASSERT_TRUE(r0.read) << r0.why;
  EXPECT_EQ(r0.version, "2.4");
  EXPECT_EQ(r0.last_seq, 12);  // not the p2p send, not group 1's all_gather #40
  EXPECT_EQ(r0.last_name, "all_reduce");
  EXPECT_EQ(r0.last_state, "started");
  auto r3 = flight_rank_from_dump(slurp(kDumps + "/fr_trace.rank3"), 3);
  EXPECT_EQ(r3.last_seq, 11);
  EXPECT_EQ(r3.last_state, "completed");
  auto bad = flight_rank_from_dump("garbage", 5);
  EXPECT_FALSE(bad.read);
  EXPECT_NE(bad.why.find("not a flight-recorder dump"), std::string::npos);
}

TEST(FlightRecorder, NamesTheRanksMissingFromTheCollectiveTheOthersStarted) {
  struct stat st {};
  ASSERT_EQ(::stat((kDumps + "/fr_trace.rank0").c_str(), &st), 0);
  auto dumps = read_flight_dumps(kDumps, st.st_uid);
  ASSERT_EQ(dumps.size(), 4u);
  std::vector<RankRef> nodes = {{"n1", 0}, {"n1", 1}, {"n2", 2}, {"n2", 3}};
  EXPECT_EQ(flight_finding(dumps, nodes),
            "gpudiag: flight recorder: [n2:3] never reached all_reduce #12, which [n1:0-1,n2:2] started (3 rank(s))\n");
  dumps.pop_back();
  EXPECT_EQ(flight_finding(dumps, nodes), "gpudiag: flight recorder: all 3 dumped ranks reached all_reduce #12\n");
  dumps.push_back(flight_rank_from_dump("x", 3));
  EXPECT_NE(flight_finding(dumps, nodes).find("; no dump from [n2:3]"), std::string::npos);
  // Another owner's files are not read.
  for (const auto& r : read_flight_dumps(kDumps, st.st_uid + 1)) EXPECT_FALSE(r.read);
  EXPECT_EQ(flight_finding({}, nodes), "");
  EXPECT_EQ(flight_absent_finding().rfind("gpudiag: flight recorder: no dump (", 0), 0u);
}

// Dumps a real torch 2.11 wrote on a real GPU (tests/data/torch-fr-2.11/README.md): the
// reader takes what torch itself pickles, not only what its source says it pickles.
TEST(FlightRecorder, ReadsWhatARealTorchWrote) {
  const std::string dir = std::string(GPUDIAG_SOURCE_DIR) + "/tests/data/torch-fr-2.11";
  auto piped = flight_rank_from_dump(slurp(dir + "/pipe_dump.rank0"), 0);
  ASSERT_TRUE(piped.read) << piped.why;
  EXPECT_EQ(piped.version, "2.10");
  EXPECT_EQ(piped.last_seq, 7);
  EXPECT_EQ(piped.last_name, "all_reduce");
  EXPECT_EQ(piped.last_state, "completed");
  auto in_flight = flight_rank_from_dump(slurp(dir + "/in_flight.rank0"), 0);
  ASSERT_TRUE(in_flight.read) << in_flight.why;
  EXPECT_EQ(in_flight.last_seq, 7);
  EXPECT_EQ(in_flight.last_name, "all_reduce");
  EXPECT_EQ(in_flight.last_state, "scheduled");
}

