// Fuzzing the modules' on-media structures (issue 21): a pool holding a tx heap, an HCL log, a
// conventional log, an undo transaction, a GPHash table or a checkpoint, each with some content,
// gets random bit flips and random bytes in one of its objects (half the time in the object's first
// 4 KiB, where headers and control words live); then the pool is reopened, the module's object
// opened (which runs its recovery) and used (loads and a transaction, reads of every log entry,
// finds, a restore). Each step must either work or throw gpm::error: never crash, never hang, never
// any other exception. The pool's own metadata is pool_fuzz_test's. Iterations per module:
// GPMKIT_FUZZ_ITERATIONS / 4 (default 60).
#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/hash/gphash.cuh>
#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>
#include <gpm/log/undo_tx.cuh>
#include <gpm/platform/kernel.cuh>
#include <gpm/tx/tx_heap.cuh>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gpm_test.hpp"
#include "scratch_pool.hpp"

namespace {

using gpm::test::to_device;
using gpm::test::to_host;

int iterations() {
  const char* v = std::getenv("GPMKIT_FUZZ_ITERATIONS");
  return v != nullptr && std::atoi(v) > 0 ? std::max(1, std::atoi(v) / 4) : 60;
}

// ---- kernels (namespace scope: nvcc takes no extended lambdas in a test's body) ---------------

struct increment_words {  // thread i adds 1 to words i and i + 1 (modulo the heap)
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    const std::uint64_t a = i % t.words(), b = (i + 1) % t.words();
    t.write(a, t.read(a) + 1);
    t.write(b, t.read(b) + 1);
  }
};

struct run_body {
  __device__ void operator()(gpm::tx_ref tx) const {
    tx.run<8, 8>([&](auto& t) { increment_words{}(t, tx.worker_index()); });
  }
};

__global__ void log_fill(gpm::hcl_log_ref log) {
  for (std::uint32_t k = 0; k < 3; ++k) {
    std::uint64_t entry[4] = {threadIdx.x, blockIdx.x, k, 0x5eed};
    log.insert(entry, sizeof entry);
  }
}

// Reads and removes every entry of the thread's log it can, whatever it finds: sizes up to 64
// bytes are read, anything else stops the walk.
__global__ void log_drain(gpm::hcl_log_ref log, std::uint32_t* seen) {
  std::uint64_t buffer[8];
  std::uint32_t n = 0;
  for (int k = 0; k < 8; ++k) {
    std::uint32_t bytes = 0;
    if (log.newest_size(bytes) != gpm::log_status::ok || bytes > sizeof buffer) break;
    if (log.read(buffer, bytes) != gpm::log_status::ok) break;
    if (log.remove(bytes) != gpm::log_status::ok) break;
    ++n;
  }
  seen[gpm::tile_index()] = n;
}

// Partition p of a conv_log gets entries from threads t with t % partitions == p.
__global__ void conv_fill(gpm::conv_log_ref log) {
  const auto t = static_cast<std::uint32_t>(gpm::tile_index());
  for (std::uint32_t k = 0; k < 2; ++k) {
    const std::uint64_t entry[2] = {t, k};
    (void)log.insert(t % log.partitions(), entry, sizeof entry);
  }
}

// Thread p reads and removes what it can of partition p.
__global__ void conv_drain(gpm::conv_log_ref log) {
  const std::uint32_t p = threadIdx.x;
  if (p >= log.partitions()) return;
  std::uint64_t entry[8];
  for (int k = 0; k < 16; ++k) {
    std::uint32_t bytes = 0;
    if (log.newest_size(p, bytes) != gpm::log_status::ok || bytes > sizeof entry) break;
    if (log.read(p, entry, bytes) != gpm::log_status::ok) break;
    if (log.remove(p, bytes) != gpm::log_status::ok) break;
  }
}

// Each thread updates its own words of the array under the undo transaction.
__global__ void undo_update(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t off,
                            std::uint64_t value) {
  std::uint64_t* a = pool.ptr<std::uint64_t>(off);
  for (std::uint64_t i : gpm::grid_stride(256)) (void)tx.update(&a[i], value + i);
}

// ---- the harness -------------------------------------------------------------------------------

