#pragma once
// The step's ranks merged into classes (LLNL STAT's equivalence classes, issue 31.2):
// ranks whose class frames (rank_stack.h) are the same form one class. A class much
// smaller than the largest, or a rank alone in its class, is a suspect: in a hang almost
// every rank waits in the same collective for the few that never reached it.
//
// Linear in the ranks: one hash lookup per rank, a sort of the classes and one of each
// class's ranks; bench/stack_merge.py measures 4,096 ranks.
#include <cstddef>
#include <string>
#include <vector>

#include "stacks/verdict/rank_stack.h"

namespace gpudiag {

struct RankRef {
  std::string node;
  int rank = -1;
};

struct StackClass {
  StackSource source = StackSource::none;
  std::vector<std::string> frames;  // innermost first
  std::string why;                  // source none: the first rank's reason
  std::vector<RankRef> ranks;       // by rank, then node
  bool suspect = false;
};

// A class this much smaller than the largest one is a suspect (or when it is one rank).
constexpr std::size_t kSuspectRatio = 4;

// Pure: the classes, largest first (equal sizes: the lowest rank first). Ranks without
// frames form classes by their reason and are never suspects: nothing says where they are.
std::vector<StackClass> stack_classes(std::vector<RankStack> ranks);

// Pure: "[n1:0-1,n2:2-3,n3:5]": runs of consecutive ranks on one node; a rank Slurm
// did not name shows as "n1:?". With `max_bytes`, cut at a run's end with ",+N more".
std::string compact_ranks(const std::vector<RankRef>& ranks, std::size_t max_bytes = 0);

// Pure: the merged view as text: one block per class (count, ranks, innermost
// `frames_shown` frames, SUSPECT where it is one), at most `max_classes` classes.
std::string classes_text(const std::vector<StackClass>& classes, std::size_t frames_shown = 4,
                         std::size_t max_classes = 32);

}  // namespace gpudiag
