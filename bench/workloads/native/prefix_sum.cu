// gpmbench workload `prefix_sum` and run_prefix_sum: inclusive prefix sums of many integer arrays
// with native persistence in the GPM paper's order (§5.4, Figure 8). Each array is cut into
// subarrays of kScanBlock elements, one per thread block at a time:
//   1. partial sums: the block scans its subarray; every thread but the last stores and persists
//      its sum, the block waits at a barrier, then the last thread stores and persists its sum
//      and then the subarray's record (its sum, tagged done). A record marks a complete subarray,
//      so after a crash only subarrays without one are computed again. Kernels that do not persist
//      (gpm-ndp, cap-mm) tag their records stored instead: such a record may outlive a crash
//      without its sums until the phase's word is published, so a resume forgets it before that.
//   2. offsets: each subarray's offset within its array, from the records (GPU memory only: cheap
//      to recompute, so never persisted).
//   3. final sums: partial sum + offset, committed per subarray in the same order.
// The input arrays are read-only and stay in GPU memory (generated from a seed).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/publish.cuh>

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "native.hpp"
#include "native_kernels.cuh"
#include "native_mode.hpp"
#include "workloads/common/block_scan.cuh"

namespace gpmbench::native {

namespace {

enum ps_array : int { kPartial, kPartialDone, kFinal, kFinalDone };
constexpr std::uint64_t kBlockDone = 1ull << 32;  // a record: kBlockDone | the subarray's sum
// A record stored by a kernel that does not persist: kBlockStored | the subarray's sum. Its sums
// and it are durable together only once the phase's word is published.
constexpr std::uint64_t kBlockStored = 2ull << 32;
constexpr std::uint64_t kPartialsWord = 2;  // every partial sum is durable
constexpr std::uint64_t kFinalsWord = 3;    // every final sum is durable

std::vector<array_spec> ps_arrays(std::uint64_t elements) {
  const std::uint64_t blocks = elements / kScanBlock;
  return {{"partial", elements * sizeof(std::uint32_t)},
          {"partial_done", blocks * sizeof(std::uint64_t)},
          {"final", elements * sizeof(std::uint32_t)},
          {"final_done", blocks * sizeof(std::uint64_t)}};
}

std::vector<std::uint64_t> ps_params(const prefix_sum_config& c) {
  return {c.arrays, c.elements, c.seed, kScanBlock};
}

GPM_HOST_DEVICE inline std::uint32_t input_value(std::uint64_t i, std::uint64_t seed) {
  return static_cast<std::uint32_t>(gpm::mix64(i ^ (seed * 0x9e3779b97f4a7c15ull)) & 0xff);
}

__global__ void ps_generate(std::uint32_t* in, std::uint64_t n, std::uint64_t seed) {
  for (std::uint64_t i : gpm::grid_stride(n)) {
    in[i] = input_value(i, seed);
  }
}

// The paper's commit order for subarray `block` (see the file comment); `v` is this thread's
// value. Called by every thread of the block.
template <bool kToPool, bool kPersist>
__device__ inline void commit_block(const out_array<std::uint32_t>& values,
                                    const out_array<std::uint64_t>& records, std::uint64_t block,
                                    std::uint32_t v) {
  const std::uint64_t i = block * kScanBlock + threadIdx.x;
  const bool last = threadIdx.x == kScanBlock - 1;
  if (!last) {
    put<kToPool>(values, i, v);
    if constexpr (kPersist) gpm::persist_at("native.prefix_sum.value", &values.pool[i], sizeof v);
  }
  __syncthreads();  // every other thread's value is durable
  if (last) {
    put<kToPool>(values, i, v);
    // The last value before the record that covers it.
    if constexpr (kPersist) {
      gpm::persist_at("native.prefix_sum.last_value", &values.pool[i], sizeof v);
    }
    put<kToPool>(records, block, (kPersist ? kBlockDone : kBlockStored) | v);
    if constexpr (kPersist) {
      gpm::persist_at("native.prefix_sum.record", &records.pool[block], sizeof(std::uint64_t));
    }
  }
}

// counters[0]: subarrays computed by this launch.
template <bool kToPool, bool kPersist>
__global__ void ps_partial(const std::uint32_t* in, std::uint64_t blocks,
                           out_array<std::uint32_t> partial, out_array<std::uint64_t> records,
                           unsigned long long* counters, unsigned* blocks_done,
                           std::uint64_t* progress) {
  __shared__ std::uint32_t scan[kScanBlock];
  const unsigned t = threadIdx.x;
  for (std::uint64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    // Uniform across the block: the record is written only after commit_block's barrier.
    if (records.mirror[b] != 0) continue;
    scan[t] = in[b * kScanBlock + t];
    __syncthreads();
    for (unsigned off = 1; off < kScanBlock; off *= 2) {
      const std::uint32_t add = t >= off ? scan[t - off] : 0;
      __syncthreads();
      scan[t] += add;
      __syncthreads();
    }
    commit_block<kToPool, kPersist>(partial, records, b, scan[t]);
    if (t == 0) atomicAdd(&counters[0], 1ull);
  }
  if constexpr (kPersist) {
    gpm::publish_when_grid_done(blocks_done, progress, kPartialsWord, "native.prefix_sum.publish");
  }
}

// One block per array: offsets[b] = the sum of the array's subarrays before b (wrapping).
__global__ void ps_offsets(const std::uint64_t* records, std::uint64_t blocks_per_array,
                           std::uint32_t* offsets) {
  const std::uint64_t first = blockIdx.x * blocks_per_array;
  block_exclusive_scan<kScanBlock>(
      blocks_per_array,
      [&](std::uint64_t b) { return static_cast<std::uint32_t>(records[first + b]); },
      [&](std::uint64_t b, std::uint32_t offset) { offsets[first + b] = offset; });
}

template <bool kToPool, bool kPersist>
__global__ void ps_final(const std::uint32_t* partial, const std::uint32_t* offsets,
                         std::uint64_t blocks, out_array<std::uint32_t> final_sums,
                         out_array<std::uint64_t> records, unsigned long long* counters,
                         unsigned* blocks_done, std::uint64_t* progress) {
  for (std::uint64_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    if (records.mirror[b] != 0) continue;
    commit_block<kToPool, kPersist>(final_sums, records, b,
                                    partial[b * kScanBlock + threadIdx.x] + offsets[b]);
    if (threadIdx.x == 0) atomicAdd(&counters[0], 1ull);
  }
  if constexpr (kPersist) {
    gpm::publish_when_grid_done(blocks_done, progress, kFinalsWord, "native.prefix_sum.publish");
  }
}

// The CPU's commit of one subarray in the same order: values but the last, written back; the
// last value, written back; then the record.
void cpu_commit_block(std::uint32_t* values, std::uint64_t* records, std::uint64_t block,
                      const std::uint32_t* v) {
  std::uint32_t* at = values + block * kScanBlock;
  std::memcpy(at, v, (kScanBlock - 1) * sizeof(std::uint32_t));
  gpm::write_back(at, (kScanBlock - 1) * sizeof(std::uint32_t));
  at[kScanBlock - 1] = v[kScanBlock - 1];
  gpm::write_back(at + kScanBlock - 1, sizeof(std::uint32_t));
  records[block] = kBlockDone | v[kScanBlock - 1];
  gpm::write_back(records + block, sizeof(std::uint64_t));
}

// Clears the records of a phase whose word was not published that a kernel stored without
// persisting: a crash may have kept them without their sums (on power loss, or whenever lines
// reach the medium in another order than stored). Not persisted: one that comes back after
// another crash is forgotten again.
void forget_stored_records(std::uint64_t* records, std::uint64_t blocks) {
  std::replace_if(
      records, records + blocks, [](std::uint64_t r) { return (r & kBlockStored) != 0; },
      std::uint64_t{0});
}

std::uint64_t count_done(const std::uint64_t* records, std::uint64_t blocks) {
  return static_cast<std::uint64_t>(
      std::count_if(records, records + blocks, [](std::uint64_t r) { return r != 0; }));
}

class ps_run {
 public:
  ps_run(const prefix_sum_config& c, geometry geo)
      : c_(c),
        geo_(geo),
        n_(c.arrays * c.elements),
        blocks_(n_ / kScanBlock),
        input_(n_),
        partial_(n_),
        final_(n_),
        partial_done_(blocks_),
        final_done_(blocks_),
        offsets_(blocks_),
        counters_(1) {
    gpm::require(c.arrays >= 1 && c.elements >= kScanBlock && c.elements % kScanBlock == 0,
                 "prefix_sum: each array needs a positive multiple of " +
                     std::to_string(kScanBlock) + " elements");
    gpm::launch(ps_generate, geo.blocks, geo.threads, 0, stream_, input_.data(), n_, c.seed);
    stream_.synchronize();
  }

