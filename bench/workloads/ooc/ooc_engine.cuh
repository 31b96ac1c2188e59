// How the gpmbench `ooc` workloads run a problem (ooc_problem.cuh) in each mode, side by side in
// one invocation, and check what it computed:
//
//   disk-sequential   the disk's sequential write and read bandwidth in the run's disk directory
//                     (O_DIRECT where possible): the ceiling every mode's disk traffic is
//                     compared against (metric disk_fraction)
//   gpmkit            every array a gpm::ooc::mapping (inputs mode::read, outputs mode::read_write
//                     or, as an ablation, mode::write, intermediates mode::volatile_data), kernels
//                     on ooc::array views; the GPU and host caches capped as the case says
//   fread-memcpy      fread each input whole, cudaMemcpy, compute, copy back, fwrite + fdatasync
//                     (in-gpu cases only: the whole problem must fit the GPU)
//   chunked-pipeline  hand-written: when the problem fits the GPU cap, a double-buffered pread +
//                     cudaMemcpyAsync load, the passes, and a double-buffered write-back;
//                     otherwise every pass streams its items through the GPU in chunks (two
//                     slots, two streams: the host reads chunk k while the GPU computes chunk k-1),
//                     halos included, intermediates kept in pinned-size host memory when they fit
//                     the host cap, else in scratch files
//   managed           cudaMallocManaged arrays read into and written from (in-gpu cases, and only
//                     when the problem fits in free GPU memory: never oversubscribed)
//
// Every timed repeat starts with fresh output files and, when permitted, a dropped page cache;
// its time includes mapping, transfers, kernels, write-back, fdatasync and unmapping. A wrong
// result fails the record: on problems up to kFullCheckBytes every output element is compared
// with a CPU run of the same element functions; on larger ones, samples are compared between the
// modes of the case and, for item-local workloads, with the CPU.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <gpm/ooc/mapping.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/pinned_buffer.hpp>

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"
#include "ooc_io.hpp"
#include "ooc_problem.cuh"

namespace gpmbench::ooc {

inline constexpr std::uint64_t kFullCheckBytes = 32ull << 20;
inline constexpr std::uint32_t kSamplesPerArray = 4096;

// DRAGON's three regimes (SC'18 §IV), made with caps rather than only real sizes.
enum class regime : std::uint64_t { in_gpu = 0, in_host = 1, out_of_core = 2 };
inline const std::vector<std::string> kRegimeCases = {"in-gpu", "in-host", "out-of-core"};

// One case: the problem's footprint and the caps it runs under.
struct settings {
  regime where = regime::in_gpu;
  std::uint64_t footprint = 0;   // bytes of all arrays (the problem is made to about this)
  std::uint64_t gpu_cache = 0;   // GPU memory a mode may use for the arrays
  std::uint64_t host_cache = 0;  // host memory a mode may use for them
  std::uint64_t line = 0;        // gpmkit line bytes
  bool read_ahead = true;
  std::uint32_t io_threads = 2;  // gpmkit's I/O threads per mapping (mapping_options::io_threads)
  std::uint32_t idle_poll_us = 0;  // mapping_options::idle_poll_us (0: the library's default)
  // gpmkit's read-ahead reads and window, in bytes (0: the library's defaults; see
  // mapping_options::read_ahead_run_bytes): the ablation sets both to one run, two queued ahead.
  std::uint64_t read_ahead_run = 0;
  // gpmkit maps outputs that no pass reads with mode::write (only the bytes written go back)
  // instead of mode::read_write (their lines are fetched first: holes of a fresh file). Off by
  // default: on an H100 every workload whose kernels stored element by element into a write-mode
  // mapping from a full GPU stalled for over a minute (ooc_ablation_output measures it).
  bool write_mode_outputs = false;
  // gpmkit's outputs commit each sync() as an epoch through a redo log
  // (mapping_options::crash_consistent): a crash leaves every output at the previous or the new
  // epoch, at the price of writing the dirty bytes twice (log, then in place) and two fdatasyncs.
  bool crash_consistent_outputs = false;
  bool write_behind = true;  // mapping_options::write_behind for gpmkit's outputs
};

// The case's settings from `base`, the out-of-core footprint: GPU cap base/8, host cap base/2;
// in-gpu base/16, in-host base/4, out-of-core base.
settings regime_settings(const mode_context& ctx, std::uint64_t base);
// gpmkit's line size: 1 MiB on a GPU, 4 KiB on the host emulator (small problems, many lines).
std::uint64_t default_line(const mode_context& ctx);
// An ablation case's settings: out of core from `base`, with the case's variation:
// read-ahead-on / read-ahead-off; line-div16, line-div4, line-x1, line-x2 (the default line
// scaled); gpu-div32, gpu-div16, gpu-div8 (the GPU cap as a fraction of base) and host-div8,
// host-div4, host-div2 (the host cap); outputs-read-write, outputs-write (gpmkit's mode for
// outputs); io-threads-N (gpmkit's I/O threads per mapping); sync-plain, sync-crash-consistent
// (gpmkit's outputs' sync); write-behind-on, write-behind-off. A case name prefixed with in-gpu-
// or in-host- (in-host-write-behind-off) runs in that regime instead.
settings ablation_settings(const mode_context& ctx, std::uint64_t base);
// The run's base footprint: --bytes, or `gpu` on a GPU, gpu / 1024 on the emulator, 512 KiB with
// --quick.
std::uint64_t base_bytes(const mode_context& ctx, std::uint64_t gpu);

// What the modes of one workload share within one invocation.
struct family_state {
  std::string disk_dir;  // the run the bandwidth was measured for
  disk_bandwidth disk;
  measurement disk_record;  // its disk-sequential record, repeated in the run's later cases
  std::string inputs_key;   // the case whose input files exist
  std::vector<std::string> input_paths;
  std::string samples_key;  // the case whose samples the first checked mode left
  std::string samples_mode;
  std::vector<std::vector<float>> samples;
  std::string reference_key;
  std::vector<std::vector<float>> reference;  // full CPU outputs (and the small array last)
  // The chunked pipeline's two pinned staging buffers for the resident case, pinned at its first
  // run and kept for the next ones, as a program that maps files again and again would keep them
  // (and as gpm::ooc keeps its staging pool across mappings): pinning is then not timed in
  // either, after the warm-up.
  std::vector<gpm::pinned_buffer<char>> resident_stage;
};

// Seconds since the last lap (or since construction): where a repeat's time went, phase by phase.
class lap_timer {
 public:
  double lap() {
    const auto now = std::chrono::steady_clock::now();
    return std::chrono::duration<double>(now - std::exchange(mark_, now)).count();
  }

