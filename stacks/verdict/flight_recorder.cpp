#include "stacks/verdict/flight_recorder.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

#include "stacks/verdict/pickle_reader.h"
#include "util/control_bytes.h"
#include "util/private_file.h"
#include "util/rank_cap.h"

namespace gpudiag {
namespace {

constexpr std::string_view kDumpStem = "fr_trace.rank";
constexpr std::size_t kMaxDumpBytes = 64u << 20;
constexpr std::size_t kMaxDumps = kMaxRanks;

bool default_group(const PickleValue& e) {
  const PickleValue* id = e.get("pg_id");
  if (id && id->kind == PickleValue::Kind::integer) return id->i == 0;
  // Older dumps name the group in "process_group": (name, description), "0" the default.
  const PickleValue* pg = e.get("process_group");
  if (pg && pg->kind == PickleValue::Kind::tuple && !pg->items.empty() && pg->items[0].kind == PickleValue::Kind::text)
    return pg->items[0].s == "0";
  return true;
}

std::string text_of(const PickleValue* v, std::size_t max = 80) {
  if (!v || v->kind != PickleValue::Kind::text) return "";
  return escape_control(std::string_view(v->s).substr(0, max));
}

}  // namespace

FlightRank flight_rank_from_dump(std::string_view bytes, int rank) {
  FlightRank r;
  r.rank = rank;
  PickleResult p = read_pickle(bytes);
  if (!p.ok) {
    r.why = "not a flight-recorder dump gpudiag can read (" + p.why + ")";
    return r;
  }
  const PickleValue* entries = p.value.get("entries");
  if (!entries || entries->kind != PickleValue::Kind::list) {
    r.why = "the dump has no entries list";
    return r;
  }
  r.read = true;
  r.version = text_of(p.value.get("version"), 16);
  for (const auto& e : entries->items) {
    if (e.kind != PickleValue::Kind::dict || !default_group(e)) continue;
    const PickleValue* p2p = e.get("is_p2p");
    if (p2p && p2p->kind == PickleValue::Kind::boolean && p2p->i) continue;
    const PickleValue* seq = e.get("collective_seq_id");
    if (!seq || seq->kind != PickleValue::Kind::integer || seq->i < r.last_seq) continue;
    r.last_seq = seq->i;
    r.last_name = text_of(e.get("profiling_name"));
    if (r.last_name.rfind("nccl:", 0) == 0) r.last_name.erase(0, 5);
    r.last_state = text_of(e.get("state"), 16);
  }
  return r;
}

std::string flight_finding(const std::vector<FlightRank>& ranks, const std::vector<RankRef>& nodes) {
  std::map<int, std::string> node_of;
  for (const auto& n : nodes) node_of[n.rank] = n.node;
  auto ref = [&](int rank) {
    auto it = node_of.find(rank);
    return RankRef{it == node_of.end() ? std::string("?") : it->second, rank};
  };
  long long top = -1;
  std::string name;
  for (const auto& r : ranks)
    if (r.read && r.last_seq > top) {
      top = r.last_seq;
      name = r.last_name;
    }
  std::vector<RankRef> at, behind, unread;
  for (const auto& r : ranks) {
    if (!r.read) unread.push_back(ref(r.rank));
    else if (r.last_seq == top) at.push_back(ref(r.rank));
    else behind.push_back(ref(r.rank));
  }
  auto by_rank = [](const RankRef& a, const RankRef& b) { return a.rank < b.rank; };
  for (auto* v : {&at, &behind, &unread}) std::sort(v->begin(), v->end(), by_rank);
  if (at.empty() && behind.empty()) {
    if (unread.empty()) return "";
    const auto& first = *std::find_if(ranks.begin(), ranks.end(), [](const FlightRank& r) { return !r.read; });
    return "gpudiag: flight recorder: no dump could be read (" + compact_ranks(unread, 60) + ": " + first.why + ")\n";
  }
  std::string coll = (name.empty() ? std::string("collective") : name) + " #" + std::to_string(top);
  std::string line = "gpudiag: flight recorder: ";
  if (top < 0) line += "no collective recorded on the default group by " + compact_ranks(at, 80);
  else if (behind.empty()) line += "all " + std::to_string(at.size()) + " dumped ranks reached " + coll;
  else
    line += compact_ranks(behind, 100) + " never reached " + coll + ", which " + compact_ranks(at, 80) +
            " started (" + std::to_string(at.size()) + " rank(s))";
  if (!unread.empty()) line += "; no dump from " + compact_ranks(unread, 60);
  return line + "\n";
}

std::string flight_absent_finding() {
  return "gpudiag: flight recorder: no dump (torch records only NCCL collectives, from 2.2 on; gloo and older torch "
         "record nothing), so the stacks are the evidence\n";
}

std::vector<FlightRank> read_flight_dumps(int dfd, uid_t owner) {
  std::vector<FlightRank> out;
  const auto names = dir_names(
      dfd, [](std::string_view n) { return n.substr(0, kDumpStem.size()) == kDumpStem; }, kMaxDumps);
  for (const auto& name : names) {
    std::string_view digits = std::string_view(name).substr(kDumpStem.size());
    int rank = -1;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
    if (ec != std::errc() || p != digits.data() + digits.size() || rank < 0) continue;
    FlightRank r;
    r.rank = rank;
    OwnedFile file = read_owned_file(dfd, name.c_str(), owner, kMaxDumpBytes);
    if (!file.read) {
      r.why = file.why;
      out.push_back(r);
      continue;
    }
    out.push_back(flight_rank_from_dump(file.bytes, rank));
  }
  std::sort(out.begin(), out.end(), [](const FlightRank& a, const FlightRank& b) { return a.rank < b.rank; });
  return out;
}

std::vector<FlightRank> read_flight_dumps(const std::string& dir, uid_t owner) {
  const int dfd = open_dir_fd(dir.c_str());
  if (dfd < 0) return {};
  auto out = read_flight_dumps(dfd, owner);
  ::close(dfd);
  return out;
}

}  // namespace gpudiag