  run_summary solve(const run_store& st, sink& out, const progress_fn& progress) {
    run_summary r;
    const std::uint64_t bytes_before = out.bytes_persisted();
    std::uint64_t word = st.progress();
    if (word < kPartialsWord) forget_stored_records(st.host<std::uint64_t>(kPartialDone), blocks_);
    if (word < kFinalsWord) forget_stored_records(st.host<std::uint64_t>(kFinalDone), blocks_);
    r.steps_total = 2 * blocks_;
    r.steps_at_start = count_done(st.host<std::uint64_t>(kPartialDone), blocks_) +
                       count_done(st.host<std::uint64_t>(kFinalDone), blocks_);
    if (progress) progress(r.steps_at_start, "prefix_sum: started");
    if ((word & kFinished) == 0) {
      word = out.kind() == way::cpu ? solve_on_cpu(st, out, r, progress)
                                    : solve_on_gpu(st, out, word, r, progress);
      out.finish(stream_, word | kFinished);
    }
    r.output_checksum = gpm::checksum64(st.host<std::uint32_t>(kFinal), st.bytes(kFinal));
    r.bytes_persisted = out.bytes_persisted() - bytes_before;
    return r;
  }

 private:
  template <class T>
  void load(gpm::device_buffer<T>& mirror, const run_store& st, int array) {
    gpm::check_cuda(
        cudaMemcpy(mirror.data(), st.host<T>(array), st.bytes(array), cudaMemcpyHostToDevice),
        "cudaMemcpy (prefix_sum resume)");
  }

