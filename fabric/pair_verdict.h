#pragma once
// Slow node or slow link, from what each pair moved in each direction (issue 32). Pure.
//
// The yardstick is the median over nodes of each node's best pair, not the median pair:
// with 3 nodes and one bad node, two pairs of three are slow and the median pair is a
// slow one. A pair is slow when a direction moved less than `slow_fraction` of the
// yardstick, or less than `min_gbps`. A node slow with every partner, one of whom is
// fast elsewhere, is a bad node; a slow pair of two nodes that are fast elsewhere is a
// bad link. A direction measured more than once counts its best figure: a link that is
// bad is slow every time, a busy moment is not.
#include <optional>
#include <string>
#include <vector>

#include "fabric/pair_plan.h"

namespace gpudiag::fabric {

struct Measurement {
  int from = 0, to = 0;  // node ids
  bool reach = false;    // the rendezvous port check: a connection, no data
  std::optional<double> gbps;  // none: the test failed (see error)
  std::string error;
};

struct PairFigure {
  Pair pair;
  std::optional<double> ab_gbps, ba_gbps;  // best figure each way, a->b and b->a
  bool slow = false;
};

struct PairJudgement {
  double reference_gbps = 0;  // the median node's best pair
  double threshold_gbps = 0;  // below this a direction is slow
  std::vector<PairFigure> pairs;
  std::vector<Pair> slow;
  std::vector<int> bad_nodes;
  std::vector<Pair> bad_links;
  std::vector<Pair> unsure;  // slow, but no node is fast with anyone to tell node from link
};

PairJudgement judge_pairs(int nodes, const std::vector<Measurement>& measured, double slow_fraction, double min_gbps);

}  // namespace gpudiag::fabric