// A pool image with one module's content, damaged and reopened trial after trial.
class MediaFuzz : public ::testing::Test {
 protected:
  MediaFuzz()
      : dirs_("media-fuzz"),
        options_(gpm::test::quiet_options(dirs_.pm_dir(), dirs_.snapshot_dir())) {
    options_.restore_from_snapshot = false;
  }

  std::string path() const { return dirs_.pool_path("m.pool"); }
  gpm::pool create() { return gpm::pool::create("m.pool", 8 << 20, "media-fuzz", options_); }
  gpm::pool open() { return gpm::pool::open("m.pool", "media-fuzz", options_); }

  // Runs `fill` on a fresh pool, keeps the image, then for each trial damages one object of it
  // and runs `use` on the reopened pool, which may throw gpm::error only.
  void fuzz(const std::function<void(gpm::pool&)>& fill,
            const std::function<void(gpm::pool&)>& use) {
    std::vector<gpm::pool_object> objects;
    {
      gpm::pool p = create();
      fill(p);
      objects = p.objects();
    }
    ASSERT_FALSE(objects.empty());
    std::vector<char> image = read();
    use_once(use, "the undamaged image");  // the content itself must work
    std::mt19937_64 rng(0xf022);
    int refused = 0, worked = 0;
    for (int trial = 0; trial < iterations(); ++trial) {
      std::vector<char> damaged = image;
      const gpm::pool_object& o = objects[rng() % objects.size()];
      const std::uint64_t span = rng() % 2 == 0 ? std::min<std::uint64_t>(o.bytes, 4096) : o.bytes;
      const int flips = 1 + static_cast<int>(rng() % 8);
      std::string what = o.name + ":";
      for (int f = 0; f < flips; ++f) {
        const std::uint64_t at = o.offset + rng() % span;
        if (rng() % 4 == 0) {
          damaged[at] = static_cast<char>(rng());
        } else {
          damaged[at] = static_cast<char>(damaged[at] ^ (1 << (rng() % 8)));
        }
        what += " " + std::to_string(at - o.offset);
      }
      write(damaged);
      (use_once(use, "trial " + std::to_string(trial) + ", bytes of " + what) ? worked : refused)++;
    }
    std::printf("[ fuzz     ] %d trials: %d refused with gpm::error, %d opened and used\n",
                iterations(), refused, worked);
  }

 private:
  // True when `use` worked, false when it threw gpm::error; anything else fails the test.
  bool use_once(const std::function<void(gpm::pool&)>& use, const std::string& what) {
    try {
      gpm::pool p = open();
      use(p);
      return true;
    } catch (const gpm::error&) {
      return false;
    } catch (const std::exception& e) {
      ADD_FAILURE() << what << ": not a gpm::error: " << e.what();
      return false;
    }
  }