 private:
  std::chrono::steady_clock::time_point mark_ = std::chrono::steady_clock::now();
};

// Bytes a repeat moved, and what else a mode reports.
struct traffic {
  std::uint64_t disk_read = 0;
  std::uint64_t disk_written = 0;
  std::uint64_t to_gpu = 0;
  std::uint64_t from_gpu = 0;
  named_values extra;
};

measurement disk_mode(const mode_context& ctx, family_state& st);
void add_disk_metrics(measurement& m, const family_state& st, const traffic& t, double median_s);
// The case's directory inside the run's disk directory, made empty when the case changes.
std::string case_dir(const mode_context& ctx, family_state& st);

// ---- the engine -------------------------------------------------------------------------

template <class W>
class runner {
 public:
  runner(const mode_context& ctx, family_state& st, const settings& s)
      : ctx_(ctx),
        st_(st),
        s_(s),
        pb_(W::make(s.footprint, ctx.options.quick)),
        geo_(filling_geometry(ctx)),
        dir_(case_dir(ctx, st)) {
    if (pb_.arrays.size() > static_cast<std::size_t>(kMaxArrays)) {
      throw std::logic_error(std::string(W::name) + " has more arrays than the engine takes");
    }
    for (std::size_t a = 0; a < pb_.arrays.size(); ++a) {
      out_path_.push_back(dir_ + "/out-" + pb_.arrays[a].name + ".bin");
    }
    ensure_inputs();
    gpu_share_ = gpu_shares();
  }

  const problem<W>& pb() const { return pb_; }

  named_counts sizes() const {
    return {{"regime", static_cast<std::uint64_t>(s_.where)},
            {"footprint_bytes", pb_.footprint()},
            {"items", pb_.items},
            {"passes", pb_.passes.size()},
            {"gpu_cache_bytes", s_.gpu_cache},
            {"host_cache_bytes", s_.host_cache},
            {"line_bytes", s_.line},
            {"read_ahead", s_.read_ahead ? 1u : 0u},
            {"io_threads", s_.io_threads},
            {"read_ahead_run_bytes", s_.read_ahead_run},
            {"idle_poll_us", s_.idle_poll_us},
            {"write_mode_outputs", s_.write_mode_outputs ? 1u : 0u},
            {"crash_consistent_outputs", s_.crash_consistent_outputs ? 1u : 0u},
            {"write_behind", s_.write_behind ? 1u : 0u}};
  }

  // Times `run` (fresh outputs and a dropped page cache before each repeat), checks the last
  // repeat's outputs, and fills the measurement.
  measurement measure(const std::string& mode_name, const std::function<traffic()>& run) {
    traffic last;
    bool dropped = true;
    measurement m;
    m.times_s = ctx_.repeat([&](int) {
      clear_outputs();
      small_.emplace(std::max<std::uint32_t>(pb_.small_floats, 1));
      small_->fill_bytes(0);
      dropped = drop_page_cache() && dropped;
      return seconds_on_host([&] { last = run(); });
    });
    check(mode_name);
    clear_outputs();
    m.sizes = sizes();
    m.throughput = gigabytes(pb_.footprint());
    m.metrics = last.extra;
    m.metrics.push_back({"page_cache_dropped", dropped ? 1.0 : 0.0});
    m.metrics.push_back({"bytes_to_gpu", static_cast<double>(last.to_gpu)});
    m.metrics.push_back({"bytes_from_gpu", static_cast<double>(last.from_gpu)});
    std::vector<double> sorted = m.times_s;
    std::sort(sorted.begin(), sorted.end());
    add_disk_metrics(m, st_, last, sorted[sorted.size() / 2]);
    return m;
  }