  std::uint64_t solve_on_gpu(const run_store& st, sink& s, std::uint64_t word, run_summary& r,
                             const progress_fn& progress) {
    // The pool's records say which subarrays are complete, whatever the progress word says (blocks
    // commit before any word is published): a run that finds some starts its mirrors from the
    // pool, so that the kernels skip those subarrays and the cap modes' copies keep them.
    if (r.steps_at_start == 0) {
      partial_done_.fill_bytes(0);
      final_done_.fill_bytes(0);
    } else {
      load(partial_, st, kPartial);
      load(partial_done_, st, kPartialDone);
      load(final_, st, kFinal);
      load(final_done_, st, kFinalDone);
    }
    const bool to_pool = s.kernel_writes_pool();
    const out_array<std::uint32_t> partial{partial_.data(),
                                           to_pool ? st.device<std::uint32_t>(kPartial) : nullptr};
    const out_array<std::uint64_t> partial_done{
        partial_done_.data(), to_pool ? st.device<std::uint64_t>(kPartialDone) : nullptr};
    const out_array<std::uint32_t> final_sums{final_.data(),
                                              to_pool ? st.device<std::uint32_t>(kFinal) : nullptr};
    const out_array<std::uint64_t> final_done{
        final_done_.data(), to_pool ? st.device<std::uint64_t>(kFinalDone) : nullptr};
    std::uint64_t* published = s.kernel_persists() ? st.progress_device() : nullptr;
    gpm::check_cuda(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), stream_),
                    "cudaMemsetAsync");
    if (word < kPartialsWord) {
      with_kernel_variant(s, [&](auto tp, auto ps) {
        gpm::launch(ps_partial<decltype(tp)::value, decltype(ps)::value>, geo_.blocks, kScanBlock,
                    0, stream_, input_.data(), blocks_, partial, partial_done, counters_.data(),
                    blocks_done_.get(), published);
      });
      word = kPartialsWord;
      s.commit(stream_,
               {{kPartial, partial_.data(), 0, st.bytes(kPartial)},
                {kPartialDone, partial_done_.data(), 0, st.bytes(kPartialDone)}},
               word);
      if (progress) progress(blocks_, "prefix_sum: partial sums durable");
    }
    gpm::launch(ps_offsets, static_cast<unsigned>(c_.arrays), kScanBlock, 0, stream_,
                partial_done_.data(), c_.elements / kScanBlock, offsets_.data());
    with_kernel_variant(s, [&](auto tp, auto ps) {
      gpm::launch(ps_final<decltype(tp)::value, decltype(ps)::value>, geo_.blocks, kScanBlock, 0,
                  stream_, partial_.data(), offsets_.data(), blocks_, final_sums, final_done,
                  counters_.data(), blocks_done_.get(), published);
    });
    word = kFinalsWord;
    s.commit(stream_,
             {{kFinal, final_.data(), 0, st.bytes(kFinal)},
              {kFinalDone, final_done_.data(), 0, st.bytes(kFinalDone)}},
             word);
    unsigned long long computed = 0;
    counters_.copy_to_host(&computed, 1);
    r.steps_run = computed;
    if (s.kernel_persists()) {
      // Each computed subarray persisted its values and its record; plus the two words.
      s.count_persisted(computed * (kScanBlock * sizeof(std::uint32_t) + sizeof(std::uint64_t)) +
                        2 * sizeof word);
    }
    if (progress) progress(2 * blocks_, "prefix_sum: final sums durable");
    return word;
  }

