// The GPU probe's JSON (probe/probe_json.h): what the probe writes is what the checker
// reads, and a probe of another version or a broken one reads as "missing", never as
// an exception.
#include <gtest/gtest.h>

#include "probe/probe_json.h"

using namespace gpudiag;
using nlohmann::json;

TEST(ProbeJson, ErrorRoundTrips) {
  json e = probe_error_json(probe_json::kKindDriverFault, "cuInit failed", "reboot");
  EXPECT_EQ(e.dump(), R"({"error":{"hint":"reboot","kind":"driver_fault","message":"cuInit failed"}})");
  auto read = read_probe_error(e);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->kind, "driver_fault");
  EXPECT_EQ(read->message, "cuInit failed");
  EXPECT_EQ(read->hint, "reboot");
  // No hint: the key is left out, and reads as "".
  EXPECT_FALSE(probe_error_json("busy", "m").at("error").contains("hint"));
  EXPECT_EQ(read_probe_error(probe_error_json("busy", "m"))->hint, "");
}

TEST(ProbeJson, ErrorOfTheWrongShapeReadsAsEmptyFields) {
  EXPECT_FALSE(read_probe_error(json::parse(R"({"gpus": []})")));
  EXPECT_FALSE(read_probe_error(json::parse("[1, 2]")));
  auto odd = read_probe_error(json::parse(R"({"error": {"kind": 7, "message": ["x"]}})"));
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->kind, "");
  EXPECT_EQ(odd->message, "");
  EXPECT_TRUE(read_probe_error(json::parse(R"({"error": "text"})")));
}

TEST(ProbeJson, AllreduceRunRoundTrips) {
  AllreduceRun run{1ull << 30, 5000.5, false, "GPU 1 element 7 is 0.000000, expected 36.000000"};
  json answer = {{probe_json::kNcclVersion, "2.21.5"},
                 {probe_json::kGpus, json::array({{{"name", "NVIDIA H100 80GB HBM3"}}, {{"name", "x"}}})},
                 {probe_json::kResults, json::array({allreduce_run_json(run, 20, 5, 214.7, 322.0)})}};
  // What the probe writes, key for key (the checker's fuzz seeds and stand-ins use these).
  const json& r = answer["results"][0];
  EXPECT_EQ(r["bytes"], 1ull << 30);
  EXPECT_EQ(r["iters"], 20);
  EXPECT_EQ(r["warmup"], 5);
  EXPECT_EQ(r["time_us"], 5000.5);
  EXPECT_EQ(r["algbw_gbps"], 214.7);
  EXPECT_EQ(r["busbw_gbps"], 322.0);
  EXPECT_EQ(r["correct"], false);
  EXPECT_TRUE(r.contains("mismatch"));

  AllreduceAnswer a = read_allreduce_answer(answer);
  EXPECT_FALSE(a.not_applicable);
  EXPECT_EQ(a.nccl_version, "2.21.5");
  EXPECT_EQ(a.ranks, 2);
  EXPECT_EQ(a.model, "NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(a.first_run);
  EXPECT_EQ(a.first_run->bytes, 1ull << 30);
  EXPECT_EQ(a.first_run->time_us, 5000.5);
  EXPECT_FALSE(a.first_run->correct);
  EXPECT_EQ(a.first_run->mismatch, run.mismatch);

  // One rank: no busbw; a correct run: no mismatch.
  json one = allreduce_run_json({8, 1, true, ""}, 1, 0, 0.5, std::nullopt);
  EXPECT_FALSE(one.contains("busbw_gbps"));
  EXPECT_FALSE(one.contains("mismatch"));
}

TEST(ProbeJson, MalformedAllreduceHasNoRun) {
  for (const char* text : {R"({})", R"([])", R"({"results": []})", R"({"results": [3]})",
                           R"({"results": [{"bytes": 8}]})", R"({"results": [{"time_us": 1}]})",
                           R"({"results": [{"bytes": -8, "time_us": 1}]})", R"({"results": [{"bytes": 8, "time_us": "1"}]})",
                           R"({"results": {"bytes": 8, "time_us": 1}})"})
    EXPECT_FALSE(read_allreduce_answer(json::parse(text)).first_run) << text;
  AllreduceAnswer a = read_allreduce_answer(json::parse(R"({"gpus": [1], "results": [{"bytes": 8, "time_us": 1.5}]})"));
  EXPECT_EQ(a.ranks, 1);
  EXPECT_FALSE(a.model);
  ASSERT_TRUE(a.first_run);
  EXPECT_FALSE(a.first_run->correct);
  EXPECT_EQ(read_allreduce_answer(json::parse(R"j({"not_applicable": "MIG mode is on (GPU 0)"})j")).not_applicable,
            "MIG mode is on (GPU 0)");
}
