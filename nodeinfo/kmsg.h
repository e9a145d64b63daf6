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

// Whether the kernel itself wrote a record: its printk records have facility 0
// (LOG_KERN). Whatever userspace writes to /dev/kmsg, root included, gets another
// facility: devkmsg_write() forces LOG_USER unless the writer names a non-zero one,
// "to reliably distinguish kernel-generated messages from userspace-injected ones".
bool written_by_kernel(const KmsgRecord& record);

// The NVIDIA driver's Xid line, as krcReportXid() prints it (portDbgPrintf, a printk
// of the kernel's facility at the default level), the message starting with it:
//   NVRM: Xid (PCI:0000:94:00): 79, pid=41222, name=python3, GPU has fallen off the bus.
//   NVRM: Xid (PCI:0000:94:00 GPU-I:01 GPU-CI:00): 43, pid=..., name=..., ...  (MIG)
// Only the whole form counts: a domain of 4 to 8 hex digits, a bus and a device of 2,
// a code of 1 to 4 digits, then the end or ",". Text a user chooses that the kernel
// logs cannot be it: a file name comes later in a segfault line, and a process name
// (at the start of segfault, OOM and ratelimit lines) has 15 bytes, exactly
// "NVRM: Xid (PCI:", after which the kernel prints '[', ' ', ':' or '(', never a hex
// digit. Drivers before about 440 (2019) printed "Xid (0000:01:00)" without "PCI:";
// that form is not read, since a 15-byte name reaches into its address.
struct XidEvent {
  std::string gpu;     // the bus id, lower case: "0000:94:00"
  int xid = 0;
  std::string detail;  // MIG instance, then the rest of the line after "NN, "; printable ASCII only
};
std::optional<XidEvent> parse_xid_message(std::string_view message);
// An Xid only from a record the kernel wrote (written_by_kernel) whose message is one.
std::optional<XidEvent> parse_xid_record(const KmsgRecord& record);

}  // namespace gpudiag
