// The host side shared by hcl_log and conv_log: building, writing and validating the header,
// the generation (truncation), per-stream tails, and turning the device fault record into a
// gpm::error. Nothing here knows how entries are laid out inside a stream.
//
// The log's persist sites (gpm::persist_at; docs/crash-checking.md), caught when removed by
// tests/log/log_crash_image_test.cu:
//   log.create.generation       a new log's first generation, before its header
//   log.create.header           a new log's header, last: until it is durable open() refuses it
//   log.append.entry            an entry's chunks and trailer, before its tail (stream.cuh)
//   log.append.tail             the tail that publishes an appended entry (stream.cuh)
//   log.remove.tail             the tail that drops the newest entry (stream.cuh)
//   log.clear_stream.tail       a kernel's truncation of its stream (stream.cuh)
//   log.clear_stream.host_tail  the host's truncation of one stream
//   log.clear.generation        the host's truncation of every stream: generation + 1
//   log.clear.wrapped_tail      a tail rewritten empty when the generation's tag wraps around
// clear_faults() persists nothing: the fault record is not recovery state (open() resets it), so a
// crash may lose it. conv_log's partition locks are not in the pool at all (conv_log.cuh).
#include <gpm/log/detail/log_object.cuh>

#include <atomic>
#include <cstring>
#include <optional>
#include <sstream>

#include <gpm/platform/checked_math.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm::detail::log {
namespace {

std::string object_label(const pool& p, std::string_view name) {
  return "log '" + std::string(name) + "' in pool " + p.path();
}

const char* kind_name(std::uint32_t k) {
  return k == static_cast<std::uint32_t>(kind::hcl)    ? "an hcl_log"
         : k == static_cast<std::uint32_t>(kind::conv) ? "a conv_log"
                                                       : "an unknown kind of log";
}

std::atomic_ref<std::uint64_t> word(std::uint64_t& w) { return std::atomic_ref<std::uint64_t>(w); }

}  // namespace

header make_header(kind k, std::uint32_t blocks, std::uint32_t threads_per_block,
                   std::uint64_t streams, std::uint64_t stream_chunks) {
  header h{};
  h.kind = static_cast<std::uint32_t>(k);
  h.streams = streams;
  h.stream_chunks = stream_chunks;
  h.control_offset = control_offset;
  // Sizes from the caller's (or the media's) geometry: one that overflows 64 bits is refused
  // like an empty one.
  bool fits = true;
  const auto take = [&fits](std::optional<std::uint64_t> v) {
    fits = fits && v.has_value();
    return v.value_or(0);
  };
  if (k == kind::hcl) {
    h.blocks = blocks;
    h.threads_per_block = threads_per_block;
    h.warps_per_block = (threads_per_block + warp_lanes - 1) / warp_lanes;
    h.control_stride = sizeof(std::uint64_t);
    // A warp's region holds stream_chunks rows of 128 bytes, one 4-byte column per lane.
    h.data_bytes = take(checked_mul(take(checked_mul(blocks, h.warps_per_block)),
                                    take(checked_mul(stream_chunks, line_bytes))));
  } else {
    h.control_stride = sizeof(partition_control);
    h.data_bytes = take(checked_round_up(
        take(checked_mul(streams, take(checked_mul(stream_chunks, chunk_bytes)))), line_bytes));
  }
  const std::uint64_t control_bytes =
      take(checked_round_up(take(checked_mul(streams, h.control_stride)), line_bytes));
  h.data_offset = take(checked_add(h.control_offset, control_bytes));
  h.common.object_bytes = take(checked_add(h.data_offset, h.data_bytes));
  if (!fits || streams == 0 || stream_chunks == 0 || stream_chunks > max_stream_chunks ||
      h.data_bytes == 0) {
    throw_error(errc::invalid_argument,
                "a log of " + std::to_string(streams) + " streams of " +
                    std::to_string(stream_chunks) + " chunks of " + std::to_string(chunk_bytes) +
                    " bytes is empty or too large to address; choose a smaller geometry");
  }
  return h;
}

