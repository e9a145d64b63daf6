#include "spank/relay/line_prefixer.h"

#include <algorithm>
#include <cstring>

namespace gpudiag {

namespace {
// Even a very long tag leaves room for payload, so every line makes progress.
constexpr std::size_t kMinPayload = 64;
}  // namespace

LinePrefixer::LinePrefixer(std::string tag, std::size_t max_line) : tag_(std::move(tag)) {
  const std::size_t overhead = tag_.size() + 2;  // SEP and '\n'
  max_payload_ = max_line > overhead + kMinPayload ? max_line - overhead : kMinPayload;
  held_.reserve(max_payload_);  // the held line never grows past it: feed allocates nothing
}

void LinePrefixer::emit(std::string_view payload, char sep, std::string& out) const {
  out.append(tag_);
  out.push_back(sep);
  out.append(payload);
  out.push_back('\n');
}

void LinePrefixer::feed(std::string_view data, std::string& out) {
  while (!data.empty()) {
    const void* nl = std::memchr(data.data(), '\n', data.size());
    if (!nl) {
      // Hold at most one piece: a longer partial line leaves in '+' pieces, and the held
      // bytes never grow past max_payload_ (a relay's budget counts on it).
      if (!held_.empty()) {
        const std::size_t take = std::min(data.size(), max_payload_ - held_.size());
        held_.append(data.substr(0, take));
        data.remove_prefix(take);
        if (data.empty()) return;
        emit(held_, '+', out);
        held_.clear();
      }
      while (data.size() > max_payload_) {
        emit(data.substr(0, max_payload_), '+', out);
        data.remove_prefix(max_payload_);
      }
      held_.assign(data);
      return;
    }
    const std::size_t len = static_cast<const char*>(nl) - data.data();
    std::string_view rest = data.substr(0, len);
    data.remove_prefix(len + 1);
    if (!held_.empty()) {
      // held_ is at most max_payload_: fill it up to one piece, then go on from `rest`.
      const std::size_t take = std::min(rest.size(), max_payload_ - held_.size());
      held_.append(rest.substr(0, take));
      rest.remove_prefix(take);
      if (rest.empty()) {
        emit(held_, ' ', out);
        held_.clear();
        continue;
      }
      emit(held_, '+', out);
      held_.clear();
    }
    while (rest.size() > max_payload_) {
      emit(rest.substr(0, max_payload_), '+', out);
      rest.remove_prefix(max_payload_);
    }
    emit(rest, ' ', out);
  }
}

// Every line is its payload plus tag, SEP and '\n'; the payloads come from the held bytes
// and the input's other bytes. With k newlines in n bytes there are at most k lines that
// end at one, (held + n - k) / max_payload_ full '+' pieces (at most 1 + (n - k) /
// max_payload_, as the held bytes are at most one piece) and finish()'s line. A newline
// costs tag + 2 bytes, any other byte at most 1 + (tag + 2) / max_payload_, which is less:
// so n newlines are the worst, held + (n + 2) (tag + 2).
std::size_t LinePrefixer::max_output(std::size_t n) const { return held_.size() + (n + 2) * (tag_.size() + 2); }

std::size_t LinePrefixer::input_for(std::size_t budget) const {
  const std::size_t per_byte = tag_.size() + 2;
  if (budget < held_.size()) return 0;
  const std::size_t lines = (budget - held_.size()) / per_byte;
  return lines > 2 ? lines - 2 : 0;
}

std::size_t relay_read_limit(const LinePrefixer& lines, bool tagged, std::size_t room) {
  const std::size_t budget = std::min(room, kRelayStreamBudget);
  return tagged ? lines.input_for(budget) : budget;
}

void LinePrefixer::finish(std::string& out) {
  if (held_.empty()) return;
  emit(held_, '+', out);
  held_.clear();
}

std::string strip_prefixes(std::string_view text, std::string_view tag) {
  std::string out;
  while (!text.empty()) {
    auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    const bool has_nl = nl != std::string_view::npos;
    text.remove_prefix(has_nl ? nl + 1 : text.size());
    if (line.size() > tag.size() && line.substr(0, tag.size()) == tag &&
        (line[tag.size()] == ' ' || line[tag.size()] == '+')) {
      out.append(line.substr(tag.size() + 1));
      if (line[tag.size()] == ' ') out.push_back('\n');
    }
  }
  return out;
}

}  // namespace gpudiag
