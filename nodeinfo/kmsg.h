#pragma once
// The kernel log as /dev/kmsg hands it out, and the NVIDIA driver's Xid lines in it.
// A record is `PRIO,SEQ,USEC,FLAGS[,...];MESSAGE`, followed by continuation lines that
// start with a space (" SUBSYSTEM=pci"). Under --fs-root, DIR/dev/kmsg is a regular
// file of such records, one after another.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nodeinfo/rooted_fs.h"

namespace gpudiag {

struct KmsgRecord {
  int priority = 0;  // syslog facility*8 + level, as the kernel writes it
  std::uint64_t seq = 0;
  std::uint64_t usec = 0;  // since boot
  std::string message;
};

// One record's first line (without the newline); nullopt for anything else: a
// continuation line, a half-written or binary line.
std::optional<KmsgRecord> parse_kmsg_record(std::string_view line);

// Every record in a file of records; lines that are neither a record nor a
// continuation are counted, not fatal.
struct KmsgLog {
  std::vector<KmsgRecord> records;
  std::size_t malformed = 0;
  bool overwritten = false;  // the ring buffer wrapped while or before it was read
};
KmsgLog parse_kmsg_text(std::string_view text);

// How reading the log went. `denied`: the kernel refused (kernel.dmesg_restrict=1 and
// no CAP_SYSLOG), which has a fix of its own.
struct KmsgRead {
  KmsgLog log;
  std::string error;  // empty when read
  bool denied = false;
};
// /dev/kmsg: the device itself (one record per read() until EAGAIN) on the host root,
// the regular file DIR/dev/kmsg under another root.
KmsgRead read_kmsg(const RootedFs& fs);

// `NVRM: Xid (PCI:0000:94:00): 79, pid=41222, name=python3, GPU has fallen off the bus.`
// and the older `NVRM: Xid (0000:94:00): 79, ...`.
struct XidEvent {
  std::string gpu;     // the bus id as the driver printed it, "0000:94:00"
  int xid = 0;
  std::string detail;  // the rest of the line after "NN, ", control bytes dropped
};
std::optional<XidEvent> parse_xid_message(std::string_view message);

}  // namespace gpudiag
