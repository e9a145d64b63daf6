// The fabric test's plan and verdict (fabric/pair_plan.*, pair_verdict.*) over any node
// count and any figures: rounds are disjoint, the ring meets every node twice, a re-test
// names only real pairs, and the verdict names only nodes and pairs that were measured.
#include <set>

#include "fabric/pair_plan.h"
#include "fabric/pair_verdict.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace gpudiag::fabric;
  if (size < 1) return 0;
  const int nodes = data[0] % 40;
  auto disjoint = [](const std::vector<Round>& rounds) {
    for (const auto& r : rounds) {
      std::set<int> seen;
      for (const auto& p : r) {
        GPUDIAG_FUZZ_CHECK(p.a < p.b && seen.insert(p.a).second && seen.insert(p.b).second);
      }
    }
  };
  auto first = first_rounds(nodes);
  disjoint(first);
  GPUDIAG_FUZZ_CHECK(first.size() <= 3);
  std::vector<Measurement> m;
  for (std::size_t i = 1; i + 2 < size; i += 3) {
    Measurement x;
    x.from = data[i] % (nodes + 2) - 1;
    x.to = data[i + 1] % (nodes + 2) - 1;
    if (data[i + 2] != 0xff) x.gbps = data[i + 2] / 10.0;
    m.push_back(x);
  }
  auto j = judge_pairs(nodes, m, 0.25, (data[0] & 0x80) ? 5 : 0);
  for (int n : j.bad_nodes) GPUDIAG_FUZZ_CHECK(n >= 0 && n < nodes);
  std::vector<Pair> tested;
  for (const auto& p : j.pairs) {
    GPUDIAG_FUZZ_CHECK(p.pair.a >= 0 && p.pair.a < p.pair.b && p.pair.b < nodes);
    tested.push_back(p.pair);
  }
  auto again = retest_pairs(nodes, tested, j.slow);
  for (const auto& p : again) GPUDIAG_FUZZ_CHECK(p.a >= 0 && p.a < p.b && p.b < nodes);
  disjoint(pack_rounds(again));
  return 0;
}