  std::uint64_t solve_on_cpu(const run_store& st, sink& s, run_summary& r,
                             const progress_fn& progress) {
    std::uint32_t* partial = st.host<std::uint32_t>(kPartial);
    std::uint64_t* partial_done = st.host<std::uint64_t>(kPartialDone);
    std::uint32_t* final_sums = st.host<std::uint32_t>(kFinal);
    std::uint64_t* final_done = st.host<std::uint64_t>(kFinalDone);
    std::atomic<std::uint64_t> computed{0};
    cpu_team& team = s.team();
    team.parallel_for(blocks_, [&](std::uint64_t b0, std::uint64_t b1) {
      std::uint32_t v[kScanBlock];
      for (std::uint64_t b = b0; b < b1; ++b) {
        if (partial_done[b] != 0) continue;
        std::uint32_t sum = 0;
        for (unsigned t = 0; t < kScanBlock; ++t)
          v[t] = sum += input_value(b * kScanBlock + t, c_.seed);
        cpu_commit_block(partial, partial_done, b, v);
        ++computed;
      }
    });
    s.commit(stream_, {}, kPartialsWord);
    if (progress) progress(blocks_, "prefix_sum: partial sums durable");
    const std::uint64_t per_array = c_.elements / kScanBlock;
    team.parallel_for(c_.arrays, [&](std::uint64_t a0, std::uint64_t a1) {
      std::uint32_t v[kScanBlock];
      for (std::uint64_t a = a0; a < a1; ++a) {
        std::uint32_t offset = 0;
        for (std::uint64_t b = a * per_array; b < (a + 1) * per_array; ++b) {
          if (final_done[b] == 0) {
            for (unsigned t = 0; t < kScanBlock; ++t) v[t] = partial[b * kScanBlock + t] + offset;
            cpu_commit_block(final_sums, final_done, b, v);
            ++computed;
          }
          offset += static_cast<std::uint32_t>(partial_done[b]);
        }
      }
    });
    s.commit(stream_, {}, kFinalsWord);
    if (progress) progress(2 * blocks_, "prefix_sum: final sums durable");
    r.steps_run = computed.load();
    s.count_persisted(computed.load() *
                          (kScanBlock * sizeof(std::uint32_t) + sizeof(std::uint64_t)) +
                      2 * sizeof(std::uint64_t));
    return kFinalsWord;
  }

