// Host SIMT emulator: context switch and guarded fiber stacks (see fiber.hpp).
#include "fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <gpm/platform/error.hpp>

#if defined(__x86_64__)
// gpm_emu_switch(void** save_sp, void* load_sp): pushes the callee-saved registers of the running
// context, stores its stack pointer, loads the other one and pops the same in reverse. MXCSR and
// the x87 control word are not switched: every GPU thread runs with the process's defaults
// (device code cannot change rounding modes), which keeps a switch to a few nanoseconds. A new
// context's stack is laid out by fiber_stack::prepare so that the final `ret` lands in
// gpm_emu_trampoline with the entry function in rbx and its argument in r12.
asm(R"(
  .text
  .globl gpm_emu_switch
  .type gpm_emu_switch, @function
  .p2align 4
gpm_emu_switch:
  .cfi_startproc
  endbr64
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .cfi_endproc
  .size gpm_emu_switch, .-gpm_emu_switch

  .globl gpm_emu_trampoline
  .type gpm_emu_trampoline, @function
  .p2align 4
gpm_emu_trampoline:
  .cfi_startproc
  .cfi_undefined rip
  endbr64
  movq %r12, %rdi
  callq *%rbx
  ud2
  .cfi_endproc
  .size gpm_emu_trampoline, .-gpm_emu_trampoline
  .section .note.GNU-stack,"",@progbits
  .text
)");

extern "C" void gpm_emu_switch(void** save_sp, void* load_sp);
extern "C" void gpm_emu_trampoline();
#endif

namespace gpm::emu::detail {

namespace {
std::size_t page_size() {
  static const std::size_t p = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return p;
}
}  // namespace

fiber_stack::fiber_stack(std::size_t bytes) {
  const std::size_t page = page_size();
  usable_bytes_ = (bytes + page - 1) / page * page;
  mapping_bytes_ = usable_bytes_ + page;
  mapping_ = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    throw_error(errc::out_of_memory, "host emulator: cannot map a " +
                                         std::to_string(mapping_bytes_) +
                                         "-byte GPU-thread stack (lower GPM_EMU_STACK_KIB?)");
  }
  // The lowest page is the guard: overflowing a GPU thread's stack faults there.
  mprotect(mapping_, page, PROT_NONE);
}

fiber_stack::~fiber_stack() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
}

void fiber_stack::prepare(machine_context& ctx, void (*entry)(void*), void* arg) {
  char* top = static_cast<char*>(mapping_) + mapping_bytes_;
#if defined(__x86_64__)
  auto* slot = reinterpret_cast<std::uint64_t*>(top) - 2;          // 16-byte aligned after `ret`
  *--slot = reinterpret_cast<std::uint64_t>(&gpm_emu_trampoline);  // return address
  *--slot = 0;                                                     // rbp
  *--slot = reinterpret_cast<std::uint64_t>(entry);                // rbx
  *--slot = reinterpret_cast<std::uint64_t>(arg);                  // r12
  *--slot = 0;                                                     // r13
  *--slot = 0;                                                     // r14
  *--slot = 0;                                                     // r15
  ctx.sp = slot;
#else
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = static_cast<char*>(mapping_) + page_size();
  ctx.uc.uc_stack.ss_size = usable_bytes_;
  ctx.uc.uc_link = nullptr;
  // makecontext passes int arguments; split the pointer in two halves.
  const auto bits = reinterpret_cast<std::uintptr_t>(arg);
  static thread_local void (*stored_entry)(void*) = nullptr;
  stored_entry = entry;
  makecontext(&ctx.uc, reinterpret_cast<void (*)()>(+[](unsigned hi, unsigned lo) {
    stored_entry(reinterpret_cast<void*>((static_cast<std::uintptr_t>(hi) << 32) | lo));
  }),
              2, static_cast<unsigned>(bits >> 32), static_cast<unsigned>(bits));
#endif
}

void switch_context(machine_context& from, machine_context& to) {
#if defined(__x86_64__)
  gpm_emu_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}

}  // namespace gpm::emu::detail
