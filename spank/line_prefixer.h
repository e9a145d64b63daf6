#pragma once
// Splits one output stream into tagged lines, the pure half of the output relay.
//
// Every emitted line is TAG SEP PAYLOAD '\n' and at most `max_line` bytes long, because
// slurmstepd forwards a task's output in messages of at most 1024 bytes: a longer line
// reaches srun in pieces that interleave with other tasks' lines, and a piece without
// its tag could not be told apart. SEP says where the newline came from:
//   ' '  the payload ended with its own newline: a whole line, or the last piece of one;
//   '+'  the relay added the newline: the line goes on in this stream's next line (or,
//        at the end of the stream, the program wrote no final newline).
// So removing the tags is exact: per stream, join payloads, and put back the newline
// only after ' ' lines (see strip_prefixes). Any bytes pass through, NULs included.
#include <cstddef>
#include <string>
#include <string_view>

namespace gpudiag {

// slurmstepd's message bound (SLURM_IO_MAX_MSG_LEN): one line per message.
constexpr std::size_t kSlurmIoMessage = 1024;

class LinePrefixer {
 public:
  LinePrefixer(std::string tag, std::size_t max_line = kSlurmIoMessage);

  // Appends to `out` every line that `data` completes; holds a partial line.
  void feed(std::string_view data, std::string& out);
  // End of stream: emits a held partial line, marked '+'.
  void finish(std::string& out);
  std::size_t held() const { return held_.size(); }
  std::size_t max_payload() const { return max_payload_; }

 private:
  void emit(std::string_view payload, char sep, std::string& out) const;

  std::string tag_;
  std::size_t max_payload_;
  std::string held_;
};

// The inverse, for tests and tools: the original bytes of the stream whose lines carry
// `tag`. Every other line (other ranks, srun's own messages) is skipped.
std::string strip_prefixes(std::string_view text, std::string_view tag);

// Expands {host}, {rank} and {local_rank} in a prefix format such as "[{host}:{rank}]".
std::string expand_prefix_format(std::string_view format, std::string_view host, int rank, int local_rank);

}  // namespace gpudiag