log_object log_object::create(pool& p, std::string_view name, const header& h) {
  if (p.find(name)) {
    throw_error(errc::already_exists, "pool " + p.path() + " already holds an object named '" +
                                          std::string(name) +
                                          "'; open the log instead, or free the object first");
  }
  const std::uint64_t free_bytes = p.info().free_bytes;
  if (h.common.object_bytes > free_bytes) {
    throw_error(errc::out_of_memory, object_label(p, name) + " needs " +
                                         std::to_string(h.common.object_bytes) +
                                         " bytes but the pool has " + std::to_string(free_bytes) +
                                         " free; create a larger pool or a smaller log");
  }
  log_object o;
  o.pool_ = &p;
  o.name_ = std::string(name);
  o.offset_ = p.allocate(name, h.common.object_bytes, line_bytes);
  o.claim_ = p.claim(name, "a log");
  o.head_ = h;
  o.head_.common = format::make_header(kKind, h.common.object_bytes);
  format::seal_header(&o.head_);
  char* base = p.host_ptr<char>(o.offset_);
  // Generation first, header last: until the header is durable, open() rejects the object.
  auto* st = reinterpret_cast<state*>(base + state_offset);
  word(st->generation).store(1);
  persist_at("log.create.generation", st, sizeof(state));
  std::memcpy(base, &o.head_, sizeof o.head_);
  persist_at("log.create.header", base, sizeof o.head_);
  return o;
}

log_object log_object::open(pool& p, std::string_view name, kind k) {
  const std::string label = "log '" + std::string(name) + "' in pool " + p.path();
  const pool_object obj = p.open_object(name, kKind, label);
  char* base = p.host_ptr<char>(obj.offset);
  header h;
  std::memcpy(&h, base, sizeof h);
  if (h.kind != static_cast<std::uint32_t>(k)) {
    throw_error(errc::layout_mismatch, label + " is " + kind_name(h.kind) + ", not " +
                                           kind_name(static_cast<std::uint32_t>(k)));
  }
  // Every size must be the one the stored geometry implies.
  header expected{};
  try {
    expected = make_header(k, h.blocks, h.threads_per_block, h.streams, h.stream_chunks);
  } catch (const error&) {
    expected.kind = 0;  // impossible geometry: reported below
  }
  constexpr std::size_t own = offsetof(header, kind);
  if (std::memcmp(reinterpret_cast<const char*>(&expected) + own,
                  reinterpret_cast<const char*>(&h) + own, sizeof h - own) != 0 ||
      expected.common.object_bytes != h.common.object_bytes) {
    throw_error(errc::corrupt,
                label + " has inconsistent sizes (" + std::to_string(h.common.object_bytes) +
                    " bytes recorded, geometry of " + std::to_string(expected.common.object_bytes) +
                    "); it cannot be used");
  }
  log_object o;
  o.claim_ = p.claim(name, "a log");
  o.pool_ = &p;
  o.name_ = std::string(name);
  o.offset_ = obj.offset;
  o.head_ = h;
  if (o.generation() == 0) {
    throw_error(errc::corrupt, label + " has generation 0, which no log ever has; it is damaged");
  }
  // A crash between a tag wrap's generation store and its rewrite of the live tails
  // (next_generation) left tails tagged ahead of the generation: they read empty now but would
  // come back before the next wrap. Finish the rewrite. Like the resets below it is not
  // persisted: every open() finishes it again.
  const std::uint64_t tag = o.generation() & tail_tag_mask;
  for (std::uint64_t s = 0; s < h.streams; ++s) {
    std::uint64_t* t = o.host_tail(s);
    const std::uint64_t w = word(*t).load();
    if ((w >> tail_used_bits) > tag && (w & tail_used_mask) != 0) {
      word(*t).store(tail_word(o.generation(), 0));
    }
  }
  // A crash may have left faults recorded; they are not persistent state, so their reset is not
  // persisted: every open() resets them again.
  o.clear_faults();
  return o;
}

pool& log_object::owner() const { return *pool_; }

log_view log_object::host_view() const {
  log_view v;
  v.object = pool_->host_ptr<char>(offset_);
  v.streams = head_.streams;
  v.stream_chunks = head_.stream_chunks;
  v.control_offset = head_.control_offset;
  v.control_stride = head_.control_stride;
  v.data_base = v.object + head_.data_offset;
  v.data_bytes = head_.data_bytes;
  v.blocks = head_.blocks;
  v.threads_per_block = head_.threads_per_block;
  v.warps_per_block = head_.warps_per_block;
  return v;
}

log_view log_object::view() const {
  log_view v = host_view();
  v.object = pool_->ref().ptr<char>(offset_);
  v.data_base = v.object + head_.data_offset;
  return v;
}

std::uint64_t log_object::generation() const {
  auto* st = pool_->host_ptr<state>(offset_ + state_offset);
  return word(st->generation).load();
}

std::uint64_t* log_object::host_tail(std::uint64_t stream) const {
  return pool_->host_ptr<std::uint64_t>(offset_ + head_.control_offset +
                                        stream * head_.control_stride);
}

