// gpmbench workload `bfs` and run_bfs: level-synchronous breadth-first search whose costs and
// frontier masks live in the pool (GPM paper §4.3). Each level's expansion stores the new costs
// and the next frontier into the pool, persists them, and the grid's last block publishes the
// level count; after a crash the search resumes at the published level.
//
// Why re-running a level is safe: level k reads frontier mask[k % 2] (written and published by
// level k - 1, never written by level k) and writes mask[(k + 1) % 2]. A node is claimed when its
// cost is unreached or already k + 1 (a claim by an interrupted attempt of the same level), so a
// resumed level rebuilds exactly the frontier an uninterrupted one would. Clearing the stale
// level k - 1 bits of the next mask touches only nodes whose cost is k - 1, which no claim of
// level k can touch.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <deque>
#include <memory>

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/checksum.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/publish.cuh>

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "graph.hpp"
#include "native.hpp"
#include "native_kernels.cuh"
#include "native_mode.hpp"

namespace gpmbench::native {

namespace {

constexpr std::uint32_t kUnreached = 0xffffffffu;
enum bfs_array : int { kCost, kMask0, kMask1 };

std::vector<array_spec> bfs_arrays(std::uint64_t nodes) {
  return {{"cost", nodes * sizeof(std::uint32_t)}, {"mask0", nodes}, {"mask1", nodes}};
}

std::vector<std::uint64_t> bfs_params(const csr_graph& g, std::uint64_t source) {
  return {g.nodes, g.edges(), g.checksum(), source};
}

// The expansion of `level` at node v, shared by the kernel and the CPU implementation: claims v's
// unreached neighbours (see the file comment) through `claim(nb)` and clears v's stale bit of the
// next mask through `clear(v)`. Returns how many neighbours it claimed.
template <class Claim, class Clear>
GPM_HOST_DEVICE inline std::uint64_t expand_node(std::uint64_t v, std::uint32_t level,
                                                 const std::uint64_t* row, const std::uint32_t* col,
                                                 std::uint32_t* cost, const std::uint8_t* cur,
                                                 const std::uint8_t* nxt, Claim&& claim,
                                                 Clear&& clear) {
  using cost_ref = gpm::atomic_ref<std::uint32_t, gpm::thread_scope::device>;
  if (level > 0 && nxt[v] != 0 && cost_ref(cost[v]).load(gpm::memory_order_relaxed) == level - 1) {
    clear(v);
  }
  if (cur[v] == 0) return 0;
  std::uint64_t claimed = 0;
  for (std::uint64_t e = row[v]; e < row[v + 1]; ++e) {
    const std::uint32_t nb = col[e];
    const std::uint32_t c = cost_ref(cost[nb]).load(gpm::memory_order_relaxed);
    if (c == kUnreached || c == level + 1) {
      claim(nb);
      ++claimed;
    }
  }
  return claimed;
}

template <bool kToPool, bool kPersist>
__global__ void bfs_init(out_array<std::uint32_t> cost, out_array<std::uint8_t> mask0,
                         out_array<std::uint8_t> mask1, std::uint64_t nodes, std::uint64_t source,
                         unsigned* blocks_done, std::uint64_t* progress) {
  for (std::uint64_t v : gpm::grid_stride(nodes)) {
    put<kToPool>(cost, v, v == source ? 0u : kUnreached);
    put<kToPool>(mask0, v, static_cast<std::uint8_t>(v == source));
    put<kToPool>(mask1, v, std::uint8_t{0});
  }
  if constexpr (kPersist) {
    gpm::persist_at("native.bfs.init");  // this thread's stores are scattered: no one range
    gpm::publish_when_grid_done(blocks_done, progress, 1, "native.bfs.publish");
  }
}

// counters[0]: nodes claimed; counters[1]: bytes stored into the pool.
template <bool kToPool, bool kPersist>
__global__ void bfs_level(const std::uint64_t* row, const std::uint32_t* col, std::uint64_t nodes,
                          std::uint32_t level, out_array<std::uint32_t> cost,
                          const std::uint8_t* cur, out_array<std::uint8_t> nxt,
                          unsigned long long* counters, unsigned* blocks_done,
                          std::uint64_t* progress, std::uint64_t word) {
  using cost_ref = gpm::atomic_ref<std::uint32_t, gpm::thread_scope::device>;
  std::uint64_t claimed = 0, stored = 0;
  for (std::uint64_t v : gpm::grid_stride(nodes)) {
    claimed += expand_node(
        v, level, row, col, cost.mirror, cur, nxt.mirror,
        [&](std::uint32_t nb) {
          cost_ref(cost.mirror[nb]).store(level + 1, gpm::memory_order_relaxed);
          if constexpr (kToPool) cost.pool[nb] = level + 1;
          put<kToPool>(nxt, nb, std::uint8_t{1});
          stored += sizeof(std::uint32_t) + 1;
        },
        [&](std::uint64_t u) {
          put<kToPool>(nxt, u, std::uint8_t{0});
          stored += 1;
        });
  }
  if (claimed != 0) atomicAdd(&counters[0], static_cast<unsigned long long>(claimed));
  if (stored != 0) atomicAdd(&counters[1], static_cast<unsigned long long>(stored));
  if constexpr (kPersist) {
    // This thread's costs and mask bits (scattered: no one range) are durable before the word.
    gpm::persist_at("native.bfs.level");
    gpm::publish_when_grid_done(blocks_done, progress, word, "native.bfs.publish");
  }
}

// One BFS problem, with the graph and the working copies in GPU memory, run as often as asked.
class bfs_run {
 public:
  bfs_run(const csr_graph& g, std::uint64_t source, geometry geo)
      : g_(g),
        source_(source),
        geo_(geo),
        row_(g.row.size()),
        col_(g.col.size()),
        cost_(g.nodes),
        mask0_(g.nodes),
        mask1_(g.nodes),
        counters_(2) {
    gpm::require(source < g.nodes, "bfs: the source node " + std::to_string(source) +
                                       " is not in the graph of " + std::to_string(g.nodes) +
                                       " nodes");
    row_.copy_from_host(g.row.data(), g.row.size());
    col_.copy_from_host(g.col.data(), g.col.size());
  }

