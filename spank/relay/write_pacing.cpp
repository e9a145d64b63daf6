#include "spank/relay/write_pacing.h"

#include <algorithm>

namespace gpudiag {

void WritePacing::came_back(std::size_t queued, std::size_t capacity) {
  if (capacity == 0) return;
  if (queued == 0) {
    wait_ = 0;
  } else if (queued > capacity / 2) {
    wait_ = wait_ == 0 ? kFirstWait : std::min(2 * wait_, kMaxWait);
  } else if (queued < capacity / 4) {
    wait_ = wait_ / 2 < kFirstWait ? 0 : wait_ / 2;
  }
}

}  // namespace gpudiag