  // ---- gpmkit ----
  traffic gpmkit() {
    // Where the repeat's time goes: mapping (resident mappings load here), the passes, sync and
    // unmapping (write-back and fdatasync), as metrics map_s, passes_s, sync_s, unmap_s.
    lap_timer laps;
    std::vector<gpm::ooc::mapping> maps;
    ooc_arrays acc;
    gpm::device_buffer<std::uint32_t> error(1);
    error.fill_bytes(0);
    acc.small = small_->data();
    acc.error = error.data();
    for (int a = 0; a < narrays(); ++a) {
      gpm::ooc::mapping_options o;
      o.line_bytes = s_.line;
      o.io_threads = s_.io_threads;
      if (s_.idle_poll_us != 0) o.idle_poll_us = s_.idle_poll_us;
      o.read_ahead_run_bytes = s_.read_ahead_run;
      o.read_ahead_window = static_cast<std::uint32_t>(s_.read_ahead_run / s_.line);
      o.gpu_cache_bytes = gpu_share_[a] * s_.line;
      o.host_cache_bytes = share(s_.host_cache, a, 2 * o.io_threads + 2);
      o.hint = s_.read_ahead ? gpm::ooc::access_hint::sequential : gpm::ooc::access_hint::random;
      const role r = pb_.arrays[a].kind;
      if (r == role::input) {
        o.mode = gpm::ooc::mode::read;
        maps.emplace_back(st_.input_paths[a], pb_.array_bytes(a), 0, o);
      } else if (r == role::output) {
        o.mode = s_.write_mode_outputs && !read_in_some_pass(a) ? gpm::ooc::mode::write
                                                                : gpm::ooc::mode::read_write;
        o.create = true;
        o.crash_consistent = s_.crash_consistent_outputs;
        o.write_behind = s_.write_behind;
        maps.emplace_back(out_path_[a], pb_.array_bytes(a), 0, o);
      } else {
        o.mode = gpm::ooc::mode::volatile_data;
        o.spill_dir = dir_;
        maps.emplace_back(std::string(), pb_.array_bytes(a), 0, o);
      }
      acc.a[a] = maps.back().ref<float>();
      if (pb_.array_bytes(a) % sizeof(float4) == 0) acc.a4[a] = maps.back().ref<float4>();
    }
    const double map_s = laps.lap();
    // Windows of a pass alternate between two streams, so one window's misses overlap the
    // tail of the one before; the streams join at the end of each pass (the next reads its
    // output).
    gpm::stream s, s2;
    gpm::event joined, joined2;
    for (const pass& p : pb_.passes) {
      const std::uint64_t w = window_items(p);
      for (std::uint64_t lo = 0, k = 0; lo < pb_.items; lo += w, ++k) {
        launch(p, acc, lo, std::min(pb_.items, lo + w), k % 2 == 0 ? s : s2);
      }
      joined.record(s);
      joined2.record(s2);
      gpm::check_cuda(cudaStreamWaitEvent(s, joined2.get(), 0), "cudaStreamWaitEvent");
      gpm::check_cuda(cudaStreamWaitEvent(s2, joined.get(), 0), "cudaStreamWaitEvent");
    }
    gpm::check_cuda(cudaStreamSynchronize(s), "ooc pass kernels");
    const double passes_s = laps.lap();
    std::uint32_t err = 0;
    error.copy_to_host(&err, 1);
    if (err != 0) {
      check_failed(std::string(W::name) + "/gpmkit: an access returned " +
                   gpm::ooc::to_string(static_cast<gpm::ooc::status>(err)));
    }
    traffic t;
    std::uint64_t gpu_lines = 0, host_lines = 0, hits = 0, misses = 0, host_hits = 0, ahead = 0,
                  ahead_reads = 0, ahead_hits = 0, spill = 0, spill_read = 0, host_pinned = 0,
                  load_reads = 0, epochs = 0, log_bytes = 0, behind = 0;
    double wait = 0, load_read_s = 0, ahead_read_s = 0, fill_s = 0, map_allocate_s = 0,
           map_gpu_cache_s = 0, map_host_cache_s = 0, map_load_s = 0;
    for (gpm::ooc::mapping& m : maps) {
      m.sync();
      const gpm::ooc::mapping_stats x = m.stats();
      // The disk's whole work, as the chunked pipeline counts its scratch files: the mapped
      // files, the spill file (o.spill_dir) or the staging file and the epoch log (beside the
      // file), all in the same directory, and the epochs' writes in place.
      t.disk_read += x.file_bytes_read + x.spill_bytes_read;
      t.disk_written +=
          x.file_bytes_written + x.spill_bytes_written + x.log_bytes_written + x.log_bytes_applied;
      t.to_gpu += x.bytes_to_gpu;
      t.from_gpu += x.bytes_from_gpu;
      gpu_lines += m.gpu_cache_lines();
      host_lines += m.host_cache_lines();
      hits += x.gpu_hits;
      misses += x.gpu_misses;
      host_hits += x.host_hits;
      ahead += x.read_ahead_lines;
      ahead_reads += x.read_ahead_reads;
      ahead_read_s += x.read_ahead_read_seconds;
      fill_s += x.fill_seconds;
      ahead_hits += x.read_ahead_hits;
      spill += x.spill_bytes_written;
      spill_read += x.spill_bytes_read;
      behind += x.write_behind_lines;
      host_pinned += x.host_cache_bytes_pinned;
      wait += x.gpu_wait_seconds;
      load_reads += x.resident_reads;
      load_read_s += x.resident_read_seconds;
      map_allocate_s += x.map_allocate_seconds;
      map_gpu_cache_s += x.map_gpu_cache_seconds;
      map_host_cache_s += x.map_host_cache_seconds;
      map_load_s += x.map_load_seconds;
      epochs += x.epochs_committed;
      log_bytes += x.log_bytes_written;
    }
    const double sync_s = laps.lap();
    for (gpm::ooc::mapping& m : maps) m.unmap();
    const double unmap_s = laps.lap();
    t.extra = {{"gpu_cache_bytes_mapped", static_cast<double>(gpu_lines * s_.line)},
               {"host_cache_bytes_mapped", static_cast<double>(host_lines * s_.line)},
               {"host_cache_bytes_pinned", static_cast<double>(host_pinned)},
               {"gpu_hits", static_cast<double>(hits)},
               {"gpu_misses", static_cast<double>(misses)},
               {"host_hits", static_cast<double>(host_hits)},
               {"read_ahead_lines", static_cast<double>(ahead)},
               {"read_ahead_reads", static_cast<double>(ahead_reads)},
               {"read_ahead_read_s", ahead_read_s},
               {"fill_s", fill_s},
               {"read_ahead_hits", static_cast<double>(ahead_hits)},
               {"spill_bytes_written", static_cast<double>(spill)},
               {"spill_bytes_read", static_cast<double>(spill_read)},
               {"write_behind_lines", static_cast<double>(behind)},
               {"gpu_wait_s", wait},
               {"load_reads", static_cast<double>(load_reads)},
               {"load_read_s", load_read_s},
               {"epochs_committed", static_cast<double>(epochs)},
               {"log_bytes_written", static_cast<double>(log_bytes)},
               {"map_s", map_s},
               {"map_allocate_s", map_allocate_s},
               {"map_gpu_cache_s", map_gpu_cache_s},
               {"map_host_cache_s", map_host_cache_s},
               {"map_load_s", map_load_s},
               {"passes_s", passes_s},
               {"sync_s", sync_s},
               {"unmap_s", unmap_s}};
    return t;
  }

