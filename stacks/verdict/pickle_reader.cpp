#include "stacks/verdict/pickle_reader.h"

#include <cstring>

namespace gpudiag {

const PickleValue* PickleValue::get(std::string_view key) const {
  if (kind != Kind::dict) return nullptr;
  for (std::size_t n = 0; n < keys.size() && n < values.size(); ++n)
    if (keys[n].kind == Kind::text && keys[n].s == key) return &values[n];
  return nullptr;
}

namespace {

using K = PickleValue::Kind;

struct Machine {
  std::string_view in;
  std::size_t pos = 0;
  std::vector<PickleValue> stack;
  std::vector<std::size_t> marks;
  std::vector<PickleValue> memo;
  std::size_t values = 0;
  std::string why;

  bool fail(const std::string& w) {
    if (why.empty()) why = w + " at byte " + std::to_string(pos);
    return false;
  }
  bool take(std::size_t n, std::string_view& out) {
    if (in.size() - pos < n) return fail("truncated");
    out = in.substr(pos, n);
    pos += n;
    return true;
  }
  bool le(std::size_t n, std::uint64_t& v) {
    std::string_view b;
    if (!take(n, b)) return false;
    v = 0;
    for (std::size_t k = 0; k < n; ++k) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b[k])) << (8 * k);
    return true;
  }
  // Counts `v` and everything in it against the budget; checks its depth.
  bool count(const PickleValue& v, std::size_t depth = 0) {
    if (depth > kMaxPickleDepth) return fail("nested too deep");
    if (++values > kMaxPickleValues) return fail("too many values");
    for (const auto& x : v.items)
      if (!count(x, depth + 1)) return false;
    for (const auto& x : v.keys)
      if (!count(x, depth + 1)) return false;
    for (const auto& x : v.values)
      if (!count(x, depth + 1)) return false;
    return true;
  }
  bool push(PickleValue v) {
    if (!count(v)) return false;
    stack.push_back(std::move(v));
    return true;
  }
  bool pop(PickleValue& v) {
    if (stack.empty() || (!marks.empty() && stack.size() <= marks.back())) return fail("stack underflow");
    v = std::move(stack.back());
    stack.pop_back();
    return true;
  }
  // The values since the last MARK, which is dropped.
  bool since_mark(std::vector<PickleValue>& out) {
    if (marks.empty()) return fail("no mark");
    std::size_t m = marks.back();
    marks.pop_back();
    out.assign(std::make_move_iterator(stack.begin() + static_cast<std::ptrdiff_t>(m)),
               std::make_move_iterator(stack.end()));
    stack.resize(m);
    return true;
  }
  bool top_is(K k) {
    if (stack.empty() || (!marks.empty() && stack.size() <= marks.back()) || stack.back().kind != k)
      return fail("wrong type on the stack");
    return true;
  }
  bool depth_ok() {
    if (stack.size() > kMaxPickleValues) return fail("stack too large");
    return true;
  }
  bool put(std::size_t index) {
    if (stack.empty()) return fail("memo put of nothing");
    if (index > memo.size() + 1024 || index >= kMaxPickleValues) return fail("memo index out of range");
    if (memo.size() <= index) memo.resize(index + 1);
    memo[index] = stack.back();
    return count(memo[index]);
  }
  bool get(std::size_t index) {
    if (index >= memo.size()) return fail("memo get of an unknown index");
    return push(memo[index]);
  }