  // Runs the search from the store's published progress to the end.
  run_summary solve(const run_store& st, sink& out, const progress_fn& progress) {
    run_summary r;
    const std::uint64_t bytes_before = out.bytes_persisted();
    std::uint64_t word = st.progress();
    r.steps_at_start = word & ~kFinished;
    if ((word & kFinished) == 0 && word != 0 && frontier_is_empty(st, word)) {
      // A crash between the empty level's word and the finished mark: the search is over.
      out.finish(stream_, word | kFinished);
    } else if ((word & kFinished) == 0) {
      if (word != 0 && out.kind() != way::cpu) load_mirrors(st);
      if (out.kind() == way::cpu) {
        word = solve_on_cpu(st, out, word, r, progress);
      } else {
        word = solve_on_gpu(st, out, word, r, progress);
      }
      out.finish(stream_, word | kFinished);
    }
    r.steps_total = word & ~kFinished;
    r.output_checksum = gpm::checksum64(st.host<std::uint32_t>(kCost), st.bytes(kCost));
    r.bytes_persisted = out.bytes_persisted() - bytes_before;
    return r;
  }

 private:
  // Whether the frontier the next level would expand (published with `word`) has no node.
  bool frontier_is_empty(const run_store& st, std::uint64_t word) const {
    const std::uint8_t* frontier = st.host<std::uint8_t>((word - 1) % 2 == 0 ? kMask0 : kMask1);
    return std::none_of(frontier, frontier + g_.nodes, [](std::uint8_t b) { return b != 0; });
  }

  void load_mirrors(const run_store& st) {
    gpm::check_cuda(cudaMemcpy(cost_.data(), st.host<std::uint32_t>(kCost), st.bytes(kCost),
                               cudaMemcpyHostToDevice),
                    "cudaMemcpy (bfs resume)");
    gpm::check_cuda(
        cudaMemcpy(mask0_.data(), st.host<std::uint8_t>(kMask0), g_.nodes, cudaMemcpyHostToDevice),
        "cudaMemcpy (bfs resume)");
    gpm::check_cuda(
        cudaMemcpy(mask1_.data(), st.host<std::uint8_t>(kMask1), g_.nodes, cudaMemcpyHostToDevice),
        "cudaMemcpy (bfs resume)");
  }

  template <class T>
  static out_array<T> out(T* mirror, const run_store& st, const sink& s, int array) {
    return {mirror, s.kernel_writes_pool() ? st.device<T>(array) : nullptr};
  }

