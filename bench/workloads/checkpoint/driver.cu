// The driver of the checkpoint workloads (see app.hpp): one mode per way of making an iterative
// application's state durable, measured side by side against the D2H copy ceiling of the same
// run. Each mode reports, for the same application:
//   times_s        one checkpoint (call to durable; for hetero-async, call to captured)
//   metrics        restore_s, bytes_moved per checkpoint, and the total time of 20 iterations
//                  with no checkpoint and with one every 1, 10 and 20 iterations (overhead_every_N
//                  = that time / the time without checkpoints - 1)
// and fails instead of reporting when a restore does not give back the checkpointed bytes.
//
// Modes: gpm (gpm::checkpointer, GPU stores, HeteroCheckpoint optimisations off), gpm-dma (its
// DMA path), hetero (both optimisations, copy path chosen by measurement), hetero-precopy and
// hetero-redundant (one optimisation each), hetero-async (checkpoint_async), and the paper's
// baselines gpm-ndp, cap-mm and cap-fs (bench/gpmbench/baselines.hpp) with the same double
// buffering: the working copy is written and made durable, then the consistent-copy word flips.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/checkpoint/digest.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "app.hpp"
#include "baselines.hpp"
#include "resources.hpp"
#include "timing.hpp"

namespace gpmbench {

app_scale scale_of(const mode_context& ctx) {
  return ctx.options.quick     ? app_scale::quick
         : ctx.device.emulated ? app_scale::emulator
                               : app_scale::gpu;
}

namespace {

constexpr std::uint64_t kOverheadIterations = 20;
constexpr std::uint64_t kIntervals[] = {1, 10, 20};

std::uint64_t state_bytes(const std::vector<app_chunk>& chunks) {
  std::uint64_t b = 0;
  for (const app_chunk& c : chunks) b += c.bytes;
  return b;
}

// Pages for the copies of every chunk, the checkpointer's own object and the pool's metadata.
std::uint64_t pool_bytes_for_state(const std::vector<app_chunk>& chunks) {
  std::uint64_t b = 0;
  for (const app_chunk& c : chunks) {
    b += 2 * ((c.bytes + bench_pool::kPageBytes - 1) / bench_pool::kPageBytes) *
         bench_pool::kPageBytes;
  }
  return pool_bytes_for(b + (1 << 20));
}

// ---- the ways of checkpointing ----------------------------------------------------------------

class checkpoint_strategy {
 public:
  virtual ~checkpoint_strategy() = default;
  virtual void precopy(const app_chunk&, cudaStream_t) {}
  virtual void checkpoint(cudaStream_t s) = 0;
  virtual void restore(cudaStream_t s) = 0;
  virtual void drain() {}         // waits for background work (hetero-async)
  std::uint64_t bytes_moved = 0;  // in all checkpoints so far
};

struct checkpointer_settings {
  gpm::copy_path path;
  bool redundant;
  bool precopy;
  bool async;
};

// gpm::checkpointer, configured per mode.
class checkpointer_strategy final : public checkpoint_strategy {
 public:
  checkpointer_strategy(gpm::pool& pool, const std::vector<app_chunk>& chunks,
                        checkpointer_settings s)
      : async_(s.async) {
    gpm::checkpoint_options o;
    o.path = s.path;
    o.eliminate_redundant = s.redundant;
    o.honour_precopy = s.precopy;
    o.max_chunks = static_cast<std::uint32_t>(chunks.size());
    o.notice = [](const std::string&) {};
    cp_.emplace(gpm::checkpointer::create(pool, "bench", o));
    for (const app_chunk& c : chunks) cp_->add(c.name, c.device, c.bytes);
  }
  void precopy(const app_chunk& c, cudaStream_t s) override { cp_->precopy(c.name, s); }
  void checkpoint(cudaStream_t s) override {
    drain();
    if (async_) {
      pending_ = cp_->checkpoint_async(0, s);
    } else {
      bytes_moved += cp_->checkpoint(0, s).bytes_copied;
    }
  }
  void drain() override {
    if (pending_.valid()) bytes_moved += pending_.get().bytes_copied;
    pending_ = {};
  }
  void restore(cudaStream_t s) override {
    drain();
    cp_->restore(0, s);
  }

