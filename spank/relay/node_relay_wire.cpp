#include "spank/relay/node_relay_wire.h"

#include <cstring>

namespace gpudiag {
namespace {

constexpr char kMagic[4] = {'G', 'D', 'R', '1'};
constexpr std::uint8_t kOut = 1, kErr = 2, kTagOut = 4, kTagErr = 8, kKnownFlags = 15;
constexpr std::size_t kHeader = 4 + 4 + 4 + 1 + 2;

// The prefixer keeps some payload on every line whatever the bound (line_prefixer.h);
// the cap keeps one held line small beside a stream's budget (kRelayStreamBudget), so
// that a stream can always read.
bool usable_max_line(std::uint32_t max_line) { return max_line >= 16 && max_line <= kMaxHandoffLine; }

template <class T>
void put(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  out.append(b, sizeof v);
}

template <class T>
T get(std::string_view in, std::size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

}  // namespace

std::optional<std::string> encode_handoff(const TaskHandoff& h) {
  if ((!h.out && !h.err) || h.tag.size() > kMaxHandoffTag || !usable_max_line(h.max_line))
    return std::nullopt;
  std::string out(kMagic, sizeof kMagic);
  put(out, h.local_id);
  put(out, h.max_line);
  const std::uint8_t flags = (h.out ? kOut : 0) | (h.err ? kErr : 0) | (h.tag_out ? kTagOut : 0) |
                             (h.tag_err ? kTagErr : 0);
  put(out, flags);
  put(out, static_cast<std::uint16_t>(h.tag.size()));
  out += h.tag;
  return out;
}

std::optional<TaskHandoff> decode_handoff(std::string_view in) {
  if (in.size() < kHeader || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0) return std::nullopt;
  TaskHandoff h;
  h.local_id = get<std::uint32_t>(in, 4);
  h.max_line = get<std::uint32_t>(in, 8);
  const auto flags = get<std::uint8_t>(in, 12);
  const auto tag_len = get<std::uint16_t>(in, 13);
  if ((flags & ~kKnownFlags) != 0 || tag_len > kMaxHandoffTag || in.size() != kHeader + tag_len) return std::nullopt;
  h.out = flags & kOut;
  h.err = flags & kErr;
  h.tag_out = flags & kTagOut;
  h.tag_err = flags & kTagErr;
  if ((!h.out && !h.err) || !usable_max_line(h.max_line)) return std::nullopt;
  h.tag.assign(in.substr(kHeader));
  return h;
}

}  // namespace gpudiag