  std::uint64_t solve_on_gpu(const run_store& st, sink& s, std::uint64_t word, run_summary& r,
                             const progress_fn& progress) {
    const auto cost = out(cost_.data(), st, s, kCost);
    const out_array<std::uint8_t> masks[2] = {out(mask0_.data(), st, s, kMask0),
                                              out(mask1_.data(), st, s, kMask1)};
    std::uint64_t* published = s.kernel_persists() ? st.progress_device() : nullptr;
    if (word == 0) {
      with_kernel_variant(s, [&](auto to_pool, auto persist) {
        gpm::launch(bfs_init<decltype(to_pool)::value, decltype(persist)::value>, geo_.blocks,
                    geo_.threads, 0, stream_, cost, masks[0], masks[1], g_.nodes, source_,
                    blocks_done_.get(), published);
      });
      word = 1;
      whole_arrays_durable(s, st, word);
      if (s.kernel_persists()) s.count_persisted(st.bytes(kCost) + 2 * g_.nodes);
      ++r.steps_run;
      if (progress) progress(1, "bfs: started");
    }
    for (;;) {
      const auto level = static_cast<std::uint32_t>(word - 1);
      const out_array<std::uint8_t>& nxt = masks[(level + 1) % 2];
      gpm::check_cuda(cudaMemsetAsync(counters_.data(), 0, counters_.bytes(), stream_),
                      "cudaMemsetAsync");
      with_kernel_variant(s, [&](auto to_pool, auto persist) {
        gpm::launch(bfs_level<decltype(to_pool)::value, decltype(persist)::value>, geo_.blocks,
                    geo_.threads, 0, stream_, row_.data(), col_.data(), g_.nodes, level, cost,
                    masks[level % 2].mirror, nxt, counters_.data(), blocks_done_.get(), published,
                    word + 1);
      });
      unsigned long long counts[2];
      gpm::check_cuda(
          cudaMemcpyAsync(counts, counters_.data(), sizeof counts, cudaMemcpyDeviceToHost, stream_),
          "cudaMemcpyAsync (bfs counters)");
      ++word;
      s.commit(stream_,
               {{kCost, cost_.data(), 0, st.bytes(kCost)},
                {(level + 1) % 2 == 0 ? kMask0 : kMask1, nxt.mirror, 0, g_.nodes}},
               word);
      if (s.kernel_persists()) s.count_persisted(counts[1] + sizeof word);
      ++r.steps_run;
      if (progress) progress(word, "bfs: level " + std::to_string(level + 1) + " durable");
      if (counts[0] == 0) return word;  // the level was empty: every reachable node has its cost
    }
  }

  // Every array, for the init step of the modes whose CPU makes results durable.
  void whole_arrays_durable(sink& s, const run_store& st, std::uint64_t word) {
    s.commit(stream_,
             {{kCost, cost_.data(), 0, st.bytes(kCost)},
              {kMask0, mask0_.data(), 0, g_.nodes},
              {kMask1, mask1_.data(), 0, g_.nodes}},
             word);
  }

  // The same search by CPU threads straight on the pool, writing back every store before the
  // level's word is published.
  std::uint64_t solve_on_cpu(const run_store& st, sink& s, std::uint64_t word, run_summary& r,
                             const progress_fn& progress) {
    std::uint32_t* cost = st.host<std::uint32_t>(kCost);
    std::uint8_t* masks[2] = {st.host<std::uint8_t>(kMask0), st.host<std::uint8_t>(kMask1)};
    cpu_team& team = s.team();
    if (word == 0) {
      team.parallel_for(g_.nodes, [&](std::uint64_t b, std::uint64_t e) {
        for (std::uint64_t v = b; v < e; ++v) {
          cost[v] = v == source_ ? 0u : kUnreached;
          masks[0][v] = v == source_;
          masks[1][v] = 0;
        }
        gpm::write_back(cost + b, (e - b) * sizeof(std::uint32_t));
        gpm::write_back(masks[0] + b, e - b);
        gpm::write_back(masks[1] + b, e - b);
      });
      word = 1;
      s.commit(stream_, {}, word);
      s.count_persisted(st.bytes(kCost) + 2 * g_.nodes);
      ++r.steps_run;
      if (progress) progress(1, "bfs: started");
    }
    for (;;) {
      const auto level = static_cast<std::uint32_t>(word - 1);
      std::uint8_t* nxt = masks[(level + 1) % 2];
      std::atomic<std::uint64_t> claimed{0}, stored{0};
      team.parallel_for(g_.nodes, [&](std::uint64_t b, std::uint64_t e) {
        std::uint64_t mine = 0, bytes = 0;
        for (std::uint64_t v = b; v < e; ++v) {
          mine += expand_node(
              v, level, g_.row.data(), g_.col.data(), cost, masks[level % 2], nxt,
              [&](std::uint32_t nb) {
                gpm::atomic_ref<std::uint32_t, gpm::thread_scope::device>(cost[nb]).store(
                    level + 1, gpm::memory_order_relaxed);
                nxt[nb] = 1;
                gpm::write_back(cost + nb, sizeof(std::uint32_t));
                gpm::write_back(nxt + nb, 1);
                bytes += sizeof(std::uint32_t) + 1;
              },
              [&](std::uint64_t u) {
                nxt[u] = 0;
                gpm::write_back(nxt + u, 1);
                bytes += 1;
              });
        }
        claimed += mine;
        stored += bytes;
      });
      ++word;
      s.commit(stream_, {}, word);
      s.count_persisted(stored.load() + sizeof word);
      ++r.steps_run;
      if (progress) progress(word, "bfs: level " + std::to_string(level + 1) + " durable");
      if (claimed.load() == 0) return word;
    }
  }

