// Writes gpmkit's YCSB operations as the text traces the GPHash authors' artifact reads
// (test/ycsb_bench.cu: one "OP KEY" a line, OP in INSERT/READ/UPDATE/DELETE, KEY an unsigned
// 64-bit decimal from which it makes its 32-byte key KEY, KEY+1, KEY+2, KEY+3). The
// operations come from gpmkit's own generator (bench/workloads/ycsb/ycsb_ops.cuh, op_stream::at), with the seed and Zipf constant of its YCSB
// workloads, so the artifact runs exactly the key-id sequence gpmbench runs.
//
//   ycsb_trace load N FILE              the load phase: inserts of ids 0..N-1, in order
//   ycsb_trace run W LOADED OPS FILE    the run phase of YCSB W (A, B, C or LOAD)
//
// KEY is gpmkit's 32-byte key word 0 of the id (kv_key<4>::from_id(id).w[0] = mix64(id), a
// bijection), so keys are distinct and spread as in gpmkit (and as the artifact's own YCSB traces,
// of hashed 64-bit keys, were); GPHASH_TRACE_KEYS=id writes the id itself instead.
//
// A tool of scripts/peers/gphash-artifact only: never part of gpmkit's library or gpmbench, and it
// must never copy code of the artifact.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "workloads/ycsb/ycsb_ops.cuh"

namespace {

using gpmbench::zipf_distribution;
using gpmbench::ycsb::kv_op;
using gpmbench::ycsb::op_kind;
using gpmbench::ycsb::op_stream;
using gpmbench::ycsb::workload_kind;

using gpmbench::ycsb::kSeed;
constexpr double kTheta = gpmbench::ycsb::kDefaultTheta;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ycsb_trace: %s\n", what.c_str());
  std::exit(2);
}

std::uint64_t count_arg(const char* text) {
  std::uint64_t v = 0;
  const char* end = text + std::strlen(text);
  const auto [p, ec] = std::from_chars(text, end, v);
  if (ec != std::errc() || p != end || v == 0) die(std::string("not a positive count: ") + text);
  return v;
}

bool keys_as_ids() {
  const char* k = std::getenv("GPHASH_TRACE_KEYS");
  return k != nullptr && std::strcmp(k, "id") == 0;
}

const char* artifact_op(op_kind k) {
  switch (k) {
    case op_kind::insert: return "INSERT";
    case op_kind::find: return "READ";
    case op_kind::update: return "UPDATE";
    case op_kind::erase: return "DELETE";
    case op_kind::read_modify_write: break;  // the artifact has no read-modify-write
  }
  die("an operation the artifact cannot run (read-modify-write)");
}

// Writes at(0..n-1) to `path`, formatted by all host threads a chunk at a time, in order.
template <class At>
void write_trace(const std::string& path, std::uint64_t n, const At& at) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) die("cannot write " + path + ": " + std::strerror(errno));
  const bool ids = keys_as_ids();
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  constexpr std::uint64_t kChunk = 1ull << 20;
  constexpr std::size_t kLineMax = 7 + 20 + 1;  // "UPDATE " + 20 digits + '\n'
  std::vector<std::string> bufs(threads);
  for (std::uint64_t first = 0; first < n; first += kChunk * threads) {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::uint64_t lo = std::min(n, first + t * kChunk), hi = std::min(n, lo + kChunk);
        std::string& b = bufs[t];
        b.resize((hi - lo) * kLineMax);
        char* p = b.data();
        for (std::uint64_t i = lo; i < hi; ++i) {
          const kv_op op = at(i);
          const char* name = artifact_op(op.kind);
          const std::size_t len = std::strlen(name);
          std::memcpy(p, name, len);
          p += len;
          *p++ = ' ';
          const std::uint64_t key = ids ? op.key_id : gpm::mix64(op.key_id);
          p = std::to_chars(p, p + 20, key).ptr;
          *p++ = '\n';
        }
        b.resize(static_cast<std::size_t>(p - b.data()));
      });
    }
    for (std::thread& th : pool) th.join();
    for (const std::string& b : bufs) {
      if (!b.empty() && std::fwrite(b.data(), 1, b.size(), f) != b.size()) {
        die("cannot write " + path + ": " + std::strerror(errno));
      }
    }
  }
  if (std::fclose(f) != 0) die("cannot write " + path + ": " + std::strerror(errno));
}

workload_kind kind_from(const std::string& w) {
  if (w == "A") return workload_kind::a;
  if (w == "B") return workload_kind::b;
  if (w == "C") return workload_kind::c;
  if (w == "LOAD") return workload_kind::load;
  die("workload " + w + ": the artifact's traces take A, B, C or LOAD (D depends on the batch "
      "size, F needs read-modify-write)");
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "load" && argc == 4) {
    write_trace(argv[3], count_arg(argv[2]), [](std::uint64_t i) {
      return gpmbench::ycsb::load_stream{}.at(i);
    });
    return 0;
  }
  if (what == "run" && argc == 6) {
    const std::uint64_t loaded = count_arg(argv[3]), ops = count_arg(argv[4]);
    // batch_size matters to YCSB D alone, which is refused above.
    const op_stream s{kind_from(argv[2]), loaded, ops, kSeed, zipf_distribution(loaded, kTheta)};
    write_trace(argv[5], ops, [&s](std::uint64_t i) { return s.at(i); });
    return 0;
  }
  std::fprintf(stderr,
               "usage: %s load N FILE | run A|B|C|LOAD LOADED OPS FILE\n",
               argc > 0 ? argv[0] : "ycsb_trace");
  return 2;
}