  // ---- fread-memcpy and managed ----
  // Whether the whole problem may live in GPU memory: the in-gpu case, within free memory.
  std::string in_core_refusal(bool managed) const {
    if (s_.where != regime::in_gpu) {
      return "the problem does not fit the case's GPU cap (in-core modes run in-gpu only)";
    }
    std::size_t free_bytes = 0, total = 0;
    gpm::check_cuda(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
    if (pb_.footprint() + (64ull << 20) > free_bytes / 10 * 9) {
      return std::string("the problem does not fit in free GPU memory") +
             (managed ? " (managed memory is never oversubscribed)" : "");
    }
    return {};
  }

  traffic fread_memcpy() {
    traffic t;
    std::vector<gpm::device_buffer<float>> dev;
    std::vector<float> host;
    device_arrays acc;
    acc.small = small_->data();
    for (int a = 0; a < narrays(); ++a) {
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      dev.emplace_back(n);
      acc.p[a] = dev.back().data();
      if (pb_.arrays[a].kind == role::input) {
        host.resize(n);
        read_whole(st_.input_paths[a], host.data(), n);
        dev.back().copy_from_host(host.data(), n);
        t.disk_read += n * sizeof(float);
        t.to_gpu += n * sizeof(float);
      } else {
        dev.back().fill_bytes(0);
      }
    }
    gpm::stream s;
    for (const pass& p : pb_.passes) launch(p, acc, 0, pb_.items, s);
    gpm::check_cuda(cudaStreamSynchronize(s), "ooc pass kernels");
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::output) continue;
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      host.resize(n);
      dev[a].copy_to_host(host.data(), n);
      write_whole(out_path_[a], host.data(), n);
      t.disk_written += n * sizeof(float);
      t.from_gpu += n * sizeof(float);
    }
    return t;
  }

