#pragma once
// Which nodes test each other, in rounds (issue 32). Pure.
//
// The first rounds are a ring cut into matchings (IBM autopilot's ring, in parallel):
// every node meets two partners, the pairs of a round are disjoint and run at once, so N
// nodes need 2 rounds (3 when N is odd), not N-1. A node slow with both partners is a
// suspect; as Google's Cluster Health Scanner does, it is tested again against a node
// that passed, and a slow pair of two nodes that are fine elsewhere is tested again
// itself (a noisy moment is not a bad link).
#include <vector>

namespace gpudiag::fabric {

struct Pair {
  int a = 0, b = 0;  // node indices, a < b
  bool operator==(const Pair&) const = default;
};
using Round = std::vector<Pair>;  // no node twice

// The ring's matchings over `nodes` nodes (0 or 1 node: none; 2: one pair).
std::vector<Round> first_rounds(int nodes);

// Packs pairs into as few rounds of disjoint pairs as a greedy pass finds, in order.
std::vector<Round> pack_rounds(const std::vector<Pair>& pairs);

// What to test again. `tested`: every pair measured so far; `slow`: those found slow.
// A node all of whose pairs are slow gets one node that is fast with someone, which it
// has not met yet (the first in a rotation by its own index, so suspects spread over the
// good nodes), or, having met them all, its slow pairs again; a slow pair whose nodes are both fast elsewhere, or where no node is fast
// with anyone, is tested once more.
std::vector<Pair> retest_pairs(int nodes, const std::vector<Pair>& tested, const std::vector<Pair>& slow);

}  // namespace gpudiag::fabric