  prefix_sum_config c_;
  geometry geo_;
  std::uint64_t n_;
  std::uint64_t blocks_;
  gpm::device_buffer<std::uint32_t> input_;
  gpm::device_buffer<std::uint32_t> partial_;
  gpm::device_buffer<std::uint32_t> final_;
  gpm::device_buffer<std::uint64_t> partial_done_;
  gpm::device_buffer<std::uint64_t> final_done_;
  gpm::device_buffer<std::uint32_t> offsets_;
  gpm::device_buffer<unsigned long long> counters_;
  grid_counter blocks_done_;
  gpm::stream stream_;
};

// The paper's 1K arrays x 1M integers on a GPU; a few seconds on the emulator.
prefix_sum_config ps_sizes(const mode_context& ctx) {
  prefix_sum_config c;
  c.arrays = ctx.options.quick ? 4 : ctx.device.emulated ? 16 : 1024;
  c.elements = ctx.options.quick ? 4096 : ctx.device.emulated ? 16384 : 1u << 20;
  if (ctx.options.bytes) {
    c.elements = std::max<std::uint64_t>(
        kScanBlock, *ctx.options.bytes / 4 / c.arrays / kScanBlock * kScanBlock);
  }
  return c;
}

native_problem ps_problem(const mode_context& ctx, way w) {
  const prefix_sum_config c = ps_sizes(ctx);
  auto run = std::make_shared<ps_run>(c, filling_geometry(ctx));
  native_problem p;
  p.workload = "prefix_sum";
  p.params = ps_params(c);
  p.arrays = ps_arrays(c.arrays * c.elements);
  p.sizes = {{"arrays", c.arrays}, {"elements_per_array", c.elements}};
  p.solve = [run](const run_store& st, sink& s) { return run->solve(st, s, {}); };
  p.check = [c](const sink& s, const std::string& mode) {
    std::vector<std::uint32_t> got(c.arrays * c.elements);
    s.read_durable(kFinal, got.data());
    for (std::uint64_t a = 0; a < c.arrays; ++a) {
      std::uint32_t sum = 0;
      for (std::uint64_t i = a * c.elements; i < (a + 1) * c.elements; ++i) {
        sum += input_value(i, c.seed);
        if (got[i] != sum) {
          check_failed("prefix_sum/" + mode + ": element " + std::to_string(i) + " is " +
                       std::to_string(got[i]) + ", expected " + std::to_string(sum));
        }
      }
    }
  };
  return p;
}

}  // namespace

run_summary run_prefix_sum(const std::string& pool_path, const gpm::pool_options& options,
                           const prefix_sum_config& config, bool resume,
                           const progress_fn& progress) {
  ps_run run(config, kernel_geometry(config.geo));
  return run_in_pool(pool_path, options, "prefix_sum", ps_params(config),
                     ps_arrays(config.arrays * config.elements), config.how, resume,
                     [&](const run_store& st, sink& s) { return run.solve(st, s, progress); });
}

workload prefix_sum_workload() {
  return {"prefix_sum",
          "prefix sums of many integer arrays, each subarray's sums persisted by its block in the "
          "paper's order so that only incomplete subarrays are redone (GPM paper §5.4, Figure 9)",
          native_modes(ps_problem, [](const mode_context& ctx) {
            const prefix_sum_config c = ps_sizes(ctx);
            return 2 * c.arrays * c.elements * sizeof(std::uint32_t);
          })};
}

}  // namespace gpmbench::native