  traffic managed() {
    traffic t;
    struct managed_free {
      void operator()(float* p) const { cudaFree(p); }
    };
    std::vector<std::unique_ptr<float, managed_free>> mem;
    device_arrays acc;
    acc.small = small_->data();
    for (int a = 0; a < narrays(); ++a) {
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      float* p = nullptr;
      gpm::check_cuda(cudaMallocManaged(&p, n * sizeof(float)), "cudaMallocManaged");
      mem.emplace_back(p);
      acc.p[a] = p;
      if (pb_.arrays[a].kind == role::input) {
        read_whole(st_.input_paths[a], p, n);
        t.disk_read += n * sizeof(float);
      } else {
        std::memset(p, 0, n * sizeof(float));
      }
    }
    gpm::stream s;
    for (const pass& p : pb_.passes) launch(p, acc, 0, pb_.items, s);
    gpm::check_cuda(cudaStreamSynchronize(s), "ooc pass kernels");
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::output) continue;
      write_whole(out_path_[a], mem[a].get(), pb_.items * pb_.arrays[a].width);
      t.disk_written += pb_.array_bytes(a);
    }
    return t;
  }

  // ---- chunked-pipeline ----
  traffic chunked() {
    return pb_.footprint() <= s_.gpu_cache ? chunked_resident() : chunked_streamed();
  }

 private:
  int narrays() const { return static_cast<int>(pb_.arrays.size()); }

  bool read_in_some_pass(int a) const {
    for (const pass& p : pb_.passes) {
      for (const array_read& r : p.reads) {
        if (r.array == a) return true;
      }
    }
    return false;
  }

  // Array a's share of a cap, in whole lines, at least `min_lines`.
  std::uint64_t share(std::uint64_t cap, int a, std::uint64_t min_lines) const {
    const double part = static_cast<double>(cap) * static_cast<double>(pb_.array_bytes(a)) /
                        static_cast<double>(pb_.footprint());
    const std::uint64_t lines = static_cast<std::uint64_t>(part) / s_.line;
    const std::uint64_t whole = (pb_.array_bytes(a) + s_.line - 1) / s_.line;
    return std::min(std::max(lines, min_lines), std::max(whole, min_lines)) * s_.line;
  }

  // Whether gpmkit's mode runs pass p in windows of items: a pass that reads neighbour items (a
  // halo) over an array larger than its GPU-cache share. A stencil needs each line for the items
  // around it: in one grid-stride launch over an array larger than the GPU cache, a warp that fell
  // behind found those lines evicted by the warps ahead and missed on every item until the end
  // (H100 hotspot out of core: 625K GPU misses for 8K line-passes); the launch boundary lets it
  // catch up. A streaming pass fetches each line once either way.
  bool windowed(const pass& p) const {
    return !p.sequential && std::any_of(p.reads.begin(), p.reads.end(),
                                        [](const array_read& r) { return r.halo > 0; });
  }

  std::uint64_t whole_lines(int a) const { return (pb_.array_bytes(a) + s_.line - 1) / s_.line; }

  // GPU-cache lines of array a that pass p touches while two consecutive windows of w items run
  // (the windows alternate between two streams), halo included, plus two: the span may straddle
  // one line more than its bytes fill, and a miss brings one in. 0 when p does not touch a; never
  // more than the array's lines.
  std::uint64_t window_lines(const pass& p, int a, std::uint64_t w) const {
    bool touched = false;
    std::uint64_t halo = 0;
    for (const array_read& r : p.reads) {
      if (r.array != a) continue;
      touched = true;
      halo = std::max(halo, r.halo);
    }
    for (int x : p.writes) touched = touched || x == a;
    if (!touched) return 0;
    const std::uint64_t bytes =
        std::min(pb_.items, 2 * w + 2 * halo) * pb_.arrays[a].width * sizeof(float);
    return std::min(whole_lines(a), (bytes + s_.line - 1) / s_.line + 2);
  }

  // Each array's share of the GPU cap, in lines. First every array gets what the smallest window
  // (one item) of each windowed pass needs of it, its halo on both sides: a share sized by bytes
  // alone gave lavaMD's charges one line for a halo spanning two (H100: 21,926 misses for 118
  // lines, 0.01x the chunked pipeline). The rest of the cap is split in proportion to the
  // arrays' sizes, in whole lines, none beyond an array's own. Where the halos alone exceed the
  // cap, the split is by size only (at least a line each) and the windows cannot help.
  std::vector<std::uint64_t> gpu_shares() const {
    const std::uint64_t cap = s_.gpu_cache / s_.line;
    std::vector<std::uint64_t> need(pb_.arrays.size(), 1);
    for (const pass& p : pb_.passes) {
      if (!windowed(p)) continue;
      for (int a = 0; a < narrays(); ++a) need[a] = std::max(need[a], window_lines(p, a, 1));
    }
    std::uint64_t needed = 0;
    for (std::uint64_t n : need) needed += n;
    if (needed > cap) {
      std::fill(need.begin(), need.end(), 1);
      needed = narrays();
    }
    const std::uint64_t left = cap > needed ? cap - needed : 0;
    std::vector<std::uint64_t> lines(need.size());
    for (int a = 0; a < narrays(); ++a) {
      const std::uint64_t part = static_cast<std::uint64_t>(
          static_cast<double>(left) * static_cast<double>(pb_.array_bytes(a)) /
          static_cast<double>(pb_.footprint()));
      lines[a] = std::max(need[a], std::min(need[a] + part, whole_lines(a)));
    }
    return lines;
  }

  // Items of pass p that gpmkit's mode gives one launch: all of them unless the pass is
  // windowed, else the most for which two consecutive windows fit every touched array's share
  // (at least one item).
  std::uint64_t window_items(const pass& p) const {
    if (!windowed(p)) return pb_.items;
    const auto fits = [&](std::uint64_t w) {
      for (int a = 0; a < narrays(); ++a) {
        if (window_lines(p, a, w) > gpu_share_[a]) return false;
      }
      return true;
    };
    std::uint64_t lo = 1, hi = pb_.items;  // the answer lies in [lo, hi]
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo + 1) / 2;
      if (fits(mid))
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }

  // Every mode launches a pass with at most the blocks the GPU runs at once
  // (gpm::resident_blocks): a grid in waves would walk the arrays once per wave, so gpmkit's
  // caches would fetch every line again for each wave after the first.
  template <class Acc>
  void launch(const pass& p, const Acc& acc, std::uint64_t lo, std::uint64_t hi, cudaStream_t s) {
    const unsigned most = gpm::resident_blocks(pass_kernel<W, Acc>, geo_.threads);
    if (p.sequential) {
      for (std::uint64_t i = lo; i < hi; ++i) {
        gpm::launch(pass_kernel<W, Acc>, blocks_for(p.span, most), geo_.threads, 0, s, pb_.params,
                    p.args, acc, i, i + 1, p.span);
      }
    } else {
      gpm::launch(pass_kernel<W, Acc>, blocks_for((hi - lo) * p.span, most), geo_.threads, 0, s,
                  pb_.params, p.args, acc, lo, hi, p.span);
    }
  }
  // Blocks for `threads` threads of work: enough to give each one thread, at most `most`.
  unsigned blocks_for(std::uint64_t threads, unsigned most) const {
    const std::uint64_t want = (threads + geo_.threads - 1) / geo_.threads;
    return static_cast<unsigned>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(want, most)));
  }

  void ensure_inputs() {
    const std::string key = dir_ + "#" + std::to_string(pb_.footprint());
    if (st_.inputs_key == key) return;
    st_.input_paths.assign(pb_.arrays.size(), std::string());
    const std::uint64_t piece = ctx_.options.quick ? (64u << 10) : (16u << 20);
    gpm::device_buffer<float> dev(piece / sizeof(float));
    gpm::pinned_buffer<float> host(piece / sizeof(float));
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::input) continue;
      const std::string path = dir_ + "/in-" + pb_.arrays[a].name + ".bin";
      const disk_file f(path, true, pb_.array_bytes(a));
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      for (std::uint64_t at = 0; at < n; at += piece / sizeof(float)) {
        const std::uint64_t k = std::min<std::uint64_t>(piece / sizeof(float), n - at);
        gpm::launch(generate_kernel<W>, blocks_for(k, geo_.blocks), geo_.threads, 0, nullptr,
                    pb_.params, a, at, k, dev.data());
        gpm::check_cuda(
            cudaMemcpy(host.data(), dev.data(), k * sizeof(float), cudaMemcpyDeviceToHost),
            "cudaMemcpy");
        f.write(at * sizeof(float), k * sizeof(float), host.data());
      }
      f.sync();
      st_.input_paths[a] = path;
    }
    st_.inputs_key = key;
  }

  void clear_outputs() const {
    for (const std::string& p : out_path_) {
      std::filesystem::remove(p);
      std::filesystem::remove(gpm::ooc::epoch_log_path(p));  // crash_consistent_outputs
    }
  }

  void read_whole(const std::string& path, float* to, std::uint64_t n) const {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr || std::fread(to, sizeof(float), n, f) != n) {
      if (f != nullptr) std::fclose(f);
      throw std::runtime_error("cannot read " + path);
    }
    std::fclose(f);
  }
  void write_whole(const std::string& path, const float* from, std::uint64_t n) const {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const bool ok = f != nullptr && std::fwrite(from, sizeof(float), n, f) == n &&
                    std::fflush(f) == 0 && ::fdatasync(fileno(f)) == 0;
    if (f != nullptr) std::fclose(f);
    if (!ok) throw std::runtime_error("cannot write " + path);
  }

  // Where the chunked pipeline keeps an array between passes.
  struct backing {
    std::unique_ptr<disk_file> file;
    std::vector<float> host;  // intermediates that fit the host cap
    void read(std::uint64_t off, std::uint64_t bytes, void* to) const {
      if (file) {
        file->read(off, bytes, to);
      } else {
        std::memcpy(to, reinterpret_cast<const char*>(host.data()) + off, bytes);
      }
    }
    void write(std::uint64_t off, std::uint64_t bytes, const void* from) {
      if (file) {
        file->write(off, bytes, from);
      } else {
        std::memcpy(reinterpret_cast<char*>(host.data()) + off, from, bytes);
      }
    }
  };

  // Where the chunked pipeline keeps the intermediates: only in GPU memory (the whole problem is
  // there: no backing), in host memory, or in scratch files.
  enum class scratch_place { gpu, host, file };

  std::vector<backing> open_backings(scratch_place scratch) {
    std::vector<backing> b(pb_.arrays.size());
    for (int a = 0; a < narrays(); ++a) {
      const role r = pb_.arrays[a].kind;
      if (r == role::input) {
        b[a].file = std::make_unique<disk_file>(st_.input_paths[a], false);
      } else if (r == role::output) {
        b[a].file = std::make_unique<disk_file>(out_path_[a], true, pb_.array_bytes(a));
      } else if (scratch == scratch_place::gpu) {
        continue;  // never read or written on the host: a zeroed host copy was wasted work
      } else if (scratch == scratch_place::host) {
        b[a].host.assign(pb_.items * pb_.arrays[a].width, 0.0f);
      } else {
        b[a].file = std::make_unique<disk_file>(dir_ + "/scratch-" + pb_.arrays[a].name + ".bin",
                                                true, pb_.array_bytes(a));
      }
    }
    return b;
  }

  // The whole problem in GPU memory: double-buffered loads, the passes, double-buffered stores,
  // timed as metrics load_s (allocation included), passes_s and store_s (fdatasync included).
  traffic chunked_resident() {
    lap_timer laps;
    traffic t;
    std::vector<backing> b = open_backings(scratch_place::gpu);
    std::vector<gpm::device_buffer<float>> dev;
    device_arrays acc;
    acc.small = small_->data();
    for (int a = 0; a < narrays(); ++a) {
      dev.emplace_back(pb_.items * pb_.arrays[a].width);
      acc.p[a] = dev.back().data();
      if (pb_.arrays[a].kind != role::input) dev.back().fill_bytes(0);
    }
    const std::uint64_t piece = ctx_.options.quick ? (64u << 10) : (8u << 20);
    std::vector<gpm::pinned_buffer<char>>& stage = st_.resident_stage;
    if (stage.empty() || stage[0].size() != piece) {
      stage.clear();
      stage.emplace_back(piece);
      stage.emplace_back(piece);
    }
    gpm::stream streams[2];
    gpm::event done[2];
    bool pending[2] = {false, false};
    int k = 0;
    double read_s = 0;  // the reads alone, as gpmkit's resident load counts its own
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::input) continue;
      for (std::uint64_t at = 0; at < pb_.array_bytes(a); at += piece, ++k) {
        const int slot = k % 2;
        const std::uint64_t n = std::min(piece, pb_.array_bytes(a) - at);
        if (pending[slot]) done[slot].synchronize();
        lap_timer read;
        b[a].read(at, n, stage[slot].data());
        read_s += read.lap();
        gpm::check_cuda(
            cudaMemcpyAsync(reinterpret_cast<char*>(dev[a].data()) + at, stage[slot].data(), n,
                            cudaMemcpyHostToDevice, streams[slot]),
            "cudaMemcpyAsync");
        done[slot].record(streams[slot]);
        pending[slot] = true;
        t.disk_read += n;
        t.to_gpu += n;
      }
    }
    for (gpm::stream& s : streams) gpm::check_cuda(cudaStreamSynchronize(s), "loads");
    const double load_s = laps.lap();
    for (const pass& p : pb_.passes) launch(p, acc, 0, pb_.items, streams[0]);
    gpm::check_cuda(cudaStreamSynchronize(streams[0]), "ooc pass kernels");
    const double passes_s = laps.lap();
    // Stores: the copy of piece j overlaps the write of piece j - 1.
    struct piece_out {
      int a;
      std::uint64_t at, n;
    };
    std::vector<piece_out> outs;
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::output) continue;
      for (std::uint64_t at = 0; at < pb_.array_bytes(a); at += piece) {
        outs.push_back({a, at, std::min(piece, pb_.array_bytes(a) - at)});
      }
    }
    for (std::size_t j = 0; j <= outs.size(); ++j) {
      if (j < outs.size()) {
        const piece_out& o = outs[j];
        gpm::check_cuda(cudaMemcpyAsync(stage[j % 2].data(),
                                        reinterpret_cast<const char*>(dev[o.a].data()) + o.at, o.n,
                                        cudaMemcpyDeviceToHost, streams[j % 2]),
                        "cudaMemcpyAsync");
        done[j % 2].record(streams[j % 2]);
      }
      if (j > 0) {
        const piece_out& o = outs[j - 1];
        done[(j - 1) % 2].synchronize();
        b[o.a].write(o.at, o.n, stage[(j - 1) % 2].data());
        t.disk_written += o.n;
        t.from_gpu += o.n;
      }
    }
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind == role::output) b[a].file->sync();
    }
    t.extra = {{"chunked_streamed", 0.0}, {"load_reads", static_cast<double>(k)},
               {"load_read_s", read_s},   {"load_s", load_s},
               {"passes_s", passes_s},    {"store_s", laps.lap()}};
    return t;
  }

  // Every pass streams its items through the GPU in chunks: two slots, each with its own
  // stream, device windows and pinned staging; the host reads chunk k's windows (halos
  // included) while the GPU computes chunk k - 1, then writes chunk k - 2's results.
  traffic chunked_streamed() {
    traffic t;
    std::uint64_t scratch_bytes = 0;
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind == role::scratch) scratch_bytes += pb_.array_bytes(a);
    }
    const bool scratch_in_host = scratch_bytes <= s_.host_cache;
    std::vector<backing> b =
        open_backings(scratch_in_host ? scratch_place::host : scratch_place::file);
    const std::uint64_t align = alignment_items(pb_.arrays);
    gpm::stream streams[2];
    gpm::event done[2], computed[2];
    std::uint64_t chunks_run = 0;
    for (const pass& p : pb_.passes) {
      // Arrays the pass touches: halo (reads) and whether it writes them.
      struct use {
        int a;
        std::uint64_t halo;
        bool read, write;
      };
      std::vector<use> uses;
      for (const array_read& r : p.reads) uses.push_back({r.array, r.halo, true, false});
      for (int w : p.writes) {
        auto it = std::find_if(uses.begin(), uses.end(), [&](const use& u) { return u.a == w; });
        if (it == uses.end()) {
          uses.push_back({w, 0, false, true});
        } else if (it->halo != 0) {
          throw std::logic_error(std::string(W::name) +
                                 ": a pass reads with a halo an array it writes");
        } else {
          it->write = true;
        }
      }
      std::uint64_t per_item = 0, halo = 0;
      for (const use& u : uses) {
        per_item += pb_.arrays[u.a].width * sizeof(float);
        halo = std::max(halo, u.halo);
      }
      std::uint64_t chunk = s_.gpu_cache / 2 / per_item;
      chunk = chunk > 2 * halo + align ? chunk - 2 * halo : align;
      chunk = std::max<std::uint64_t>(align, chunk / align * align);
      chunk = std::min(chunk, (pb_.items + align - 1) / align * align);
      // Buffers: a window of chunk + 2 halo items, plus alignment slack on both ends.
      struct slot_buffers {
        std::vector<gpm::device_buffer<float>> dev;
        std::vector<gpm::pinned_buffer<char>> in, out;
      };
      slot_buffers sb[2];
      for (slot_buffers& x : sb) {
        for (const use& u : uses) {
          const std::uint64_t row = pb_.arrays[u.a].width * sizeof(float);
          const std::uint64_t bytes = (chunk + 2 * u.halo) * row + 2 * kDirectAlign;
          x.dev.emplace_back(bytes / sizeof(float));
          x.in.emplace_back(u.read ? bytes : 1);
          x.out.emplace_back(u.write ? chunk * row : 1);
        }
      }
      const std::uint64_t nchunks = (pb_.items + chunk - 1) / chunk;
      const auto finish = [&](std::uint64_t k) {
        const int slot = static_cast<int>(k % 2);
        done[slot].synchronize();
        const std::uint64_t lo = k * chunk, hi = std::min(pb_.items, lo + chunk);
        for (std::size_t j = 0; j < uses.size(); ++j) {
          if (!uses[j].write) continue;
          const std::uint64_t row = pb_.arrays[uses[j].a].width * sizeof(float);
          b[uses[j].a].write(lo * row, (hi - lo) * row, sb[slot].out[j].data());
          count_backing(t, uses[j].a, 0, (hi - lo) * row);
          t.from_gpu += (hi - lo) * row;
        }
      };
      for (std::uint64_t k = 0; k < nchunks; ++k, ++chunks_run) {
        const int slot = static_cast<int>(k % 2);
        if (k >= 2) finish(k - 2);
        const std::uint64_t lo = k * chunk, hi = std::min(pb_.items, lo + chunk);
        device_arrays acc;
        acc.small = small_->data();
        for (std::size_t j = 0; j < uses.size(); ++j) {
          const use& u = uses[j];
          const std::uint64_t width = pb_.arrays[u.a].width, row = width * sizeof(float);
          const std::uint64_t first = lo > u.halo ? lo - u.halo : 0;
          const std::uint64_t last = std::min(pb_.items, hi + u.halo);
          float* d = sb[slot].dev[j].data();
          if (u.read) {
            // Read an aligned superset of the window's bytes; the window starts `skip` in.
            const std::uint64_t from = first * row / kDirectAlign * kDirectAlign;
            const std::uint64_t to =
                std::min((last * row + kDirectAlign - 1) / kDirectAlign * kDirectAlign,
                         pb_.array_bytes(u.a));
            const std::uint64_t skip = first * row - from;
            b[u.a].read(from, to - from, sb[slot].in[j].data());
            count_backing(t, u.a, to - from, 0);
            gpm::check_cuda(cudaMemcpyAsync(d, sb[slot].in[j].data() + skip, (last - first) * row,
                                            cudaMemcpyHostToDevice, streams[slot]),
                            "cudaMemcpyAsync");
            t.to_gpu += (last - first) * row;
            acc.base[u.a] = first * width;
          } else {
            acc.base[u.a] = lo * width;
          }
          acc.p[u.a] = d;
        }
        if (p.sequential && k > 0) {
          gpm::check_cuda(cudaStreamWaitEvent(streams[slot], computed[1 - slot].get(), 0),
                          "cudaStreamWaitEvent");
        }
        launch(p, acc, lo, hi, streams[slot]);
        computed[slot].record(streams[slot]);
        for (std::size_t j = 0; j < uses.size(); ++j) {
          if (!uses[j].write) continue;
          const std::uint64_t width = pb_.arrays[uses[j].a].width;
          const float* src = sb[slot].dev[j].data() + (lo * width - acc.base[uses[j].a]);
          gpm::check_cuda(
              cudaMemcpyAsync(sb[slot].out[j].data(), src, (hi - lo) * width * sizeof(float),
                              cudaMemcpyDeviceToHost, streams[slot]),
              "cudaMemcpyAsync");
        }
        done[slot].record(streams[slot]);
      }
      for (std::uint64_t k = nchunks >= 2 ? nchunks - 2 : 0; k < nchunks; ++k) finish(k);
    }
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind == role::output) b[a].file->sync();
    }
    t.extra = {{"chunked_streamed", 1.0},
               {"chunks", static_cast<double>(chunks_run)},
               {"scratch_in_host", scratch_in_host ? 1.0 : 0.0},
               {"host_scratch_bytes", static_cast<double>(host_scratch_)}};
    return t;
  }

  void count_backing(traffic& t, int a, std::uint64_t read, std::uint64_t written) {
    if (pb_.arrays[a].kind == role::scratch && !scratch_on_disk(a)) {
      host_scratch_ += read + written;
    } else {
      t.disk_read += read;
      t.disk_written += written;
    }
  }
  bool scratch_on_disk(int a) const {
    std::uint64_t scratch_bytes = 0;
    for (int x = 0; x < narrays(); ++x) {
      if (pb_.arrays[x].kind == role::scratch) scratch_bytes += pb_.array_bytes(x);
    }
    return pb_.arrays[a].kind == role::scratch && scratch_bytes > s_.host_cache;
  }

  // ---- checks ----
  // The outputs the last repeat left: every output file's floats, then the small array.
  std::vector<std::vector<float>> outputs(const std::vector<std::uint64_t>* at) const {
    std::vector<std::vector<float>> got;
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind != role::output) continue;
      const disk_file f(out_path_[a], false);
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      if (at == nullptr) {
        got.emplace_back(n);
        f.read(0, n * sizeof(float), got.back().data());
      } else {
        got.emplace_back();
        for (std::uint64_t e : *at) {
          float v = 0;
          f.read(e % n * sizeof(float), sizeof v, &v);
          got.back().push_back(v);
        }
      }
    }
    got.emplace_back(pb_.small_floats);
    if (pb_.small_floats > 0) small_->copy_to_host(got.back().data(), pb_.small_floats);
    return got;
  }

  std::vector<std::vector<float>> cpu_reference() const {
    std::vector<std::vector<float>> arrays(pb_.arrays.size());
    std::vector<float> small(std::max<std::uint32_t>(pb_.small_floats, 1), 0.0f);
    host_arrays acc;
    acc.small = small.data();
    for (int a = 0; a < narrays(); ++a) {
      const std::uint64_t n = pb_.items * pb_.arrays[a].width;
      arrays[a].assign(n, 0.0f);
      if (pb_.arrays[a].kind == role::input) {
        for (std::uint64_t e = 0; e < n; ++e) arrays[a][e] = W::input(pb_.params, a, e);
      }
      acc.p[a] = arrays[a].data();
    }
    for (const pass& p : pb_.passes) {
      // Element order does not matter within a pass (no pass reads what it writes across items).
      typename W::local l{};
      for (std::uint64_t i = 0; i < pb_.items; ++i) {
        for (std::uint32_t k = 0; k < p.span; ++k) W::element(pb_.params, p.args, acc, i, k, l);
      }
      W::finish(pb_.params, p.args, acc, l);
    }
    std::vector<std::vector<float>> out;
    for (int a = 0; a < narrays(); ++a) {
      if (pb_.arrays[a].kind == role::output) out.push_back(std::move(arrays[a]));
    }
    small.resize(pb_.small_floats);
    out.push_back(std::move(small));
    return out;
  }

  void compare(const std::string& what, const std::vector<std::vector<float>>& got,
               const std::vector<std::vector<float>>& want) const {
    for (std::size_t a = 0; a < got.size(); ++a) {
      for (std::size_t i = 0; i < got[a].size(); ++i) {
        const float g = got[a][i], w = want[a][i];
        if (!(std::fabs(g - w) <= W::tolerance * std::max(1.0f, std::fabs(w)))) {
          check_failed(what + ": output " + std::to_string(a) + " value " + std::to_string(i) +
                       " is " + std::to_string(g) + ", expected " + std::to_string(w));
        }
      }
    }
  }

  void check(const std::string& mode_name) {
    const std::string what = std::string(W::name) + "/" + mode_name + " (" + ctx_.case_name + ")";
    const std::string key = dir_ + "#" + std::to_string(pb_.footprint());
    if (pb_.footprint() <= kFullCheckBytes) {
      if (st_.reference_key != key) {
        st_.reference = cpu_reference();
        st_.reference_key = key;
      }
      compare(what + " against the CPU", outputs(nullptr), st_.reference);
      return;
    }
    std::vector<std::uint64_t> at;
    std::uint64_t largest = 0;
    for (int a = 0; a < narrays(); ++a)
      largest = std::max(largest, pb_.items * pb_.arrays[a].width);
    for (std::uint32_t i = 0; i < kSamplesPerArray; ++i) {
      at.push_back(gpm::mix64(i + 1) % largest);
    }
    const std::vector<std::vector<float>> got = outputs(&at);
    if (st_.samples_key == key) {
      compare(what + " against " + st_.samples_mode, got, st_.samples);
    } else {
      st_.samples = got;
      st_.samples_mode = mode_name;
      st_.samples_key = key;
    }
  }

  const mode_context& ctx_;
  family_state& st_;
  settings s_;
  problem<W> pb_;
  geometry geo_;
  std::string dir_;
  std::vector<std::string> out_path_;
  std::vector<std::uint64_t> gpu_share_;  // gpmkit: each array's GPU-cache lines (gpu_shares)
  std::optional<gpm::device_buffer<float>> small_;
  std::uint64_t host_scratch_ = 0;
};