 private:
  bool async_;
  std::optional<gpm::checkpointer> cp_;
  gpm::pending_checkpoint pending_;
};

// A plain GPU copy into mapped pool memory without persists: what gpm-ndp's kernels store.
// 16-byte units (both sides are page- or cudaMalloc-aligned), the last partial unit by bytes.
__global__ void copy_without_persist(unsigned char* dst, const unsigned char* src,
                                     std::uint64_t bytes) {
  const std::uint64_t units = bytes / 16;
  for (std::uint64_t i : gpm::grid_stride(units))
    reinterpret_cast<ulonglong2*>(dst)[i] = reinterpret_cast<const ulonglong2*>(src)[i];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (std::uint64_t b = units * 16; b < bytes; ++b) dst[b] = src[b];
  }
}

enum class baseline { gpm_ndp, cap_mm, cap_fs };

// The paper's baselines with GPM's double buffering: per chunk two copies (in the pool, or two
// regions of one file for cap-fs), and a consistent-copy word flipped once all are durable.
class baseline_strategy final : public checkpoint_strategy {
 public:
  baseline_strategy(const mode_context& ctx, bench_pool& pool, const std::vector<app_chunk>& chunks,
                    baseline kind)
      : ctx_(ctx), pool_(pool), chunks_(chunks), kind_(kind), ndp_(team_) {
    std::uint64_t file_offset = 4096;  // the first page holds the consistent-copy word
    for (const app_chunk& c : chunks) {
      copies_.push_back({pool.pool().allocate(c.name + ".a", c.bytes, 4096),
                         pool.pool().allocate(c.name + ".b", c.bytes, 4096)});
      file_offsets_.push_back({file_offset, file_offset + c.bytes});
      file_offset += 2 * c.bytes;
      largest_ = std::max(largest_, c.bytes);
    }
    flag_ = pool.pool().host_ptr<std::uint64_t>(pool.pool().allocate("consistent", 8));
    if (kind == baseline::cap_mm) mm_.emplace(team_, std::min<std::uint64_t>(largest_, 64 * kMiB));
    if (kind == baseline::cap_fs) {
      fs_.emplace(ctx.pm_dir + "/cap-fs.checkpoint", std::min<std::uint64_t>(largest_, 64 * kMiB));
    }
  }

  void checkpoint(cudaStream_t s) override {
    const std::uint64_t w = 1 - consistent_;
    for (std::size_t i = 0; i < chunks_.size(); ++i) {
      const app_chunk& c = chunks_[i];
      void* host = pool_.pool().host_ptr<void>(copies_[i][w]);
      switch (kind_) {
        case baseline::gpm_ndp: {
          const geometry g = filling_geometry(ctx_);
          gpm::launch(copy_without_persist, g.blocks, g.threads, 0, s,
                      pool_.pool().ref().ptr<unsigned char>(copies_[i][w]),
                      static_cast<const unsigned char*>(c.device), c.bytes);
          gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (gpm-ndp)");
          ndp_.persist(host, c.bytes);
          break;
        }
        case baseline::cap_mm: mm_->persist(host, c.device, c.bytes, s); break;
        case baseline::cap_fs: fs_->write(file_offsets_[i][w], c.device, c.bytes, s); break;
      }
      bytes_moved += c.bytes;
    }
    // The flip, made durable the baseline's way.
    consistent_ = w;
    if (kind_ == baseline::cap_fs) {
      fs_->sync();  // the copies first, then the word that points at them
      const int fd = ::open(fs_->path().c_str(), O_WRONLY);
      if (fd < 0 || ::pwrite(fd, &consistent_, 8, 0) != 8 || ::fsync(fd) != 0) {
        check_failed("cap-fs: cannot write the consistent-copy word of " + fs_->path());
      }
      ::close(fd);
    } else {
      *flag_ = consistent_;
      gpm::write_back(flag_, 8);
    }
  }

