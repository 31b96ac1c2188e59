// The one runner every index of the YCSB workloads goes through: load, run in batches, time,
// verify. An index is anything with
//
//   using value_type = ...;                                        // its kv_value_t: value bytes
//   void clear();                                                  // empty it (between repeats)
//   void execute(const kv_op* ops, op_status* status, std::uint64_t n, cudaStream_t s);
//
// where ops and status are device memory and execute() enqueues (or runs) one batch whose
// operations are durable when the stream reaches its end, and optionally
//
//   std::uint64_t slot_capacity() const;   // keys the index can hold: gives the load factor
//   named_values metrics() const;          // further figures (e.g. bucket-cache hit rate)
//   void before_run();                     // called after the load and the warm-up read pass
//   void after_run();                      // called after the timed run phase (untimed)
//
// Indexes differ only in that adapter; there is no per-index loop anywhere else.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gpm/platform/kernel.cuh>
#include <gpm/platform/runtime.hpp>

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"
#include "workloads/ycsb/kv_format.cuh"
#include "workloads/ycsb/ycsb_ops.cuh"

namespace gpmbench::ycsb {

// Named sizes per backend (docs/workloads/ycsb.md): the paper's on a GPU, small on the emulator,
// tiny with --quick. --bytes sets the loaded keys to fill that many bytes of records.
struct ycsb_sizes {
  std::uint64_t loaded;      // keys loaded before the run (paper: 16M)
  std::uint64_t macro_ops;   // YCSB A..F, LOAD (paper: 64M)
  std::uint64_t micro_ops;   // micro-benchmarks (paper: 16M)
  std::uint64_t batch_size;  // operations per batch (the paper's 2^12 on a GPU)
};
ycsb_sizes sizes_for(const mode_context& ctx, std::uint64_t record_bytes);

// What one mode runs: a stream of `ops` operations over `loaded` keys in batches of `batch`.
struct ycsb_plan {
  op_stream stream;
  std::uint64_t ops;
  std::uint64_t batch;
  unsigned key_bytes;
};

// Runs plan.ops of plan.stream (or ops.size() given operations) in batches through `index`.
template <class Index>
void run_batches(Index& index, const kv_op* ops, op_status* status, std::uint64_t n,
                 std::uint64_t batch, cudaStream_t s) {
  for (std::uint64_t b = 0; b < n; b += batch) {
    index.execute(ops + b, status + b, n - b < batch ? n - b : batch, s);
  }
}

// Fills device memory with operations 0..n-1 of `stream`.
template <class Stream>
void generate(const Stream& stream, kv_op* out, std::uint64_t n, cudaStream_t s) {
  gpm::launch(generate_ops<Stream>, 256, 256, 0, s, stream, out, n);
}

// Runs operations 0..n-1 of `stream` through `index` in one batch and fails the run unless every
// one returns ok (loading keys, or finding the loaded keys after a resize or recovery).
template <class Index, class Stream>
void run_expecting_ok(Index& index, const Stream& stream, std::uint64_t n, const std::string& what,
                      cudaStream_t s);

// The host's count of each status, and a check that every operation got `expected`.
std::vector<std::uint64_t> count_statuses(const op_status* status, std::uint64_t n);
void require_all(const std::string& what, const std::vector<op_status>& got,
                 const std::vector<op_status>& expected);
void require_all(const std::string& what, const std::vector<op_status>& got, op_status expected);

// Every key the run should have left present (found with an intact value) or absent.
void final_state_checks(const ycsb_plan& plan, std::vector<kv_op>* finds,
                        std::vector<op_status>* expected);

template <class Index, class Stream>
void run_expecting_ok(Index& index, const Stream& stream, std::uint64_t n, const std::string& what,
                      cudaStream_t s) {
  gpm::device_buffer<kv_op> ops(n);
  gpm::device_buffer<op_status> status(n);
  generate(stream, ops.data(), n, s);
  index.execute(ops.data(), status.data(), n, s);
  gpm::check_cuda(cudaStreamSynchronize(s), "run_expecting_ok");
  std::vector<op_status> got(n);
  status.copy_to_host(got.data(), n);
  require_all(what, got, op_status::ok);
}

// The figures an index offers beyond the runner's (see the top of this file).
template <class Index>
void add_index_figures(const Index& index, std::uint64_t keys, measurement* m) {
  if constexpr (requires { index.slot_capacity(); }) {
    m->sizes.push_back({"slot_capacity", index.slot_capacity()});
    m->metrics.push_back(
        {"load_factor", static_cast<double>(keys) / static_cast<double>(index.slot_capacity())});
  }
  if constexpr (requires { index.metrics(); }) {
    for (const auto& f : index.metrics()) m->metrics.push_back(f);
  }
}

// Inserts fresh keys in batches until an insert finds no room, and returns how many fit: the
// load factor an index reaches (GPHash: >= 90% is the goal) is that over slot_capacity(). An
// index that can make room (GPHash's displacement) does so for a batch's inserts that found none,
// which then run again, as long as it moves items.
template <class Index>
std::uint64_t fill_until_full(Index& index, std::uint64_t batch, std::uint64_t limit,
                              cudaStream_t s) {
  gpm::device_buffer<kv_op> ops(batch);
  gpm::device_buffer<op_status> status(batch);
  std::vector<op_status> got(batch);
  std::vector<kv_op> host_ops(batch);
  std::uint64_t stored = 0;
  // Runs ops[0, n) and counts the keys stored; the operations that found no room go to
  // host_ops[0, returned).
  const auto run = [&](std::uint64_t n) {
    index.execute(ops.data(), status.data(), n, s);
    gpm::check_cuda(cudaStreamSynchronize(s), "fill_until_full");
    status.copy_to_host(got.data(), n);
    std::uint64_t full = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      if (got[i] == op_status::ok) {
        ++stored;
      } else if (got[i] == op_status::full) {
        if (full == 0) ops.copy_to_host(host_ops.data(), n);
        host_ops[full++] = host_ops[i];
      } else {
        check_failed(std::string("fill_until_full: an insert of a fresh key returned ") +
                     to_string(got[i]));
      }
    }
    return full;
  };
  for (std::uint64_t first = 0; first < limit; first += batch) {
    const std::uint64_t n = std::min(batch, limit - first);
    generate(op_stream{workload_kind::insert, first, n, 0, zipf_distribution(1, 0)}, ops.data(), n,
             s);
    std::uint64_t full = run(n);
    if constexpr (requires { index.make_room(ops.data(), n, s); }) {
      while (full != 0) {
        ops.copy_from_host(host_ops.data(), full);
        if (index.make_room(ops.data(), full, s) == 0) break;
        full = run(full);
      }
    }
    if (full != 0) break;
  }
  return stored;
}

