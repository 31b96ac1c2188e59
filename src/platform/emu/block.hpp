// Host SIMT emulator: runs one thread block. Every GPU thread of the block is a fiber on the
// calling OS thread; a thread runs until it must wait (barrier, warp collective, __activemask)
// or offers to yield (atomics, fences, __nanosleep), and the runner then resumes another. It
// implements __syncthreads and the warp collectives exactly as CUDA specifies them for
// independently scheduled threads, and reports a block that can never finish (a deadlock) or
// misuses a collective as a kernel fault with every thread's position, instead of hanging.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include <gpm/platform/detail/emu/thread_context.hpp>

#include "fiber.hpp"

namespace gpm::emu::detail {

// What a block needs to know about the kernel it runs.
struct block_job {
  const void* kernel;  // named (kernel_name) only when a fault is reported
  void (*invoke)(const void* args);
  const void* args;
  dim3 grid;
  dim3 block;
  std::size_t shared_bytes;
  std::uint64_t seed;       // 0: deterministic round-robin schedule
  std::uint64_t launch_id;  // makes a seeded schedule differ between launches
  unsigned yield_every;     // seeded mode: mean atomics between forced yields
};

// The name of a kernel function for reports (demangled symbol, or its address). Reads the
// executable's symbol table: call it on the fault path, never per launch.
std::string kernel_name(const void* kernel);

class block_runner {
 public:
  explicit block_runner(std::size_t stack_bytes);
  ~block_runner();
  block_runner(const block_runner&) = delete;
  block_runner& operator=(const block_runner&) = delete;

  // Runs every thread of block `block_idx`. Returns false and fills `fault_report` if the block
  // faulted (deadlock, collective misuse, __trap, uncaught exception).
  bool run(const block_job& job, uint3 block_idx, std::string& fault_report);

  // Entry points used by kernel code through thread_context.hpp (on the runner of this OS thread).
  warp_result collective(warp_op op, unsigned mask, std::uint64_t value, int arg, int width,
                         const std::source_location& where);
  unsigned active_mask(const std::source_location& where);
  int barrier(barrier_op op, int predicate, const std::source_location& where);
  void yield();
  [[noreturn]] void fault(const std::string& what, const std::source_location* where);

  static block_runner* current();

 private:
  enum class state : std::uint8_t { unstarted, ready, running, yielded, blocked, done };
  enum class wait_kind : std::uint8_t { none, barrier, collective, active_mask };

  struct carrier;
  struct gpu_thread {
    thread_context ctx;
    state st = state::unstarted;
    wait_kind wait = wait_kind::none;
    warp_op op = warp_op::sync;
    unsigned mask = 0;
    std::source_location where;
    std::uint64_t value = 0;  // this lane's contribution to a collective
    int arg = 0;
    int width = 32;
    warp_result result{};
    int barrier_result = 0;
    carrier* car = nullptr;
  };
  struct carrier {
    machine_context regs;
    std::unique_ptr<fiber_stack> stack;
    gpu_thread* thread = nullptr;
    block_runner* runner = nullptr;
  };
  struct warp_group {  // a collective some lanes of a warp are waiting in
    warp_op op;
    unsigned mask;
    unsigned arrived;
  };
  struct warp_state {
    unsigned live = 0;  // lanes that exist and have not exited
    std::vector<warp_group> groups;
    unsigned active_mask_waiters = 0;
  };

  static void carrier_entry(void* c);
  void run_threads_of(carrier* c);
  gpu_thread* pick_next(bool prefer_unstarted);
  void start_or_resume(machine_context& from, gpu_thread* next);
  void suspend(gpu_thread* self);
  void after_resume();
  void thread_exit(gpu_thread* t);
  void make_ready(gpu_thread* t);
  void complete_group(warp_state& w, unsigned warp, std::size_t group_index, gpu_thread* caller);
  void check_warp_groups(unsigned warp);
  void check_active_mask(unsigned warp) {
    if (warps_[warp].active_mask_waiters != 0) complete_active_masks(warps_[warp], warp);
  }
  void complete_active_masks(warp_state& ws, unsigned warp);
  void complete_barrier();
  carrier* acquire_carrier();
  [[noreturn]] void leave_to_main(carrier* c);
  std::string describe_wait(const gpu_thread& t) const;
  std::string deadlock_report() const;
  std::string thread_name(const gpu_thread& t) const;
  std::uint64_t next_random();
  void reset_countdown(gpu_thread& t);

  std::size_t stack_bytes_;
  std::vector<std::unique_ptr<carrier>> carriers_;
  std::vector<carrier*> free_carriers_;
  carrier* pending_release_ = nullptr;
  machine_context main_;

  // Per-block state, reset by run().
  const block_job* job_ = nullptr;
  block_context block_ctx_{};
  std::vector<gpu_thread> threads_;
  std::vector<warp_state> warps_;
  std::deque<gpu_thread*> ready_;
  unsigned thread_count_ = 0;
  unsigned next_unstarted_ = 0;
  unsigned live_ = 0;
  std::unique_ptr<unsigned char[]> shared_;
  std::size_t shared_capacity_ = 0;
  bool seeded_ = false;  // random schedule from rng_ instead of round-robin
  std::uint64_t rng_ = 0;

  struct {
    bool open = false;
    barrier_op op = barrier_op::sync;
    std::source_location where;
    unsigned arrived = 0;
    int accumulator = 0;
  } barrier_;

  bool faulted_ = false;
  std::string fault_;
};

}  // namespace gpm::emu::detail
