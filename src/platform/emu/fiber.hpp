// Host SIMT emulator: user-space context switching. A "carrier" is a stack plus saved registers
// on which GPU threads run; switching between carriers costs a few nanoseconds on x86-64 (a
// hand-written switch that saves only callee-saved state), with a portable ucontext fallback.
// Nothing here knows about GPUs; block.cpp decides what runs when.
#pragma once

#include <cstddef>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace gpm::emu::detail {

struct machine_context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc{};
#endif
};

// Saves the running context into `from` and resumes `to`.
void switch_context(machine_context& from, machine_context& to);

// A stack with a guard page below it, from which `prepare` builds a context that starts by
// calling entry(arg). entry must never return; it leaves by switching away.
class fiber_stack {
 public:
  explicit fiber_stack(std::size_t bytes);
  ~fiber_stack();
  fiber_stack(const fiber_stack&) = delete;
  fiber_stack& operator=(const fiber_stack&) = delete;

  void prepare(machine_context& ctx, void (*entry)(void*), void* arg);

 private:
  void* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  std::size_t usable_bytes_ = 0;
};

}  // namespace gpm::emu::detail