  std::vector<char> read() const {
    std::ifstream in(path(), std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), {});
  }
  void write(const std::vector<char>& bytes) const {
    std::ofstream out(path(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }

  gpm::test::scratch_dirs dirs_;
  gpm::pool_options options_;
};

TEST_F(MediaFuzz, TxHeap) {
  const gpm::tx_geometry g{.words = 256, .logs = 4, .log_bytes = 4096};
  gpm::tx_options o;
  o.mode = gpm::tx_mode::direct;
  o.max_threads = 256;
  fuzz(
      [&](gpm::pool& p) {
        auto heap = gpm::tx_heap::create(p, "heap", g, o);
        heap.launch(2, 64, run_body{});
        heap.sync();
        heap.launch(2, 64, run_body{});  // left in the logs for recovery: no sync
      },
      [&](gpm::pool& p) {
        auto heap = gpm::tx_heap::open(p, "heap", o);
        std::vector<std::uint32_t> w(heap.geometry().words);
        heap.load(0, w.data(), w.size());
        heap.launch(2, 64, run_body{});
        heap.sync();
      });
}

TEST_F(MediaFuzz, HclLog) {
  const gpm::hcl_geometry g{.blocks = 2, .threads_per_block = 32, .bytes_per_thread = 512};
  fuzz(
      [&](gpm::pool& p) {
        auto log = gpm::hcl_log::create(p, "log", g);
        gpm::launch(log_fill, log.grid(), log.block(), 0, nullptr, log.ref());
        gpm::check_cuda(cudaDeviceSynchronize(), "log_fill");
      },
      [&](gpm::pool& p) {
        auto log = gpm::hcl_log::open(p, "log");
        gpm::device_buffer<std::uint32_t> seen(std::size_t{g.blocks} * g.threads_per_block);
        gpm::launch(log_drain, log.grid(), log.block(), 0, nullptr, log.ref(), seen.data());
        gpm::check_cuda(cudaDeviceSynchronize(), "log_drain");
        for (std::uint32_t b = 0; b < g.blocks; ++b) {
          for (std::uint32_t t = 0; t < g.threads_per_block; ++t) (void)log.size(b, t);
        }
        log.check_faults();
      });
}

TEST_F(MediaFuzz, ConvLog) {
  fuzz(
      [&](gpm::pool& p) {
        auto log = gpm::conv_log::create(p, "meta", 4, 4096);
        gpm::launch(conv_fill, 2, 32, 0, nullptr, log.ref());
        gpm::check_cuda(cudaDeviceSynchronize(), "conv_fill");
      },
      [&](gpm::pool& p) {
        auto log = gpm::conv_log::open(p, "meta");
        gpm::launch(conv_drain, 1, 32, 0, nullptr, log.ref());
        gpm::check_cuda(cudaDeviceSynchronize(), "conv_drain");
        log.check_faults();
      });
}

TEST_F(MediaFuzz, UndoTx) {  // its batch record and its HCL log; a batch left active to undo
  const gpm::hcl_geometry g{.blocks = 2, .threads_per_block = 32, .bytes_per_thread = 512};
  fuzz(
      [&](gpm::pool& p) {
        auto tx = gpm::undo_tx::create(p, "tx", g);
        const std::uint64_t off = p.allocate("array", 256 * 8);
        tx.begin();
        gpm::launch(undo_update, tx.grid(), tx.block(), 0, nullptr, tx.ref(), p.ref(), off, 1);
        tx.commit();
        tx.begin();
        gpm::launch(undo_update, tx.grid(), tx.block(), 0, nullptr, tx.ref(), p.ref(), off, 1000);
        gpm::check_cuda(cudaDeviceSynchronize(), "undo_update");
      },
      [&](gpm::pool& p) {
        auto tx = gpm::undo_tx::open(p, "tx");
        tx.recover();
        tx.begin();
        gpm::launch(undo_update, tx.grid(), tx.block(), 0, nullptr, tx.ref(), p.ref(),
                    p.get("array").offset, 7);
        tx.commit();
      });
}

TEST_F(MediaFuzz, Gphash) {
  std::vector<std::uint64_t> keys(200);
  for (std::size_t i = 0; i < keys.size(); ++i) keys[i] = 1000 + 7 * i;
  const gpm::gphash_config c{.value_bytes = 16, .top_level = 5};
  fuzz(
      [&](gpm::pool& p) {
        auto t = gpm::gphash<std::uint64_t>::create(p, "kv", c);
        const auto k = to_device(keys);
        const auto v = to_device(std::vector<std::uint64_t>(2 * keys.size(), 42));
        t.insert(k.data(), v.data(), keys.size(), nullptr);
      },
      [&](gpm::pool& p) {
        auto t = gpm::gphash<std::uint64_t>::open(p, "kv");
        const auto k = to_device(keys);
        gpm::device_buffer<std::uint64_t> out(2 * keys.size());
        gpm::device_buffer<gpm::hash_status> status(keys.size());
        t.find(k.data(), keys.size(), out.data(), status.data());
        (void)to_host(status);
      });
}

TEST_F(MediaFuzz, Checkpoint) {
  gpm::checkpoint_options o;
  o.notice = [](const std::string&) {};  // chunks restored from their older copy: expected here
  const auto a = to_device(std::vector<float>(3000, 1.5f));
  const auto b = to_device(std::vector<std::uint64_t>(500, 9));
  fuzz(
      [&](gpm::pool& p) {
        auto ck = gpm::checkpointer::create(p, "ck", o);
        ck.add("a", a.data(), 3000);
        ck.add("b", b.data(), 500);
        ck.checkpoint();
        ck.checkpoint();
      },
      [&](gpm::pool& p) {
        auto ck = gpm::checkpointer::open(p, "ck", o);
        gpm::device_buffer<float> a2(3000);
        gpm::device_buffer<std::uint64_t> b2(500);
        ck.add("a", a2.data(), 3000);
        ck.add("b", b2.data(), 500);
        ck.restore();
      });
}

}  // namespace
