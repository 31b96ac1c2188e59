// Host SIMT emulator: one thread block at a time on one OS thread (see block.hpp).
#include "block.hpp"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <thread>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/runtime.hpp>

namespace gpm::emu::detail {

thread_local thread_context* current_thread = nullptr;

namespace {

using gpm::detail::format_dims;
using gpm::detail::format_site;

thread_local block_runner* tls_runner = nullptr;

constexpr unsigned kDefaultYieldCountdown = 64;

const char* op_name(warp_op op) {
  switch (op) {
    case warp_op::sync: return "__syncwarp";
    case warp_op::ballot: return "__ballot_sync";
    case warp_op::any: return "__any_sync";
    case warp_op::all: return "__all_sync";
    case warp_op::shfl_idx: return "__shfl_sync";
    case warp_op::shfl_up: return "__shfl_up_sync";
    case warp_op::shfl_down: return "__shfl_down_sync";
    case warp_op::shfl_xor: return "__shfl_xor_sync";
    case warp_op::match_any: return "__match_any_sync";
    case warp_op::match_all: return "__match_all_sync";
    case warp_op::reduce_add: return "__reduce_add_sync";
    case warp_op::reduce_min_unsigned:
    case warp_op::reduce_min_signed: return "__reduce_min_sync";
    case warp_op::reduce_max_unsigned:
    case warp_op::reduce_max_signed: return "__reduce_max_sync";
    case warp_op::reduce_and: return "__reduce_and_sync";
    case warp_op::reduce_or: return "__reduce_or_sync";
    case warp_op::reduce_xor: return "__reduce_xor_sync";
  }
  return "warp collective";
}

const char* barrier_name(barrier_op op) {
  switch (op) {
    case barrier_op::sync: return "__syncthreads";
    case barrier_op::count: return "__syncthreads_count";
    case barrier_op::all: return "__syncthreads_and";
    case barrier_op::any: return "__syncthreads_or";
  }
  return "__syncthreads";
}

bool is_shuffle(warp_op op) {
  return op == warp_op::shfl_idx || op == warp_op::shfl_up || op == warp_op::shfl_down ||
         op == warp_op::shfl_xor;
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// "0-3,7,9-10" for the set bits of a lane mask.
std::string lane_list(unsigned m) {
  std::string out;
  for (int i = 0; i < 32;) {
    if (!(m >> i & 1u)) {
      ++i;
      continue;
    }
    int j = i;
    while (j + 1 < 32 && (m >> (j + 1) & 1u)) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(i);
    if (j > i) out += "-" + std::to_string(j);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

block_runner& runner() {
  block_runner* r = block_runner::current();
  if (r == nullptr) {
    std::fputs("gpmkit host emulator: a device intrinsic was called outside a kernel\n", stderr);
    std::abort();
  }
  return *r;
}

}  // namespace

// ---- entry points from kernel code ------------------------------------------------------------

warp_result warp_collective(warp_op op, unsigned mask, std::uint64_t value, int arg, int width,
                            const std::source_location& where) {
  return runner().collective(op, mask, value, arg, width, where);
}
unsigned active_mask(const std::source_location& where) { return runner().active_mask(where); }
int block_barrier(barrier_op op, int predicate, const std::source_location& where) {
  return runner().barrier(op, predicate, where);
}
void yield_now() {
  if (current_thread != nullptr) runner().yield();
}
void fault(const char* what, const std::source_location& where) { runner().fault(what, &where); }

// ---- runner ---------------------------------------------------------------------------------

block_runner* block_runner::current() { return tls_runner; }

block_runner::block_runner(std::size_t stack_bytes) : stack_bytes_(stack_bytes) {
  threads_.resize(1024);
}

block_runner::~block_runner() = default;

bool block_runner::run(const block_job& job, uint3 block_idx, std::string& fault_report) {
  job_ = &job;
  if (job.shared_bytes > shared_capacity_) {
    shared_.reset(new unsigned char[job.shared_bytes]);
    shared_capacity_ = job.shared_bytes;
  }
  block_ctx_ = block_context{block_idx, job.block, job.grid, shared_.get(), job.shared_bytes};
  thread_count_ = job.block.x * job.block.y * job.block.z;
  const unsigned warp_count = (thread_count_ + 31) / 32;
  for (unsigned i = 0; i < thread_count_; ++i) {
    gpu_thread& t = threads_[i];
    t = gpu_thread{};
    t.ctx.thread_idx =
        uint3{i % job.block.x, (i / job.block.x) % job.block.y, i / (job.block.x * job.block.y)};
    t.ctx.linear = i;
    t.ctx.lane = i % 32;
    t.ctx.warp = i / 32;
    t.ctx.block = &block_ctx_;
  }
  warps_.assign(warp_count, warp_state{});
  for (unsigned w = 0; w < warp_count; ++w) {
    const unsigned lanes = std::min(32u, thread_count_ - w * 32);
    warps_[w].live = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
  }
  ready_.clear();
  next_unstarted_ = 0;
  live_ = thread_count_;
  barrier_ = {};
  faulted_ = false;
  fault_.clear();
  seeded_ = job.seed != 0;
  rng_ = splitmix64(job.seed ^ splitmix64(job.launch_id) ^
                    splitmix64((static_cast<std::uint64_t>(block_idx.z) << 42) ^
                               (static_cast<std::uint64_t>(block_idx.y) << 21) ^ block_idx.x));
  for (unsigned i = 0; i < thread_count_; ++i) reset_countdown(threads_[i]);

  tls_runner = this;
  start_or_resume(main_, pick_next(false));
  after_resume();
  current_thread = nullptr;
  tls_runner = nullptr;

  // A faulted block leaves threads suspended on their carriers: abandon them (no unwinding, as
  // a GPU abandons the threads of a faulted kernel).
  for (auto& c : carriers_) {
    if (c->thread != nullptr) {
      c->thread = nullptr;
      free_carriers_.push_back(c.get());
    }
  }
  if (faulted_) {
    fault_report = fault_;
    return false;
  }
  return true;
}

void block_runner::carrier_entry(void* c) {
  auto* car = static_cast<carrier*>(c);
  car->runner->run_threads_of(car);
}

void block_runner::run_threads_of(carrier* c) {
  after_resume();
  for (;;) {
    gpu_thread* t = c->thread;
    std::string escaped;
    try {
      job_->invoke(job_->args);
    } catch (const std::exception& e) {
      escaped = std::string("uncaught exception in kernel code: ") + e.what();
    } catch (...) {
      escaped = "uncaught exception of unknown type in kernel code";
    }
    if (!escaped.empty()) fault(escaped, nullptr);
    thread_exit(t);
    t->car = nullptr;
    gpu_thread* next = pick_next(false);
    if (next == nullptr) {
      if (live_ != 0) {
        faulted_ = true;
        fault_ = deadlock_report();
      }
      c->thread = nullptr;
      leave_to_main(c);
    }
    if (next->st == state::unstarted) {
      // The finished thread's carrier runs the next one without a context switch, so kernels
      // that never wait cost one function call per GPU thread.
      c->thread = next;
      next->car = c;
      next->st = state::running;
      current_thread = &next->ctx;
      continue;
    }
    c->thread = nullptr;
    pending_release_ = c;
    next->st = state::running;
    current_thread = &next->ctx;
    switch_context(c->regs, next->car->regs);
    __builtin_unreachable();  // a released carrier is never resumed
  }
}

block_runner::carrier* block_runner::acquire_carrier() {
  if (!free_carriers_.empty()) {
    carrier* c = free_carriers_.back();
    free_carriers_.pop_back();
    return c;
  }
  auto c = std::make_unique<carrier>();
  c->stack = std::make_unique<fiber_stack>(stack_bytes_);
  c->runner = this;
  carriers_.push_back(std::move(c));
  return carriers_.back().get();
}

void block_runner::start_or_resume(machine_context& from, gpu_thread* next) {
  if (next->car == nullptr) {
    carrier* c = acquire_carrier();
    c->thread = next;
    next->car = c;
    c->stack->prepare(c->regs, &carrier_entry, c);
  }
  next->st = state::running;
  current_thread = &next->ctx;
  switch_context(from, next->car->regs);
}

void block_runner::after_resume() {
  if (pending_release_ != nullptr) {
    free_carriers_.push_back(pending_release_);
    pending_release_ = nullptr;
  }
}

void block_runner::leave_to_main(carrier* release) {
  pending_release_ = release;
  current_thread = nullptr;
  machine_context abandoned;
  switch_context(abandoned, main_);
  __builtin_unreachable();
}

block_runner::gpu_thread* block_runner::pick_next(bool prefer_unstarted) {
  const bool unstarted_left = next_unstarted_ < thread_count_;
  if (seeded_) {
    const std::size_t n = ready_.size() + (unstarted_left ? 1 : 0);
    if (n == 0) return nullptr;
    const std::size_t r = next_random() % n;
    if (r < ready_.size()) {
      gpu_thread* t = ready_[r];
      ready_.erase(ready_.begin() + static_cast<std::ptrdiff_t>(r));
      return t;
    }
    return &threads_[next_unstarted_++];
  }
  if (prefer_unstarted && unstarted_left) return &threads_[next_unstarted_++];
  if (!ready_.empty()) {
    gpu_thread* t = ready_.front();
    ready_.pop_front();
    return t;
  }
  if (unstarted_left) return &threads_[next_unstarted_++];
  return nullptr;
}

void block_runner::suspend(gpu_thread* self) {
  gpu_thread* next = pick_next(self->st == state::yielded);
  if (next == self) {
    // Nothing else in this block can run: let other OS threads (other blocks) progress.
    if (ready_.empty() && next_unstarted_ >= thread_count_) std::this_thread::yield();
    self->st = state::running;
    return;
  }
  if (next == nullptr) {
    faulted_ = true;
    fault_ = deadlock_report();
    leave_to_main(nullptr);
  }
  start_or_resume(self->car->regs, next);
  after_resume();
}

void block_runner::make_ready(gpu_thread* t) {
  t->st = state::ready;
  t->wait = wait_kind::none;
  ready_.push_back(t);
}

std::uint64_t block_runner::next_random() {
  rng_ += 0x9e3779b97f4a7c15ull;
  return splitmix64(rng_);
}

void block_runner::reset_countdown(gpu_thread& t) {
  t.ctx.yield_countdown =
      !seeded_ ? kDefaultYieldCountdown
               : 1 + static_cast<std::uint32_t>(next_random() % (2 * job_->yield_every));
}

void block_runner::thread_exit(gpu_thread* t) {
  t->st = state::done;
  --live_;
  const unsigned w = t->ctx.warp;
  warps_[w].live &= ~(1u << t->ctx.lane);
  // Exited threads no longer hold up a barrier or a collective (CUDA: "non-exited threads").
  if (barrier_.open && barrier_.arrived == live_) complete_barrier();
  check_warp_groups(w);
  check_active_mask(w);
}

// ---- __syncthreads --------------------------------------------------------------------------

int block_runner::barrier(barrier_op op, int predicate, const std::source_location& where) {
  gpu_thread* self = &threads_[current_thread->linear];
  if (!barrier_.open) {
    barrier_.open = true;
    barrier_.op = op;
    barrier_.where = where;
    barrier_.arrived = 0;
    barrier_.accumulator = op == barrier_op::all ? 1 : 0;
  } else if (barrier_.op != op || !same_site(barrier_.where, where)) {
    std::string others;
    for (unsigned i = 0; i < thread_count_; ++i) {
      if (threads_[i].wait == wait_kind::barrier) {
        others = thread_name(threads_[i]);
        break;
      }
    }
    fault(std::string("divergent barrier: ") + thread_name(*self) + " reached " + barrier_name(op) +
              " at " + format_site(where) + " while " + others + " waits in " +
              barrier_name(barrier_.op) + " at " + format_site(barrier_.where) +
              " (every thread of a block must reach the same __syncthreads)",
          nullptr);
  }
  ++barrier_.arrived;
  switch (op) {
    case barrier_op::sync: break;
    case barrier_op::count: barrier_.accumulator += predicate != 0; break;
    case barrier_op::all: barrier_.accumulator &= predicate != 0; break;
    case barrier_op::any: barrier_.accumulator |= predicate != 0; break;
  }
  self->where = where;
  if (barrier_.arrived == live_) {
    complete_barrier();
    return self->barrier_result;
  }
  self->st = state::blocked;
  self->wait = wait_kind::barrier;
  check_active_mask(self->ctx.warp);
  suspend(self);
  return self->barrier_result;
}

void block_runner::complete_barrier() {
  const int result = barrier_.accumulator;
  barrier_.open = false;
  for (unsigned i = 0; i < thread_count_; ++i) {
    gpu_thread& t = threads_[i];
    if (t.wait == wait_kind::barrier) {
      t.barrier_result = result;
      make_ready(&t);
    } else if (t.st == state::running) {
      t.barrier_result = result;
    }
  }
}

// ---- warp collectives -----------------------------------------------------------------------

warp_result block_runner::collective(warp_op op, unsigned mask, std::uint64_t value, int arg,
                                     int width, const std::source_location& where) {
  gpu_thread* self = &threads_[current_thread->linear];
  const unsigned lane = self->ctx.lane;
  const unsigned w = self->ctx.warp;
  const unsigned bit = 1u << lane;
  if ((mask & bit) == 0) {
    fault(std::string(op_name(op)) + " called by lane " + std::to_string(lane) + " with mask " +
              hex(mask) + ", which does not name the calling lane",
          &where);
  }
  if (is_shuffle(op) && (width < 1 || width > 32 || (width & (width - 1)) != 0)) {
    fault(std::string(op_name(op)) + " width " + std::to_string(width) +
              " is not a power of two from 1 to 32",
          &where);
  }
  warp_state& ws = warps_[w];
  std::size_t gi = ws.groups.size();
  for (std::size_t i = 0; i < ws.groups.size(); ++i) {
    const warp_group& g = ws.groups[i];
    if (g.mask == mask) {
      gi = i;
      break;
    }
    if ((g.mask & mask) != 0) {
      const gpu_thread& other = threads_[w * 32 + static_cast<unsigned>(__builtin_ctz(g.arrived))];
      fault(std::string("lanes disagree on a warp collective's mask: lane ") +
                std::to_string(lane) + " calls " + op_name(op) + " with mask " + hex(mask) +
                " while lanes " + lane_list(g.arrived) + " wait in " + op_name(g.op) +
                " with mask " + hex(g.mask) + " at " + format_site(other.where),
            &where);
    }
  }
  if (gi < ws.groups.size() && ws.groups[gi].op != op) {
    const warp_group& g = ws.groups[gi];
    const gpu_thread& other = threads_[w * 32 + static_cast<unsigned>(__builtin_ctz(g.arrived))];
    fault(std::string("lanes disagree on a warp collective: lane ") + std::to_string(lane) +
              " calls " + op_name(op) + " while lanes " + lane_list(g.arrived) + " wait in " +
              op_name(g.op) + " at " + format_site(other.where) + " with the same mask " +
              hex(mask),
          &where);
  }
  self->op = op;
  self->mask = mask;
  self->value = value;
  self->arg = arg;
  self->width = width;
  self->where = where;
  if (gi == ws.groups.size()) ws.groups.push_back(warp_group{op, mask, 0});
  ws.groups[gi].arrived |= bit;
  if ((mask & ws.live & ~ws.groups[gi].arrived) == 0) {
    complete_group(ws, w, gi, self);
    return self->result;
  }
  self->st = state::blocked;
  self->wait = wait_kind::collective;
  check_active_mask(w);
  suspend(self);
  return self->result;
}

void block_runner::complete_group(warp_state& ws, unsigned warp, std::size_t group_index,
                                  gpu_thread* caller) {
  const warp_group g = ws.groups[group_index];
  ws.groups.erase(ws.groups.begin() + static_cast<std::ptrdiff_t>(group_index));
  const unsigned p = g.arrived;
  gpu_thread* lanes = &threads_[warp * 32];
  auto each = [p](auto&& f) {
    for (unsigned m = p; m != 0; m &= m - 1) f(static_cast<unsigned>(__builtin_ctz(m)));
  };

  unsigned ballot = 0;
  each([&](unsigned l) { ballot |= (lanes[l].value != 0 ? 1u : 0u) << l; });
  std::uint32_t sum = 0, and_all = 0xffffffffu, or_all = 0, xor_all = 0;
  std::uint32_t umin = 0xffffffffu, umax = 0;
  std::int32_t smin = INT32_MAX, smax = INT32_MIN;
  bool all_equal = true;
  const std::uint64_t first = lanes[__builtin_ctz(p)].value;
  each([&](unsigned l) {
    const auto v = static_cast<std::uint32_t>(lanes[l].value);
    sum += v;
    and_all &= v;
    or_all |= v;
    xor_all ^= v;
    umin = std::min(umin, v);
    umax = std::max(umax, v);
    smin = std::min(smin, static_cast<std::int32_t>(v));
    smax = std::max(smax, static_cast<std::int32_t>(v));
    all_equal = all_equal && lanes[l].value == first;
  });

  each([&](unsigned l) {
    gpu_thread& t = lanes[l];
    warp_result r{0, false};
    switch (g.op) {
      case warp_op::sync: break;
      case warp_op::ballot: r.value = ballot; break;
      case warp_op::any: r.predicate = ballot != 0; break;
      case warp_op::all: r.predicate = ballot == p; break;
      case warp_op::shfl_idx:
      case warp_op::shfl_up:
      case warp_op::shfl_down:
      case warp_op::shfl_xor: {
        const int width = t.width;
        const int segment = static_cast<int>(l) & ~(width - 1);
        int src = static_cast<int>(l);
        if (g.op == warp_op::shfl_idx) {
          src = segment + (t.arg & (width - 1));
        } else if (g.op == warp_op::shfl_up) {
          if (static_cast<int>(l) - t.arg >= segment) src = static_cast<int>(l) - t.arg;
        } else if (g.op == warp_op::shfl_down) {
          if (static_cast<int>(l) + t.arg < segment + width) src = static_cast<int>(l) + t.arg;
        } else {
          const int x = static_cast<int>(l) ^ t.arg;
          if (x >= 0 && x < segment + width && x < 32) src = x;
        }
        // A source lane that did not take part gives an undefined value in CUDA; here the
        // caller's own value.
        r.value = (p >> src & 1u) ? lanes[src].value : t.value;
        break;
      }
      case warp_op::match_any: {
        unsigned m = 0;
        each([&](unsigned o) { m |= (lanes[o].value == t.value ? 1u : 0u) << o; });
        r.value = m;
        break;
      }
      case warp_op::match_all:
        r.value = all_equal ? p : 0;
        r.predicate = all_equal;
        break;
      case warp_op::reduce_add: r.value = sum; break;
      case warp_op::reduce_min_unsigned: r.value = umin; break;
      case warp_op::reduce_max_unsigned: r.value = umax; break;
      case warp_op::reduce_min_signed: r.value = static_cast<std::uint32_t>(smin); break;
      case warp_op::reduce_max_signed: r.value = static_cast<std::uint32_t>(smax); break;
      case warp_op::reduce_and: r.value = and_all; break;
      case warp_op::reduce_or: r.value = or_all; break;
      case warp_op::reduce_xor: r.value = xor_all; break;
    }
    t.result = r;
    if (&t != caller) make_ready(&t);
  });
}

void block_runner::check_warp_groups(unsigned warp) {
  warp_state& ws = warps_[warp];
  for (std::size_t i = 0; i < ws.groups.size();) {
    const warp_group& g = ws.groups[i];
    if ((g.mask & ws.live & ~g.arrived) == 0) {
      complete_group(ws, warp, i, nullptr);  // erases group i
    } else {
      ++i;
    }
  }
}

// ---- __activemask ---------------------------------------------------------------------------

unsigned block_runner::active_mask(const std::source_location& where) {
  gpu_thread* self = &threads_[current_thread->linear];
  self->st = state::blocked;
  self->wait = wait_kind::active_mask;
  self->where = where;
  ++warps_[self->ctx.warp].active_mask_waiters;
  check_active_mask(self->ctx.warp);
  if (self->st == state::ready) {
    // Completed by our own arrival: we are still the running thread.
    ready_.erase(std::find(ready_.begin(), ready_.end(), self));
    self->st = state::running;
  } else {
    suspend(self);
  }
  return static_cast<unsigned>(self->result.value);
}

// The lanes waiting in __activemask learn who is "active with them" once every other live lane
// of the warp is known to be elsewhere (waiting in another primitive, spinning, or exited):
// lanes at the same call site form one mask.
void block_runner::complete_active_masks(warp_state& ws, unsigned warp) {
  gpu_thread* lanes = &threads_[warp * 32];
  unsigned waiting = 0;
  for (unsigned m = ws.live; m != 0; m &= m - 1) {
    const unsigned l = static_cast<unsigned>(__builtin_ctz(m));
    const state s = lanes[l].st;
    if (s != state::blocked && s != state::yielded) return;  // that lane may still arrive
    if (lanes[l].wait == wait_kind::active_mask) waiting |= 1u << l;
  }
  for (unsigned m = waiting; m != 0; m &= m - 1) {
    gpu_thread& t = lanes[__builtin_ctz(m)];
    unsigned same = 0;
    for (unsigned o = waiting; o != 0; o &= o - 1) {
      const unsigned l = static_cast<unsigned>(__builtin_ctz(o));
      if (same_site(lanes[l].where, t.where)) same |= 1u << l;
    }
    t.result.value = same;
  }
  for (unsigned m = waiting; m != 0; m &= m - 1) make_ready(&lanes[__builtin_ctz(m)]);
  ws.active_mask_waiters = 0;
}

// ---- yields and faults ----------------------------------------------------------------------

void block_runner::yield() {
  gpu_thread* self = &threads_[current_thread->linear];
  reset_countdown(*self);
  self->st = state::yielded;
  ready_.push_back(self);
  check_active_mask(self->ctx.warp);
  suspend(self);
}

void block_runner::fault(const std::string& what, const std::source_location* where) {
  std::string msg = "kernel `" + kernel_name(job_->kernel) + "` block " +
                    format_dims(block_ctx_.block_idx) + ": " + what;
  if (current_thread != nullptr) msg += "\n  in " + thread_name(threads_[current_thread->linear]);
  if (where != nullptr) msg += " at " + format_site(*where);
  faulted_ = true;
  fault_ = msg;
  leave_to_main(nullptr);
}

std::string block_runner::thread_name(const gpu_thread& t) const {
  return "thread " + format_dims(t.ctx.thread_idx) + " (warp " + std::to_string(t.ctx.warp) +
         " lane " + std::to_string(t.ctx.lane) + ")";
}

std::string block_runner::describe_wait(const gpu_thread& t) const {
  switch (t.wait) {
    case wait_kind::barrier:
      return std::string("wait in ") + barrier_name(barrier_.op) + " at " + format_site(t.where);
    case wait_kind::active_mask: return "wait in __activemask at " + format_site(t.where);
    case wait_kind::collective: {
      const warp_state& ws = warps_[t.ctx.warp];
      unsigned missing = 0;
      for (const warp_group& g : ws.groups) {
        if (g.arrived >> t.ctx.lane & 1u) missing = g.mask & ws.live & ~g.arrived;
      }
      return std::string("wait in ") + op_name(t.op) + "(mask " + hex(t.mask) + ") at " +
             format_site(t.where) + " for lanes " + lane_list(missing) + " of warp " +
             std::to_string(t.ctx.warp);
    }
    case wait_kind::none: break;
  }
  return t.st == state::done ? "exited" : "runnable";
}

std::string block_runner::deadlock_report() const {
  std::ostringstream out;
  out << "kernel `" << kernel_name(job_->kernel) << "` block " << format_dims(block_ctx_.block_idx)
      << ": deadlock: no thread of the block can proceed";
  unsigned i = 0;
  while (i < thread_count_) {
    const std::string what = describe_wait(threads_[i]);
    unsigned j = i;
    while (j + 1 < thread_count_ && describe_wait(threads_[j + 1]) == what) ++j;
    out << "\n  thread" << (j > i ? "s " : " ") << format_dims(threads_[i].ctx.thread_idx);
    if (j > i) out << "-" << format_dims(threads_[j].ctx.thread_idx);
    out << ": " << what;
    i = j + 1;
  }
  return out.str();
}

}  // namespace gpm::emu::detail
