// gpmkit's main demo: a GPU kernel keeps its results in a persistent pool, is killed mid-run
// with SIGKILL, and the results it had made durable are all there when the pool is reopened;
// then the pool is snapshotted to disk, its tmpfs file deleted (as a reboot would), and the
// pool restored from the snapshot. Runs on the GPU (cuda build) or the host emulator.
//
//   pool_demo [--pm-dir DIR] [--snapshot-dir DIR]
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/publish.cuh>
#include <gpm/pool/pool.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

constexpr char kLayout[] = "pool-demo";
#if GPM_BACKEND_CUDA
constexpr std::uint32_t kBatchWords = 1u << 22;
#else
constexpr std::uint32_t kBatchWords = 1u << 15;
#endif
constexpr std::uint32_t kBatches = 1u << 20;  // more than run before the kill
constexpr int kReadyFd = 3;                   // the writer reports "ready" here

__host__ __device__ std::uint32_t result_of(std::uint32_t batch, std::uint32_t i) {
  std::uint32_t x = batch * 2654435761u ^ i;
  x ^= x >> 16;
  x *= 0x7feb352du;
  return x ^ (x >> 15);
}

// Computes batch `batch` into the pool and persists it; the block that finishes last then
// publishes batch + 1 as the number of durable batches (GPM's native persistence: persist the
// data, then the progress marker that makes it count).
__global__ void compute_batch(gpm::pool_ref pool, std::uint64_t results_off, std::uint64_t done_off,
                              unsigned* finished_blocks, std::uint32_t batch) {
  std::uint32_t* out =
      pool.ptr<std::uint32_t>(results_off) + static_cast<std::uint64_t>(batch % 64) * kBatchWords;
  for (std::uint64_t i : gpm::grid_stride(kBatchWords)) {
    out[i] = result_of(batch, i);
  }
  gpm::persist();
  gpm::publish_when_grid_done(finished_blocks, pool.ptr<std::uint64_t>(done_off), batch + 1);
}

gpm::pool_options demo_options(int argc, char** argv) {
  gpm::pool_options o;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--pm-dir") == 0) o.pm_dir = argv[i + 1];
    if (std::strcmp(argv[i], "--snapshot-dir") == 0) o.snapshot_dir = argv[i + 1];
  }
  o.notice = [](const std::string& n) { std::printf("  notice: %s\n", n.c_str()); };
  return o;
}

// The writer: computes batches until it is killed.
int run_writer(const gpm::pool_options& o) {
  gpm::pool p = gpm::pool::open("demo.pool", kLayout, o);
  const std::uint64_t results = p.get("results").offset;
  const std::uint64_t done = p.get("done").offset;
  gpm::device_buffer<unsigned> finished(1);
  finished.fill_bytes(0);
  for (std::uint32_t b = 0; b < kBatches; ++b) {
    gpm::launch(compute_batch, 128, 256, 0, nullptr, p.ref(), results, done, finished.data(), b);
    if (b % 64 == 63) {
      gpm::check_cuda(cudaDeviceSynchronize(), "batch");
      if (b == 63 && write(kReadyFd, "ready\n", 6) != 6) return 1;
    }
  }
  gpm::check_cuda(cudaDeviceSynchronize(), "batches");
  return 0;
}