  void restore(cudaStream_t s) override {
    for (std::size_t i = 0; i < chunks_.size(); ++i) {
      const app_chunk& c = chunks_[i];
      if (kind_ == baseline::cap_fs) {
        pinned_buffer staging(c.bytes);
        const int fd = ::open(fs_->path().c_str(), O_RDONLY);
        const bool ok = fd >= 0 && ::pread(fd, staging.data(), c.bytes,
                                           static_cast<off_t>(file_offsets_[i][consistent_])) ==
                                       static_cast<ssize_t>(c.bytes);
        if (fd >= 0) ::close(fd);
        if (!ok) check_failed("cap-fs: cannot read back " + fs_->path());
        gpm::check_cuda(
            cudaMemcpyAsync(c.device, staging.data(), c.bytes, cudaMemcpyHostToDevice, s),
            "cudaMemcpyAsync (restore)");
        gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (restore)");
      } else {
        gpm::check_cuda(
            cudaMemcpyAsync(c.device, pool_.pool().host_ptr<void>(copies_[i][consistent_]), c.bytes,
                            cudaMemcpyHostToDevice, s),
            "cudaMemcpyAsync (restore)");
      }
    }
    gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (restore)");
  }

 private:
  const mode_context& ctx_;
  bench_pool& pool_;
  std::vector<app_chunk> chunks_;
  baseline kind_;
  cpu_team team_;
  ndp_persister ndp_;
  std::optional<cap_mm> mm_;
  std::optional<cap_fs> fs_;
  std::vector<std::array<std::uint64_t, 2>> copies_;
  std::vector<std::array<std::uint64_t, 2>> file_offsets_;
  std::uint64_t* flag_ = nullptr;
  std::uint64_t consistent_ = 1;
  std::uint64_t largest_ = 0;
};

using strategy_factory = std::function<std::unique_ptr<checkpoint_strategy>(
    const mode_context&, bench_pool&, const std::vector<app_chunk>&)>;

strategy_factory with_checkpointer(checkpointer_settings s) {
  return [s](const mode_context&, bench_pool& pool, const std::vector<app_chunk>& chunks) {
    return std::make_unique<checkpointer_strategy>(pool.pool(), chunks, s);
  };
}

strategy_factory with_baseline(baseline kind) {
  return [kind](const mode_context& ctx, bench_pool& pool, const std::vector<app_chunk>& chunks) {
    return std::make_unique<baseline_strategy>(ctx, pool, chunks, kind);
  };
}

// ---- measuring --------------------------------------------------------------------------------

std::vector<std::uint64_t> digests(const std::vector<app_chunk>& chunks) {
  std::vector<std::uint64_t> out;
  for (const app_chunk& c : chunks) {
    std::vector<unsigned char> h(c.bytes);
    gpm::check_cuda(cudaMemcpy(h.data(), c.device, c.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
    out.push_back(gpm::chunk_digest(h.data(), c.bytes));
  }
  return out;
}

measurement run_mode(const mode_context& ctx, const checkpoint_app& a, const std::string& mode,
                     const strategy_factory& make_strategy) {
  std::unique_ptr<iterative_app> app = a.make(ctx);
  const std::vector<app_chunk> chunks = app->chunks();
  bench_pool pool(ctx, a.workload + "-" + mode, pool_bytes_for_state(chunks), bench_pool::kNoObject,
                  static_cast<unsigned>(2 * chunks.size() + 4));
  std::unique_ptr<checkpoint_strategy> how = make_strategy(ctx, pool, chunks);
  const gpm::stream s;
  std::uint64_t it = 0;
  auto iterate = [&](bool hint) {
    app->iterate(it++, s, [&] {
      if (!hint) return;
      for (const app_chunk& c : chunks) {
        if (c.change == chunk_change::early) how->precopy(c, s);
      }
    });
  };

  measurement m;
  // One checkpoint per repeat, after an iteration whose kernels have finished.
  std::uint64_t checkpoints = 0;
  m.times_s = ctx.repeat([&](int) {
    iterate(true);
    gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    ++checkpoints;
    return seconds_on_host([&] { how->checkpoint(s); });
  });
  how->drain();
  const double bytes_per_checkpoint =
      static_cast<double>(how->bytes_moved) / static_cast<double>(checkpoints);

  // Total time of kOverheadIterations iterations, checkpointing every `every` (0: never).
  auto total_s = [&](std::uint64_t every) {
    return seconds_on_host([&] {
      for (std::uint64_t k = 1; k <= kOverheadIterations; ++k) {
        const bool now = every != 0 && k % every == 0;
        iterate(now);
        if (now) how->checkpoint(s);
      }
      how->drain();
      gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    });
  };
  const double none_s = total_s(0);
  m.metrics.push_back({"total_s_no_checkpoint", none_s});
  for (std::uint64_t every : kIntervals) {
    const double t = total_s(every);
    m.metrics.push_back({"total_s_every_" + std::to_string(every), t});
    m.metrics.push_back({"overhead_every_" + std::to_string(every), t / none_s - 1});
  }

  // Restore: the last checkpoint's bytes come back after the buffers were overwritten.
  how->checkpoint(s);
  how->drain();
  const std::vector<std::uint64_t> want = digests(chunks);
  iterate(false);  // changes the state after the checkpoint
  gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  const double restore_s = seconds_on_host([&] { how->restore(s); });
  gpm::check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  if (digests(chunks) != want) {
    check_failed(a.workload + "/" + mode + ": restore did not give back the checkpointed state");
  }
  m.metrics.push_back({"restore_s", restore_s});
  m.metrics.push_back({"bytes_moved_per_checkpoint", bytes_per_checkpoint});
  for (auto& f : app->figures()) m.metrics.push_back(std::move(f));

  m.sizes = app->sizes();
  m.sizes.push_back({"state_bytes", state_bytes(chunks)});
  m.sizes.push_back({"chunks", chunks.size()});
  m.sizes.push_back({"overhead_iterations", kOverheadIterations});
  // Throughput counts the state a checkpoint protects, whatever it had to move.
  m.throughput = gigabytes(state_bytes(chunks));
  m.bytes_persisted = static_cast<std::uint64_t>(bytes_per_checkpoint);
  return m;
}

}  // namespace

workload checkpoint_workload(const checkpoint_app& a) {
  struct variant {
    const char* name;
    const char* summary;
    strategy_factory make;
  };
  using gpm::copy_path;
  const variant variants[] = {
      {"gpm", "gpm::checkpointer, GPU stores into the pool, no HeteroCheckpoint optimisations",
       with_checkpointer({copy_path::gpu_stores, false, false, false})},
      {"gpm-dma", "gpm::checkpointer, DMA copies into the pool, no optimisations",
       with_checkpointer({copy_path::dma, false, false, false})},
      {"gpm-ndp", "GPU stores without persists, then CPU threads write the lines back",
       with_baseline(baseline::gpm_ndp)},
      {"cap-mm", "cudaMemcpy to the host, CPU copy into the pool with write-back",
       with_baseline(baseline::cap_mm)},
      {"cap-fs", "cudaMemcpy to the host, write() + fsync() into a file",
       with_baseline(baseline::cap_fs)},
      {"hetero", "pre-copy and redundant-chunk elimination, copy path chosen by measurement",
       with_checkpointer({copy_path::automatic, true, true, false})},
      {"hetero-precopy", "pre-copy only",
       with_checkpointer({copy_path::automatic, false, true, false})},
      {"hetero-redundant", "redundant-chunk elimination only",
       with_checkpointer({copy_path::automatic, true, false, false})},
      {"hetero-async", "both optimisations; checkpoint_async returns once the state is captured",
       with_checkpointer({copy_path::automatic, true, true, true})},
  };
  workload w{a.workload, a.summary, {}};
  w.modes.push_back(d2h_ceiling_mode(
      [a](const mode_context& ctx) { return state_bytes(a.make(ctx)->chunks()); }));
  for (const variant& v : variants) {
    w.modes.push_back({v.name, v.summary, "d2h_memcpy",
                       [a, name = std::string(v.name), make = v.make](const mode_context& ctx) {
                         return run_mode(ctx, a, name, make);
                       }});
  }
  return w;
}

}  // namespace gpmbench
