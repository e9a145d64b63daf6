#include "nodeinfo/kmsg.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace gpudiag {
namespace {

template <class T>
bool whole_number(std::string_view s, T& out) {
  if (s.empty() || s.size() > 20) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// Messages end up in reports and drain reasons: one printable line, not too long.
std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  for (char c : s) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The kernel bounds a record at about 1 KiB of text plus its dictionary; a read
// buffer that is too small gets EINVAL, so leave room.
constexpr std::size_t kReadBuffer = 16384;
// A 16 MiB log buffer holds about 100k records; beyond this something is wrong.
constexpr std::size_t kMaxRecords = 1u << 20;
constexpr std::size_t kMaxFileBytes = 64u << 20;

KmsgRead read_device() {
  KmsgRead out;
  const int fd = ::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    out.denied = err == EPERM || err == EACCES;
    out.error = std::string("cannot open /dev/kmsg: ") + std::strerror(err);
    return out;
  }
  std::string buf(kReadBuffer, '\0');
  while (out.log.records.size() < kMaxRecords) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EAGAIN) break;  // no more records
      if (err == EPIPE) {        // older records were overwritten under us: go on
        out.log.overwritten = true;
        continue;
      }
      if (err == EPERM || err == EACCES) {
        out.denied = true;
        out.error = std::string("cannot read /dev/kmsg: ") + std::strerror(err);
      } else if (err != EINVAL) {  // EINVAL: one oversized record; the next read goes on
        out.error = std::string("cannot read /dev/kmsg: ") + std::strerror(err);
      }
      if (err != EINVAL) break;
      continue;
    }
    if (n == 0) break;
    std::string_view rec(buf.data(), static_cast<std::size_t>(n));
    auto first = rec.substr(0, rec.find('\n'));
    if (auto r = parse_kmsg_record(first)) out.log.records.push_back(std::move(*r));
    else ++out.log.malformed;
  }
  ::close(fd);
  return out;
}

}  // namespace

std::optional<KmsgRecord> parse_kmsg_record(std::string_view line) {
  const auto semi = line.find(';');
  if (semi == std::string_view::npos) return std::nullopt;
  std::string_view prefix = line.substr(0, semi);
  std::string_view fields[4];
  std::size_t count = 0;
  while (count < 4) {
    const auto comma = prefix.find(',');
    fields[count++] = prefix.substr(0, comma);
    if (comma == std::string_view::npos) break;
    prefix.remove_prefix(comma + 1);
  }
  if (count < 4 || fields[3].empty()) return std::nullopt;
  KmsgRecord r;
  if (!whole_number(fields[0], r.priority) || r.priority < 0 || !whole_number(fields[1], r.seq) ||
      !whole_number(fields[2], r.usec))
    return std::nullopt;
  r.message = std::string(line.substr(semi + 1));
  while (!r.message.empty() && r.message.back() == '\r') r.message.pop_back();
  return r;
}

KmsgLog parse_kmsg_text(std::string_view text) {
  KmsgLog log;
  while (!text.empty() && log.records.size() < kMaxRecords) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == ' ') continue;  // a continuation (KEY=value) line
    if (auto r = parse_kmsg_record(line)) {
      if (!log.records.empty() && r->seq > log.records.back().seq + 1) log.overwritten = true;
      log.records.push_back(std::move(*r));
    } else {
      ++log.malformed;
    }
  }
  return log;
}

KmsgRead read_kmsg(const RootedFs& fs) {
  if (fs.is_host_root()) return read_device();
  KmsgRead out;
  auto text = fs.read_file("/dev/kmsg", kMaxFileBytes);
  if (!text) {
    out.error = text.error();
    return out;
  }
  out.log = parse_kmsg_text(*text);
  return out;
}

bool written_by_kernel(const KmsgRecord& record) { return record.priority >= 0 && record.priority / 8 == 0; }

std::optional<XidEvent> parse_xid_message(std::string_view message) {
  // The driver's format, read left to right; anything else is not an Xid.
  std::string_view rest = message;
  auto take = [&](std::string_view word) {
    if (rest.substr(0, word.size()) != word) return false;
    rest.remove_prefix(word.size());
    return true;
  };
  auto count = [&](auto in_class, std::size_t max) {
    std::size_t n = 0;
    while (n < rest.size() && n <= max && in_class(rest[n])) ++n;
    return n;
  };
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  auto hex_field = [&](std::size_t min, std::size_t max, std::string& out) {
    const std::size_t n = count(hex, max);
    if (n < min || n > max) return false;
    for (char c : rest.substr(0, n)) out += static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
    rest.remove_prefix(n);
    return true;
  };
  auto mig_field = [&](std::string_view word, std::string& out) {
    if (!take(word)) return false;
    const std::size_t n = count(digit, 3);
    if (n == 0 || n > 3) return false;
    out += (out.empty() ? "" : " ") + std::string(word.substr(1)) + std::string(rest.substr(0, n));
    rest.remove_prefix(n);
    return true;
  };

  XidEvent e;
  if (!take("NVRM: Xid (PCI:")) return std::nullopt;
  if (!hex_field(4, 8, e.gpu) || !take(":")) return std::nullopt;
  e.gpu += ':';
  if (!hex_field(2, 2, e.gpu) || !take(":")) return std::nullopt;
  e.gpu += ':';
  if (!hex_field(2, 2, e.gpu)) return std::nullopt;
  std::string instance;
  if (rest.substr(0, 7) == " GPU-I:") {
    if (!mig_field(" GPU-I:", instance)) return std::nullopt;
    if (rest.substr(0, 8) == " GPU-CI:" && !mig_field(" GPU-CI:", instance)) return std::nullopt;
  }
  if (!take("): ")) return std::nullopt;
  const std::size_t digits = count(digit, 4);
  if (digits == 0 || digits > 4 || !whole_number(rest.substr(0, digits), e.xid)) return std::nullopt;
  rest.remove_prefix(digits);
  if (!rest.empty() && !take(",")) return std::nullopt;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  e.detail = printable(instance.empty() ? std::string(rest) : instance + (rest.empty() ? "" : ", ") + std::string(rest),
                       240);
  return e;
}

std::optional<XidEvent> parse_xid_record(const KmsgRecord& record) {
  if (!written_by_kernel(record)) return std::nullopt;
  return parse_xid_message(record.message);
}

}  // namespace gpudiag