  bool run(PickleValue& result) {
    while (pos < in.size()) {
      const unsigned char op = static_cast<unsigned char>(in[pos++]);
      std::uint64_t n = 0;
      std::string_view b;
      PickleValue v, key;
      switch (op) {
        case 0x80:  // PROTO
          if (!le(1, n)) return false;
          if (n > 5) return fail("unknown protocol " + std::to_string(n));
          break;
        case '.':  // STOP
          if (stack.size() != 1 || !marks.empty()) return fail("STOP with " + std::to_string(stack.size()) + " values");
          result = std::move(stack.back());
          return true;
        case '(':  // MARK
          if (marks.size() > kMaxPickleDepth * 4) return fail("too many marks");
          marks.push_back(stack.size());
          break;
        case '}':  // EMPTY_DICT
          v.kind = K::dict;
          if (!push(std::move(v))) return false;
          break;
        case ']':  // EMPTY_LIST
          v.kind = K::list;
          if (!push(std::move(v))) return false;
          break;
        case ')':  // EMPTY_TUPLE
          v.kind = K::tuple;
          if (!push(std::move(v))) return false;
          break;
        case 'N':  // NONE
          if (!push(std::move(v))) return false;
          break;
        case 0x88:  // NEWTRUE
        case 0x89:  // NEWFALSE
          v.kind = K::boolean;
          v.i = op == 0x88;
          if (!push(std::move(v))) return false;
          break;
        case 'K':  // BININT1
        case 'M':  // BININT2
        case 'J':  // BININT
          if (!le(op == 'K' ? 1 : op == 'M' ? 2 : 4, n)) return false;
          v.kind = K::integer;
          v.i = op == 'J' ? static_cast<std::int32_t>(n) : static_cast<std::int64_t>(n);
          if (!push(std::move(v))) return false;
          break;
        case 0x8a: {  // LONG1: little-endian two's complement, at most 8 bytes here
          if (!le(1, n)) return false;
          if (n > 8) return fail("integer wider than 64 bits");
          std::uint64_t raw = 0;
          const std::size_t len = n;
          if (len && !le(len, raw)) return false;
          if (len && len < 8 && (raw >> (8 * len - 1)) & 1) raw |= ~0ull << (8 * len);
          v.kind = K::integer;
          v.i = static_cast<std::int64_t>(raw);
          if (!push(std::move(v))) return false;
          break;
        }
        case 'G': {  // BINFLOAT, big-endian
          if (!take(8, b)) return false;
          std::uint64_t raw = 0;
          for (char c : b) raw = (raw << 8) | static_cast<unsigned char>(c);
          v.kind = K::real;
          std::memcpy(&v.d, &raw, sizeof raw);
          if (!push(std::move(v))) return false;
          break;
        }
        case 'X':     // BINUNICODE
        case 0x8c:    // SHORT_BINUNICODE
        case 'B':     // BINBYTES
        case 'C':     // SHORT_BINBYTES
          if (!le(op == 0x8c || op == 'C' ? 1 : 4, n) || !take(n, b)) return false;
          v.kind = K::text;
          v.s = std::string(b);
          if (!push(std::move(v))) return false;
          break;
        case 'q':  // BINPUT
        case 'r':  // LONG_BINPUT
          if (!le(op == 'q' ? 1 : 4, n) || !put(n)) return false;
          break;
        case 0x94:  // MEMOIZE
          if (!put(memo.size())) return false;
          break;
        case 'h':  // BINGET
        case 'j':  // LONG_BINGET
          if (!le(op == 'h' ? 1 : 4, n) || !get(n)) return false;
          break;
        case 'a':  // APPEND
          if (!pop(v) || !top_is(K::list) || !count(v)) return false;
          stack.back().items.push_back(std::move(v));
          break;
        case 'e': {  // APPENDS
          std::vector<PickleValue> xs;
          if (!since_mark(xs) || !top_is(K::list)) return false;
          for (auto& x : xs) stack.back().items.push_back(std::move(x));
          break;
        }
        case 's':  // SETITEM
          if (!pop(v) || !pop(key) || !top_is(K::dict)) return false;
          stack.back().keys.push_back(std::move(key));
          stack.back().values.push_back(std::move(v));
          break;
        case 'u': {  // SETITEMS
          std::vector<PickleValue> xs;
          if (!since_mark(xs) || xs.size() % 2 || !top_is(K::dict)) return false;
          for (std::size_t k = 0; k < xs.size(); k += 2) {
            stack.back().keys.push_back(std::move(xs[k]));
            stack.back().values.push_back(std::move(xs[k + 1]));
          }
          break;
        }
        case 't': {  // TUPLE
          v.kind = K::tuple;
          if (!since_mark(v.items)) return false;
          stack.push_back(std::move(v));
          break;
        }
        case 0x85:  // TUPLE1
        case 0x86:  // TUPLE2
        case 0x87: {  // TUPLE3
          const std::size_t k = op - 0x84u;
          if (stack.size() < k || (!marks.empty() && stack.size() - k < marks.back())) return fail("stack underflow");
          v.kind = K::tuple;
          v.items.assign(std::make_move_iterator(stack.end() - static_cast<std::ptrdiff_t>(k)),
                         std::make_move_iterator(stack.end()));
          stack.resize(stack.size() - k);
          stack.push_back(std::move(v));
          break;
        }
        case 'c': {  // GLOBAL "module\nname\n": recorded, never resolved
          std::size_t a = in.find('\n', pos);
          std::size_t z = a == std::string_view::npos ? a : in.find('\n', a + 1);
          if (z == std::string_view::npos || z - pos > 256) return fail("bad GLOBAL");
          v.kind = K::global;
          v.s = std::string(in.substr(pos, a - pos)) + "." + std::string(in.substr(a + 1, z - a - 1));
          pos = z + 1;
          if (!push(std::move(v))) return false;
          break;
        }
        case 'R': {  // REDUCE: torch's list builders return their one argument
          PickleValue args, fn;
          if (!pop(args) || !pop(fn)) return false;
          if (fn.kind != K::global || fn.s.rfind("torch.jit._pickle.", 0) != 0 || args.kind != K::tuple ||
              args.items.size() != 1)
            return fail("REDUCE of " + (fn.kind == K::global ? fn.s : std::string("a non-global")));
          stack.push_back(std::move(args.items[0]));
          break;
        }
        default:
          return fail("opcode 0x" + std::string(1, "0123456789abcdef"[op >> 4]) + "0123456789abcdef"[op & 15] +
                      " outside the subset torch writes");
      }
      if (!depth_ok()) return false;
    }
    return fail("no STOP");
  }
};

}  // namespace

PickleResult read_pickle(std::string_view bytes) {
  PickleResult r;
  Machine m;
  m.in = bytes;
  r.ok = m.run(r.value);
  r.why = m.why;
  if (!r.ok) r.value = PickleValue{};
  return r;
}

}  // namespace gpudiag