void log_object::next_generation() {
  const std::uint64_t g = generation();
  const std::uint64_t next = g + 1;
  const bool wraps = tag_wraps(next);
  // At a tag wrap, tails written 2^24 generations ago would match again. Dead tails are made
  // empty under the new tag before the bump (they read empty under g either way); live ones
  // right after it. See docs/logging.md, "Generations".
  const auto rewrite_tails = [&](bool only_dead) {
    for (std::uint64_t s = 0; s < head_.streams; ++s) {
      std::uint64_t* t = host_tail(s);
      if (only_dead && (word(*t).load() >> tail_used_bits) == (g & tail_tag_mask)) continue;
      word(*t).store(tail_word(next, 0));
      persist_at("log.clear.wrapped_tail", t, sizeof *t);
    }
  };
  if (wraps) rewrite_tails(true);
  auto* st = pool_->host_ptr<state>(offset_ + state_offset);
  word(st->generation).store(next);
  persist_at("log.clear.generation", &st->generation, sizeof st->generation);
  if (wraps) {
    // Live tails still carry the old tag here: a crash now leaves them to open(), which finishes
    // the rewrite.
    crash_point("log.clear.tag_wrapped");
    rewrite_tails(false);
  }
}

std::uint64_t log_object::used_chunks(std::uint64_t stream) const {
  return tail_used(word(*host_tail(stream)).load(), generation());
}

void log_object::clear_stream(std::uint64_t stream) {
  std::uint64_t* t = host_tail(stream);
  word(*t).store(tail_word(generation(), 0));
  persist_at("log.clear_stream.host_tail", t, sizeof *t);
}

bool log_object::is_empty() const {
  for (std::uint64_t s = 0; s < head_.streams; ++s) {
    if (used_chunks(s) != 0) return false;
  }
  return true;
}

fault_record log_object::faults() const {
  fault_record f;
  std::memcpy(&f, pool_->host_ptr<char>(offset_ + fault_offset), sizeof f);
  return f;
}

void log_object::clear_faults() {
  char* f = pool_->host_ptr<char>(offset_ + fault_offset);
  std::memset(f, 0, sizeof(fault_record));  // not persisted: open() resets the record
}

void log_object::check_faults(const std::string& what, const std::string& geometry_hint) const {
  const fault_record f = faults();
  if (f.mask == 0) return;
  std::ostringstream m;
  m << what << " '" << name_ << "': " << f.count << " device operation(s) failed (";
  const char* sep = "";
  for (int s = 0; s < log_status_count; ++s) {
    if (f.mask & (1u << s)) {
      m << sep << to_string(static_cast<log_status>(s));
      sep = ", ";
    }
  }
  m << ")";
  const auto first = static_cast<log_status>(f.status);
  errc code = errc::invalid_argument;
  if (f.ready) {
    m << "; the first: " << to_string(first);
    if (f.stream != ~std::uint64_t{0}) m << " in stream " << f.stream;
    m << " of a kernel launched with grid (" << f.grid[0] << "," << f.grid[1] << "," << f.grid[2]
      << ") and block (" << f.block[0] << "," << f.block[1] << "," << f.block[2] << ")";
  }
  switch (first) {
    case log_status::wrong_geometry: m << ". " << geometry_hint; break;
    case log_status::full:
      code = errc::out_of_memory;
      m << ". A thread or partition ran out of log space: create the log with more bytes per "
           "thread or partition, or log less per batch";
      break;
    case log_status::corrupt:
      code = errc::corrupt;
      m << ". A log entry failed its checksum: the log's memory was damaged";
      break;
    case log_status::size_mismatch:
      m << ". read/remove asked for another size than the newest entry has";
      break;
    case log_status::bad_partition:
      m << ". Partitions are numbered from 0 to " << head_.streams - 1;
      break;
    case log_status::bad_address: m << ". Only bytes inside the pool can be logged"; break;
    default: break;
  }
  throw_error(code, m.str());
}

}  // namespace gpm::detail::log

namespace gpm {

std::string_view to_string(log_status s) noexcept {
  switch (s) {
    case log_status::ok: return "ok";
    case log_status::empty: return "empty";
    case log_status::full: return "full";
    case log_status::size_mismatch: return "size_mismatch";
    case log_status::corrupt: return "corrupt";
    case log_status::wrong_geometry: return "wrong_geometry";
    case log_status::bad_partition: return "bad_partition";
    case log_status::bad_address: return "bad_address";
  }
  return "unknown";
}

}  // namespace gpm
