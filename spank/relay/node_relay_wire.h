#pragma once
// What a task hands the node's relay thread (node_relay.h) over their socketpair: one
// SOCK_SEQPACKET message per task, these bytes plus 3 or 5 fds passed with SCM_RIGHTS,
// in this order: [Slurm's stdout, our stdout pipe's read end] when `out`, then the same
// pair for stderr when `err`, then the write end of the task's answer pipe: the thread
// writes one byte into it when it took the streams and closes it either way, so that a
// task whose streams were not taken (slurmstepd out of fds) keeps Slurm's own. The bytes are a fixed header and the tag:
//   "GDR1" | local id (u32) | max line (u32) | flags (u8) | tag length (u16) | tag
// All integers in host order: both ends are the same build on the same node. The thread
// runs in slurmstepd as root, so a message that is not exactly this is refused whole.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpudiag {

struct TaskHandoff {
  std::uint32_t local_id = 0;
  std::uint32_t max_line = 0;
  bool out = false, err = false;          // which streams come with the message
  bool tag_out = true, tag_err = true;    // tag their lines, or pass the bytes as they are
  std::string tag;
};

constexpr std::size_t kMaxHandoffTag = 256;
// gpudiag sends slurmstepd's message size (kSlurmIoMessage, 1 KiB).
constexpr std::size_t kMaxHandoffLine = 4096;
constexpr std::size_t kMaxHandoffBytes = 4 + 4 + 4 + 1 + 2 + kMaxHandoffTag;

// Pure. nullopt: no streams, a tag longer than kMaxHandoffTag, or a max line outside
// 16 to kMaxHandoffLine bytes.
std::optional<std::string> encode_handoff(const TaskHandoff& h);
std::optional<TaskHandoff> decode_handoff(std::string_view bytes);
// How many fds a message with these streams carries, the answer pipe's included.
inline int handoff_fd_count(const TaskHandoff& h) { return (h.out ? 2 : 0) + (h.err ? 2 : 0) + 1; }
constexpr int kMaxHandoffFds = 5;

}  // namespace gpudiag