  const csr_graph& g_;
  std::uint64_t source_;
  geometry geo_;
  gpm::device_buffer<std::uint64_t> row_;
  gpm::device_buffer<std::uint32_t> col_;
  gpm::device_buffer<std::uint32_t> cost_;
  gpm::device_buffer<std::uint8_t> mask0_;
  gpm::device_buffer<std::uint8_t> mask1_;
  gpm::device_buffer<unsigned long long> counters_;
  grid_counter blocks_done_;
  gpm::stream stream_;
};

// Hop counts from `source` by a sequential queue: what every mode's result is checked against.
std::vector<std::uint32_t> reference_costs(const csr_graph& g, std::uint64_t source) {
  std::vector<std::uint32_t> cost(g.nodes, kUnreached);
  std::deque<std::uint64_t> queue = {source};
  cost[source] = 0;
  while (!queue.empty()) {
    const std::uint64_t v = queue.front();
    queue.pop_front();
    for (std::uint64_t e = g.row[v]; e < g.row[v + 1]; ++e) {
      if (cost[g.col[e]] == kUnreached) {
        cost[g.col[e]] = cost[v] + 1;
        queue.push_back(g.col[e]);
      }
    }
  }
  return cost;
}

csr_graph input_of(const bfs_config& c) {
  return c.gr_path.empty() ? road_grid(c.width, c.height, c.extra_roads, c.seed)
                           : read_dimacs(c.gr_path);
}

// Grid sides per backend: 4 M intersections and ~2300 levels on a GPU (the paper's road network
// has 24 M nodes and ~6000 levels, but the baselines copy every array at every level, which would
// take them minutes per run; --bytes 67108864 gives a 16.8 M-node grid); a few seconds per mode on
// the emulator.
std::uint64_t grid_side(const mode_context& ctx) {
  if (ctx.options.bytes) {  // --bytes: the cost array's size
    return std::max<std::uint64_t>(
        2, static_cast<std::uint64_t>(std::sqrt(static_cast<double>(*ctx.options.bytes / 4))));
  }
  return ctx.options.quick ? 24 : ctx.device.emulated ? 192 : 2048;
}

native_problem bfs_problem(const mode_context& ctx, way w) {
  const std::uint64_t side = grid_side(ctx);
  auto g = std::make_shared<csr_graph>(road_grid(side, side, side * side / 8, 1));
  auto run = std::make_shared<bfs_run>(*g, 0, filling_geometry(ctx));
  native_problem p;
  p.workload = "bfs";
  p.params = bfs_params(*g, 0);
  p.arrays = bfs_arrays(g->nodes);
  p.sizes = {{"nodes", g->nodes}, {"edges", g->edges()}};
  p.solve = [g, run](const run_store& st, sink& s) { return run->solve(st, s, {}); };
  p.check = [g](const sink& s, const std::string& mode) {
    std::vector<std::uint32_t> got(g->nodes);
    s.read_durable(kCost, got.data());
    const std::vector<std::uint32_t> want = reference_costs(*g, 0);
    const auto bad = std::mismatch(got.begin(), got.end(), want.begin());
    if (bad.first != got.end()) {
      check_failed("bfs/" + mode + ": node " + std::to_string(bad.first - got.begin()) +
                   " has cost " + std::to_string(*bad.first) + ", expected " +
                   std::to_string(*bad.second));
    }
  };
  return p;
}

}  // namespace

run_summary run_bfs(const std::string& pool_path, const gpm::pool_options& options,
                    const bfs_config& config, bool resume, const progress_fn& progress) {
  const csr_graph g = input_of(config);
  bfs_run run(g, config.source, kernel_geometry(config.geo));
  return run_in_pool(pool_path, options, "bfs", bfs_params(g, config.source), bfs_arrays(g.nodes),
                     config.how, resume,
                     [&](const run_store& st, sink& s) { return run.solve(st, s, progress); });
}

workload bfs_workload() {
  return {"bfs",
          "breadth-first search on a road-like grid whose costs and frontiers the kernel persists "
          "per level (GPM paper §4.3, Figure 9)",
          native_modes(bfs_problem, [](const mode_context& ctx) {
            const std::uint64_t side = grid_side(ctx);
            return side * side * (sizeof(std::uint32_t) + 1);
          })};
}

}  // namespace gpmbench::native