// The warm-up pass's key sequence is the run's distribution under another seed.
inline constexpr std::uint64_t kWarmUpSalt = 0x7761726d2d7570ull;  // "warm-up"

// A mode's whole measurement: builds the index with `make(pool)` in a pool of `index_bytes`,
// then per repeat clears and loads it and makes one pass of reads over the run's key
// distribution (another sequence of it; untimed, as the GPHash artifact warms up before its timed
// run, so that a bucket cache starts from the run's hot set), and runs the plan's batches (timed,
// until the stream is idle); then checks the statuses and the index's final content.
template <class Index>
measurement measure(const mode_context& ctx, const std::string& mode_name, const ycsb_plan& plan,
                    std::uint64_t index_bytes,
                    const std::function<std::unique_ptr<Index>(gpm::pool&)>& make) {
  bench_pool bp(ctx, mode_name, pool_bytes_for(index_bytes), bench_pool::kNoObject, 32);
  std::unique_ptr<Index> index = make(bp.pool());
  const gpm::stream s;
  const std::uint64_t loaded = plan.stream.loaded;
  gpm::device_buffer<kv_op> load_ops(loaded), run_ops(plan.ops);
  gpm::device_buffer<op_status> load_status(loaded), run_status(plan.ops);
  generate(load_stream{}, load_ops.data(), loaded, s);
  s.synchronize();
  op_stream warm = plan.stream;  // the warm-up pass's reads, into run_ops before the run's
  warm.kind = workload_kind::c;
  warm.seed = gpm::mix64(plan.stream.seed ^ kWarmUpSalt);

  double load_s = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    index->clear();
    load_s = seconds_on_host([&] {
      run_batches(*index, load_ops.data(), load_status.data(), loaded, plan.batch, s);
      s.synchronize();
    });
    if (loaded != 0) {  // its statuses are overwritten by the run's
      generate(warm, run_ops.data(), plan.ops, s);
      run_batches(*index, run_ops.data(), run_status.data(), plan.ops, plan.batch, s);
    }
    generate(plan.stream, run_ops.data(), plan.ops, s);
    s.synchronize();
    if constexpr (requires { index->before_run(); }) index->before_run();
    const double run_s = seconds_on_host([&] {
      run_batches(*index, run_ops.data(), run_status.data(), plan.ops, plan.batch, s);
      s.synchronize();
    });
    if constexpr (requires { index->after_run(); }) index->after_run();
    return run_s;
  });

  // Verification of the last repeat: every operation got its expected status (reads found
  // intact values), and the index holds exactly the keys it should.
  std::vector<op_status> got(loaded);
  load_status.copy_to_host(got.data(), loaded);
  require_all(mode_name + ": load phase", got, op_status::ok);
  got.resize(plan.ops);
  run_status.copy_to_host(got.data(), plan.ops);
  require_all(mode_name + ": run phase", got, plan.stream.expected());
  std::vector<kv_op> finds;
  std::vector<op_status> expected;
  final_state_checks(plan, &finds, &expected);
  gpm::device_buffer<kv_op> check_ops(finds.size());
  gpm::device_buffer<op_status> check_status(finds.size());
  check_ops.copy_from_host(finds.data(), finds.size());
  run_batches(*index, check_ops.data(), check_status.data(), finds.size(), plan.batch, s);
  s.synchronize();
  got.resize(finds.size());
  check_status.copy_to_host(got.data(), got.size());
  require_all(mode_name + ": final content", got, expected);

  const std::uint64_t batches = (plan.ops + plan.batch - 1) / plan.batch;
  m.sizes = {{"keys_loaded", loaded},       {"operations", plan.ops},
             {"batch_size", plan.batch},    {"batches", batches},
             {"key_bytes", plan.key_bytes}, {"value_bytes", sizeof(typename Index::value_type)}};
  m.throughput = mega_operations(plan.ops);
  double sum = 0;
  for (double t : m.times_s) sum += t;
  const double mean = sum / static_cast<double>(m.times_s.size());
  m.metrics = {{"batch_latency_us", mean / static_cast<double>(batches) * 1e6},
               {"load_mops", static_cast<double>(loaded) / load_s * 1e-6},
               {"zipf_theta", plan.stream.keys.theta()}};
  add_index_figures(*index, plan.stream.max_keys(plan.ops), &m);
  return m;
}

}  // namespace gpmbench::ycsb