// Checks every durable batch still held in the pool (the last 64 of them); returns the count.
std::uint64_t verify(const gpm::pool& p) {
  const std::uint64_t done = *p.host_ptr<std::uint64_t>(p.get("done").offset);
  const std::uint32_t* results = p.host_ptr<std::uint32_t>(p.get("results").offset);
  const std::uint64_t first = done > 64 ? done - 63 : 0;  // batch done-64 is being overwritten
  for (std::uint64_t b = first; b < done; ++b) {
    const std::uint32_t* slot = results + (b % 64) * kBatchWords;
    for (std::uint32_t i = 0; i < kBatchWords; ++i) {
      if (slot[i] != result_of(static_cast<std::uint32_t>(b), i)) {
        throw gpm::error(gpm::errc::corrupt, "durable batch " + std::to_string(b) +
                                                 " is damaged at word " + std::to_string(i));
      }
    }
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  const gpm::pool_options o = demo_options(argc, argv);
  try {
    if (argc > 1 && std::strcmp(argv[1], "--writer") == 0) return run_writer(o);

    const gpm::device_info dev = gpm::query_device();
    std::printf("gpmkit pool demo on %s (%s backend)\n", dev.present ? dev.name.c_str() : "no GPU",
                GPM_BACKEND_NAME);
    const std::string path = gpm::pool::resolve("demo.pool", o);
    try {
      gpm::pool::remove("demo.pool", o, true);  // pool and snapshot left by an earlier run
    } catch (const gpm::error& e) {
      if (e.code() != gpm::errc::not_found) throw;
    }

    std::printf("1. create %s: 64 result slots of %u KiB and a progress word\n", path.c_str(),
                kBatchWords * 4 / 1024);
    {
      gpm::pool p = gpm::pool::create("demo.pool", 64ull * kBatchWords * 4 + (1 << 20), kLayout, o);
      p.allocate("results", 64ull * kBatchWords * 4, 4096);
      p.allocate("done", 8);
      std::printf("   durability: %s; mapped into the GPU: %s\n",
                  std::string(gpm::to_string(p.durability())).c_str(),
                  p.mapped_into_gpu() ? "yes" : "no");
    }

    std::printf("2. run the writer in a child process and kill it with SIGKILL mid-kernel\n");
    std::fflush(stdout);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) throw gpm::error(gpm::errc::io, "pipe2 failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ready[1], kReadyFd);
    std::vector<std::string> args = {"/proc/self/exe", "--writer"};
    for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    pid_t child = -1;
    const int spawned =
        posix_spawn(&child, "/proc/self/exe", &actions, nullptr, cargs.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(ready[1]);
    if (spawned != 0) throw gpm::error(gpm::errc::io, "cannot start the writer process");
    // Once the writer says its first batches are durable, let it run a little, then kill it.
    char line[16] = {};
    if (read(ready[0], line, sizeof line) <= 0) {
      waitpid(child, nullptr, 0);
      throw gpm::error(gpm::errc::io, "the writer ended before it started computing");
    }
    close(ready[0]);
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    std::printf("   %s\n",
                WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                    ? "killed the writer with SIGKILL while its kernels ran"
                    : "the writer finished before the kill (the check below still runs)");

    std::printf("3. reopen the pool and check every batch the kernel made durable\n");
    {
      gpm::pool p = gpm::pool::open("demo.pool", kLayout, o);
      std::printf("   closed cleanly last time: %s\n",
                  p.was_clean_shutdown() ? "yes" : "no (crashed)");
      const std::uint64_t done = verify(p);
      std::printf("   %llu batches durable; the last %llu still in the pool verified intact\n",
                  static_cast<unsigned long long>(done),
                  static_cast<unsigned long long>(std::min<std::uint64_t>(done, 63)));

      std::printf("4. snapshot the pool to disk\n");
      const gpm::snapshot_result s = p.snapshot();
      std::printf(
          "   snapshot %llu: %llu of %llu pages, %.1f MiB written in %.3f s\n",
          static_cast<unsigned long long>(s.seq), static_cast<unsigned long long>(s.pages_changed),
          static_cast<unsigned long long>(s.pages_total), s.bytes_written / 1048576.0, s.seconds);
    }

    std::printf("5. delete the tmpfs file (what a reboot does) and open the pool again\n");
    std::filesystem::remove(path);
    {
      gpm::pool p = gpm::pool::open("demo.pool", kLayout, o);
      const std::uint64_t done = verify(p);
      std::printf("   restored: %llu durable batches, verified intact\n",
                  static_cast<unsigned long long>(done));
    }
    gpm::pool::remove("demo.pool", o, true);
    std::printf("done: the kernel's durable results survived a SIGKILL and a reboot\n");
    return 0;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "pool_demo: %s\n", e.what());
    return 1;
  }
}
