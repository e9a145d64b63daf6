// /dev/kmsg as a file of records (what --fs-root reads) and the NVRM Xid lines in
// them: whatever the bytes, no crash, what is parsed is what a report may quote, and an
// Xid comes only from a kernel record that starts with the driver's prefix (issue 30).
#include "fuzz/fuzz_input.h"
#include "nodeinfo/kmsg.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto text = gpudiag::fuzz::as_text(data, size);
  auto log = gpudiag::parse_kmsg_text(text);
  GPUDIAG_FUZZ_CHECK(log.records.size() + log.malformed <= size);
  for (const auto& r : log.records) {
    GPUDIAG_FUZZ_CHECK(r.priority >= 0);
    GPUDIAG_FUZZ_CHECK(r.message.find('\n') == std::string::npos);
    auto again = gpudiag::parse_kmsg_record(std::to_string(r.priority) + "," + std::to_string(r.seq) + "," +
                                            std::to_string(r.usec) + ",-;" + r.message);
    GPUDIAG_FUZZ_CHECK(again && again->seq == r.seq && again->message == r.message);
    if (auto x = gpudiag::parse_xid_record(r)) {
      GPUDIAG_FUZZ_CHECK(r.priority < 8 && r.message.rfind("NVRM: Xid (PCI:", 0) == 0);
      GPUDIAG_FUZZ_CHECK(x->xid >= 0 && x->xid <= 9999);
      GPUDIAG_FUZZ_CHECK(!x->gpu.empty() && x->gpu.find_first_not_of("0123456789abcdef:.") == std::string::npos);
      for (char c : x->detail) GPUDIAG_FUZZ_CHECK(c >= 0x20 && c < 0x7f);
    }
  }
  // The message alone, as a real /dev/kmsg read hands out one record at a time.
  if (auto x = gpudiag::parse_xid_message(text)) {
    GPUDIAG_FUZZ_CHECK(x->detail.size() <= 243);
    GPUDIAG_FUZZ_CHECK(text.rfind("NVRM: Xid (PCI:", 0) == 0);
  }
  return 0;
}