// The modes of an ooc workload, sharing `st`; `settings_of` gives the case's settings.
template <class W>
std::vector<mode> ooc_modes(std::shared_ptr<family_state> st,
                            std::function<settings(const mode_context&)> settings_of,
                            bool baselines) {
  const auto measured = [st, settings_of](const char* name, auto body) {
    return [st, settings_of, name, body](const mode_context& ctx) {
      runner<W> r(ctx, *st, settings_of(ctx));
      return body(r, name);
    };
  };
  std::vector<mode> modes = {
      {"disk-sequential", "sequential write then read of the run's disk directory (O_DIRECT)", "",
       [st](const mode_context& ctx) { return disk_mode(ctx, *st); }},
      {"gpmkit", "every array a gpm::ooc::mapping under the case's caps; kernels on ooc::array",
       "disk-sequential", measured("gpmkit", [](runner<W>& r, const char* n) {
         return r.measure(n, [&] { return r.gpmkit(); });
       })}};
  if (!baselines) return modes;
  modes.push_back({"fread-memcpy",
                   "fread each input, cudaMemcpy, compute, copy back, fwrite (in-gpu only)",
                   "disk-sequential", measured("fread-memcpy", [](runner<W>& r, const char* n) {
                     measurement m;
                     m.skipped = r.in_core_refusal(false);
                     return m.skipped.empty() ? r.measure(n, [&] { return r.fread_memcpy(); }) : m;
                   })});
  modes.push_back({"chunked-pipeline",
                   "hand-written double-buffered pread + cudaMemcpyAsync chunks within the caps",
                   "disk-sequential", measured("chunked-pipeline", [](runner<W>& r, const char* n) {
                     return r.measure(n, [&] { return r.chunked(); });
                   })});
  modes.push_back({"managed",
                   "cudaMallocManaged arrays read into (in-gpu only, within free memory)",
                   "disk-sequential", measured("managed", [](runner<W>& r, const char* n) {
                     measurement m;
                     m.skipped = r.in_core_refusal(true);
                     return m.skipped.empty() ? r.measure(n, [&] { return r.managed(); }) : m;
                   })});
  return modes;
}

// A family workload: the three regimes, every mode. `gpu_base`: the out-of-core footprint on a GPU.
template <class W>
workload family_workload(const std::string& summary, std::uint64_t gpu_base) {
  auto st = std::make_shared<family_state>();
  workload w{W::name, summary,
             ooc_modes<W>(
                 st,
                 [gpu_base](const mode_context& ctx) {
                   return regime_settings(ctx, base_bytes(ctx, gpu_base));
                 },
                 true)};
  w.cases = kRegimeCases;
  return w;
}

// An ablation workload: gpmkit alone, out of core, one case per variation of its settings
// (ablation_settings names them).
template <class W>
workload ablation_workload(const std::string& name, const std::string& summary,
                           std::uint64_t gpu_base, std::vector<std::string> cases) {
  workload w{name, summary,
             ooc_modes<W>(
                 std::make_shared<family_state>(),
                 [gpu_base](const mode_context& ctx) {
                   // --quick: half the family's size (six cases of heavy eviction).
                   return ablation_settings(
                       ctx, base_bytes(ctx, gpu_base) >> (ctx.options.quick ? 1 : 0));
                 },
                 false)};
  w.cases = std::move(cases);
  return w;
}

}  // namespace gpmbench::ooc
