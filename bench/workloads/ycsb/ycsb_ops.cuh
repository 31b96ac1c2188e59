// The YCSB operation generator (Cooper et al., SoCC'10, as the GPHash paper uses it, FAST'25
// §4.1): core workloads A, B, C, D, F and LOAD, and the micro-benchmarks positive search,
// negative search, insert, update and delete. Keys are ids: ids [0, loaded) are loaded before
// the run; run-phase inserts use fresh ids; negative searches use ids that are never inserted.
// Draws are counter-based (operation i depends only on the spec and i), so a GPU kernel generates
// a whole run in parallel and every mode of one run gets exactly the same operations.
#pragma once

#include <cstdint>
#include <string>

#include <gpm/platform/kernel.cuh>

#include "gpmbench/zipf.hpp"
#include "workloads/ycsb/kv_format.cuh"

namespace gpmbench::ycsb {

enum class workload_kind {
  a,           // 50% read, 50% update
  b,           // 95% read, 5% update
  c,           // 100% read
  d,           // 95% read of the latest keys, 5% insert
  f,           // 50% read, 50% read-modify-write
  load,        // 100% insert
  pos_search,  // micro: finds of present keys
  neg_search,  // micro: finds of absent keys
  insert,      // micro: inserts of new keys
  update,      // micro: updates of present keys
  erase,       // micro: deletes of present keys, each once
};
const char* to_string(workload_kind k);
// Throws usage_error naming the known workloads.
workload_kind workload_kind_from(const std::string& name);

// Every YCSB workload's operation stream starts from this seed, with Zipf keys at this theta
// unless a workload says otherwise (scripts/peers/gphash-artifact's traces use them too).
inline constexpr std::uint64_t kSeed = 0x79637362;  // "ycsb"
inline constexpr double kDefaultTheta = 0.99;
inline constexpr std::uint64_t kAbsentIdBase = 1ull << 62;  // negative searches: never inserted
inline constexpr std::uint64_t kLatestInsertPeriod = 20;    // YCSB D: op i inserts iff i%20 == 19

struct op_stream {
  workload_kind kind;
  std::uint64_t loaded;      // ids [0, loaded) are present before the run
  std::uint64_t batch_size;  // YCSB D reads the keys inserted before the operation's batch
  std::uint64_t seed;
  zipf_distribution keys;  // over [0, loaded)

  // Operation i of the run phase.
  GPM_HOST_DEVICE kv_op at(std::uint64_t i) const {
    const std::uint64_t pick = gpm::mix64(gpm::mix64(seed ^ 0x5ca1ab1e) ^ i) % 100;
    const std::uint32_t version = static_cast<std::uint32_t>(i + 1);
    const auto op = [&](op_kind k, std::uint64_t id) { return kv_op{id, k, version}; };
    switch (kind) {
      case workload_kind::a:
        return op(pick < 50 ? op_kind::find : op_kind::update, keys.key(seed, i));
      case workload_kind::b:
        return op(pick < 95 ? op_kind::find : op_kind::update, keys.key(seed, i));
      case workload_kind::c:
      case workload_kind::pos_search: return op(op_kind::find, keys.key(seed, i));
      case workload_kind::f:
        return op(pick < 50 ? op_kind::find : op_kind::read_modify_write, keys.key(seed, i));
      case workload_kind::d: {
        if (i % kLatestInsertPeriod == kLatestInsertPeriod - 1) {
          return op(op_kind::insert, loaded + i / kLatestInsertPeriod);
        }
        // Read the latest: popularity rank r is the r-th newest key present before this batch.
        const std::uint64_t present = loaded + (i - i % batch_size) / kLatestInsertPeriod;
        const double u = static_cast<double>(gpm::mix64(seed ^ i) >> 11) * 0x1.0p-53;
        return op(op_kind::find, present - 1 - keys.rank(u));
      }
      case workload_kind::load:
      case workload_kind::insert: return op(op_kind::insert, loaded + i);
      case workload_kind::neg_search: return op(op_kind::find, kAbsentIdBase + keys.key(seed, i));
      case workload_kind::update: return op(op_kind::update, keys.key(seed, i));
      case workload_kind::erase: return op(op_kind::erase, i % loaded);
    }
    return op(op_kind::find, 0);
  }

  // What every operation of this workload must return (all loaded, all fresh, all absent).
  op_status expected() const {
    return kind == workload_kind::neg_search ? op_status::not_found : op_status::ok;
  }
  // Operations that may write a record (an upper bound, for sizing record heaps).
  std::uint64_t writes(std::uint64_t ops) const {
    return kind == workload_kind::c || kind == workload_kind::pos_search ||
                   kind == workload_kind::neg_search || kind == workload_kind::erase
               ? 0
               : ops;
  }
  // Keys present at most, for sizing tables.
  std::uint64_t max_keys(std::uint64_t ops) const {
    switch (kind) {
      case workload_kind::load:
      case workload_kind::insert: return loaded + ops;
      case workload_kind::d: return loaded + ops / kLatestInsertPeriod + 1;
      default: return loaded;
    }
  }
};

// The spec of a run: `ops` operations of `kind` after loading `loaded` keys.
op_stream make_stream(workload_kind kind, std::uint64_t loaded, std::uint64_t ops,
                      std::uint64_t batch_size, double theta, std::uint64_t seed);

// The load phase: inserts of ids [0, n) (the run's stream does not matter).
struct load_stream {
  GPM_HOST_DEVICE kv_op at(std::uint64_t i) const { return kv_op{i, op_kind::insert, 0}; }
};
// Finds of ids [0, n): checks that the loaded keys are all there.
struct find_stream {
  GPM_HOST_DEVICE kv_op at(std::uint64_t i) const { return kv_op{i, op_kind::find, 0}; }
};

template <class Stream>
__global__ void generate_ops(Stream stream, kv_op* out, std::uint64_t n) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    out[i] = stream.at(i);
  }
}

}  // namespace gpmbench::ycsb
