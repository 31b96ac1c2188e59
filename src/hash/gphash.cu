// gpm::gphash host side: creating and opening tables in a pool and bulk operations, using its
// owned parts: the volatile value allocator (value_area), BktCache (bucket_cache), and resize and
// recovery (resize_recovery.cuh). Explicitly instantiated for the key types, so users compile only
// the device view.
//
// The table's persist sites (gpm::persist_at; tests/hash/gphash_crash_image_test.cu catches the
// removal of each; docs/crash-checking.md has the table). In the engine (engine.cuh) unless named:
//   gphash.create.record   a new table's header and first state record (here)
//   gphash.state.write     every state record update: resize start and commit (format.cpp)
//   gphash.value.write     a value cell filled (key record and value), by every lane
//   gphash.insert.claim    a claimed slot's value offset and key words, before publication
//   gphash.insert.publish  the published fingerprint word, before the insert is acknowledged
//   gphash.update.swap     the valid copy's value offset after the update's CAS
//   gphash.erase.clear     the erased copy's fingerprint word, cleared
//   gphash.move.claim      displacement: the copy's value offset and key words, before publication
//   gphash.move.publish    displacement: the copy's fingerprint word, before the source is cleared
//   gphash.move.clear      displacement: the source's fingerprint word, cleared
//   gphash.recover.dedupe  recovery clearing a duplicate copy (kernels.cuh)
// Two clears are not persisted, since no crash can make their loss visible (kernels.cuh):
// recovery's clearing of INSERTING slots and a rehash's clearing of an item's copy below.
#include <gpm/hash/gphash.cuh>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <type_traits>
#include <utility>

#include <gpm/hash/detail/format.hpp>
#include <gpm/platform/checked_math.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/kernel.cuh>

#include "bucket_cache.hpp"
#include "kernels.cuh"
#include "value_area.hpp"

namespace gpm {

const char* to_string(hash_status s) noexcept {
  switch (s) {
    case hash_status::inserted: return "inserted";
    case hash_status::updated: return "updated";
    case hash_status::found: return "found";
    case hash_status::erased: return "erased";
    case hash_status::not_found: return "not_found";
    case hash_status::exists: return "exists";
    case hash_status::full: return "full";
    case hash_status::no_value_space: return "no_value_space";
    case hash_status::invalid_key: return "invalid_key";
  }
  return "unknown";
}

const char* to_string(cache_policy p) noexcept {
  switch (p) {
    case cache_policy::lfu: return "lfu";
    case cache_policy::lru: return "lru";
    case cache_policy::random: return "random";
  }
  return "unknown";
}

namespace {

using namespace detail::hash;
using namespace format::hash;

std::string level_name(const std::string& table, std::uint32_t level) {
  return table + ".L" + std::to_string(level);
}
std::string segment_name(const std::string& table, std::uint32_t n) {
  return table + ".V" + std::to_string(n);
}

// What pool object `o` is of table `table`: one of its levels or segments (number `n`), or
// neither. Only objects with the table's type tag and the name of a level or segment number the
// table can have count: another program's object of a like name is not the table's to free.
enum class table_part { level, segment, none };
table_part part_of(const std::string& table, const pool_object& o, std::uint32_t& n) {
  const std::size_t at = table.size() + 1;  // the kind's letter, after "table."
  if (o.type_tag != kTypeTag || o.name.size() < at + 2 || o.name.compare(0, at - 1, table) != 0 ||
      o.name[at - 1] != '.') {
    return table_part::none;
  }
  const std::string number = o.name.substr(at + 1);
  if (number.size() > 9 || number.find_first_not_of("0123456789") != std::string::npos) {
    return table_part::none;
  }
  n = static_cast<std::uint32_t>(std::stoul(number));
  if (o.name[at] == 'L' && n <= kMaxTop && o.name == level_name(table, n)) return table_part::level;
  if (o.name[at] == 'V' && n < kStateSegments && o.name == segment_name(table, n)) {
    return table_part::segment;
  }
  return table_part::none;
}

void validate_config(const gphash_config& c, bool variable_keys) {
  const auto fail = [](const std::string& what) {
    throw_error(errc::invalid_argument, "gphash_config: " + what);
  };
  if (c.hash_count < 1 || c.hash_count > 4) fail("hash_count must be 1..4");
  if (c.level_count < 1 || c.level_count > 4) fail("level_count must be 1..4");
  if (c.slots_per_bucket < 1 || c.slots_per_bucket > 32 ||
      (c.slots_per_bucket & (c.slots_per_bucket - 1)) != 0) {
    fail("slots_per_bucket must be a power of two from 1 to 32");
  }
  if (c.value_bytes < 8 || c.value_bytes % 8 != 0 || c.value_bytes > kMaxValueBytes) {
    fail("value_bytes must be a multiple of 8 from 8 to " + std::to_string(kMaxValueBytes));
  }
  if (variable_keys && (c.max_key_bytes < 1 || c.max_key_bytes > kMaxKeyBytes)) {
    fail("max_key_bytes must be 1.." + std::to_string(kMaxKeyBytes));
  }
  if (c.top_level + 1 < c.level_count || c.top_level >= kMaxTop) {
    fail("top_level must be at least level_count - 1 and below " + std::to_string(kMaxTop) +
         " (the levels below the top need buckets)");
  }
}

void validate_options(const gphash_options& o) {
  const std::uint32_t g = o.cg_size;
  if (g < 1 || g > 32 || (g & (g - 1)) != 0) {
    throw_error(errc::invalid_argument, "gphash_options: cg_size must be 1, 2, 4, 8, 16 or 32");
  }
  if (o.block_threads < 32 || o.block_threads > 1024 || o.block_threads % 32 != 0) {
    throw_error(errc::invalid_argument,
                "gphash_options: block_threads must be a multiple of 32 from 32 to 1024");
  }
}

// Value cells for `slots` key slots: room for every key plus in-flight out-of-place updates.
std::uint64_t cells_for(std::uint64_t slots) { return slots + slots / 2 + 64; }

// Words a table's locks hash to (table_view::locks): a power of two, 4 MiB of GPU memory.
constexpr std::uint64_t kLocks = 1u << 20;

device_buffer<std::uint32_t> zeroed_words(std::uint64_t n) {
  device_buffer<std::uint32_t> b(n);
  check_cuda(cudaMemset(b.data(), 0, n * sizeof(std::uint32_t)), "cudaMemset (GPHash locks)");
  return b;
}

template <class T>
void ensure(device_buffer<T>& b, std::size_t count) {
  if (b.size() < count) b = device_buffer<T>(std::max<std::size_t>(count, 2 * b.size()));
}

// The fingerprint mirror of one level (table_view::mirror), gathered from the pool: word i is
// word 0 of slot i % K of bucket i / K. One slot per thread.
__global__ void mirror_kernel(table_view v, std::uint32_t level, std::uint64_t* mirror) {
  const std::uint64_t slots = (1ull << level) * v.slots;
  for (std::uint64_t i : grid_stride(slots)) {
    const auto s = static_cast<std::uint32_t>(i % v.slots);
    mirror[i] = load_word(&slot_at(v, level, i / v.slots, s)[0]);
  }
}

}  // namespace

template <class Key>
struct gphash<Key>::impl {
  object_claim claim;  // the header object's, for the handle's life
  pool* owner = nullptr;
  std::string name;
  table_record* record = nullptr;
  gphash_config config;
  gphash_options options;
  table_state state{};
  gphash_recovery last;
  char* device_base = nullptr;

  value_area values;
  device_buffer<unsigned long long> counters{3};  // [0] retries, [1] and [2] scratch
  device_buffer<std::uint64_t> retry_a, retry_b;
  // The kernels' locks (table_view::locks): inserts' key locks and displacement's bucket locks.
  device_buffer<std::uint32_t> locks = zeroed_words(kLocks);

  // The fingerprint mirror (gphash_options::fingerprint_mirror): a buffer per live level, by level
  // number; empty while it is off, and from the start of a resize or recovery until its end, which
  // rebuild it from the pool (rebuild_gpu_words).
  std::map<std::uint32_t, device_buffer<std::uint64_t>> mirror;
  // Combined updates' generation words (gphash_options::combine_updates), per live level like
  // the mirror, zeroed whenever it is rebuilt (rebuild_gpu_words): they only order updates in
  // flight.
  std::map<std::uint32_t, device_buffer<std::uint32_t>> update_gens;

  cache_options cache_opts;
  std::unique_ptr<bucket_cache> cache;  // null while the cache is off
  std::uint32_t now = 1;                // batches served with the cache on: LRU's clock
  std::uint64_t batches = 0;

  static constexpr bool variable_keys = std::is_same_v<Key, varkey>;
  // The header's key size: 0 for variable-length keys.
  static constexpr std::uint32_t key_bytes() { return variable_keys ? 0 : sizeof(Key); }
  static constexpr std::uint32_t slot_words() { return std::is_same_v<Key, key32> ? 6 : 2; }
  // Bytes of the key record in front of each value (variable-length keys: length + key).
  std::uint32_t key_area() const {
    return variable_keys ? 8 + (config.max_key_bytes + 7) / 8 * 8 : 0;
  }
  std::uint64_t cell_bytes() const { return key_area() + config.value_bytes; }
  std::uint32_t bottom() const { return state.top + 1 - config.level_count; }
  std::uint64_t level_slots(std::uint32_t level) const {
    return (1ull << level) * config.slots_per_bucket;
  }

  // The view of `levels` levels from the top; `with_cache` false during resize and recovery, which
  // change the pool's slots without the cache and the fingerprint mirror, and rebuild both.
  table_view view(std::uint32_t levels, bool with_cache = true) const {
    table_view v;
    v.base = device_base;
    v.top = state.top;
    v.levels = levels;
    for (std::uint32_t d = 0; d < levels; ++d) v.level_offset[d] = state.level_offset[v.top - d];
    v.hash_count = config.hash_count;
    v.slots = config.slots_per_bucket;
    v.slot_words = slot_words();
    v.value_bytes = config.value_bytes;
    v.key_area = key_area();
    v.cell_bytes = static_cast<std::uint32_t>(cell_bytes());
    v.max_key_bytes = variable_keys ? config.max_key_bytes : 0;
    v.seed = config.seed;
    v.crash = kernel_crash_points();
    v.locks = locks.data();
    v.lock_mask = kLocks - 1;
    values.fill(v);
    v.segments = state.segments;
    std::uint64_t first = 0;
    for (std::uint32_t s = 0; s < state.segments; ++s) {
      v.seg_offset[s] = state.seg_offset[s];
      v.seg_first[s] = first;
      first += state.seg_cells[s];
    }
    v.seg_first[state.segments] = first;
    if (with_cache && cache) v.cache = cache->view(now, bottom(), state.top);
    for (std::uint32_t d = 0; with_cache && d < levels; ++d) {
      const auto m = mirror.find(v.top - d);
      if (m != mirror.end()) v.mirror[d] = m->second.data();
      const auto g = update_gens.find(v.top - d);
      if (g != update_gens.end()) v.update_gen[d] = g->second.data();
    }
    return v;
  }
  table_view live_view(bool with_cache = true) const {
    return view(config.level_count, with_cache);
  }

  std::string what() const { return "GPHash table '" + name + "' in pool " + owner->path(); }

  void commit(const table_state& s) {
    write_state(*record, s);
    state = read_state(*record, what());
  }

  unsigned long long read_counter(int i) const {
    unsigned long long v = 0;
    check_cuda(cudaMemcpy(&v, counters.data() + i, sizeof v, cudaMemcpyDeviceToHost), "cudaMemcpy");
    return v;
  }
  void set_counter(int i, unsigned long long v) {
    check_cuda(cudaMemcpy(counters.data() + i, &v, sizeof v, cudaMemcpyHostToDevice), "cudaMemcpy");
  }

  // One scan kernel over every level in [lowest, state.top]; returns its count.
  template <scan_op Op>
  unsigned long long scan(std::uint32_t levels) {
    set_counter(1, 0);
    const table_view v = view(levels, false);
    for (std::uint32_t d = 0; d < levels; ++d) {
      const std::uint32_t level = state.top - d;
      launch(scan_kernel<Op>, blocks_for(level_slots(level), kScanThreads), kScanThreads, 0,
             nullptr, v, level, counters.data() + 1);
    }
    check_cuda(cudaDeviceSynchronize(), "GPHash scan");
    return read_counter(1);
  }

  // Rebuilds the volatile allocator from the published slots: allocation needs no persistent
  // state, so a cell taken by an operation that a crash interrupted is simply free again.
  // `levels` counts from the top: level_count, or one more while a level is being drained. Also
  // validates every published value offset, before anything dereferences one (the key records
  // of variable-length keys).
  void rebuild_allocator(std::uint32_t levels) {
    std::uint64_t cells = 0;
    for (std::uint32_t s = 0; s < state.segments; ++s) cells += state.seg_cells[s];
    values.reset(cells);
    const unsigned long long bad = scan<scan_op::mark_cells>(levels);
    if (bad != 0) {
      throw_error(errc::corrupt, what() + " has " + std::to_string(bad) +
                                     " items whose value offset lies outside its value area: "
                                     "restore the pool from a snapshot");
    }
  }

  // Gathers the fingerprint mirror of the live levels from the pool (option on) and zeroes the
  // update generations (option on); nothing may use the table meanwhile. After create, open,
  // recovery and resize: both are volatile, and resize and recovery change the pool's words
  // without them.
  void rebuild_gpu_words() {
    mirror.clear();
    update_gens.clear();
    for (std::uint32_t d = 0; options.combine_updates && d < config.level_count; ++d) {
      update_gens.emplace(state.top - d, zeroed_words(level_slots(state.top - d)));
    }
    if (!options.fingerprint_mirror) return;
    const table_view v = live_view(false);
    for (std::uint32_t d = 0; d < config.level_count; ++d) {
      const std::uint32_t level = state.top - d;
      device_buffer<std::uint64_t> words(level_slots(level));
      launch(mirror_kernel, blocks_for(level_slots(level), kScanThreads), kScanThreads, 0, nullptr,
             v, level, words.data());
      mirror.emplace(level, std::move(words));
    }
    check_cuda(cudaDeviceSynchronize(), "GPHash fingerprint mirror");
  }

  std::uint64_t mirror_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& [level, words] : mirror) bytes += words.bytes();
    return bytes;
  }

  // Stream-ordered: kernels that follow on `stream` may reuse the cells.
  void reclaim(cudaStream_t stream) { values.reclaim(live_view(false), stream); }

  // ---- resize and recovery (resize_recovery.cuh) ----------------------------------------------

  // Returns the items found above already (duplicates an interrupted rehash left, now cleared).
  std::uint64_t finish_resize();

  // Frees level and segment objects that the state no longer (or not yet) refers to: left by a
  // crash between a pool allocation or free and the state write around it.
  void free_stale_objects();

  // The state record's numbers come from media: a level below 0 or a segment size whose byte
  // count wraps around 64 bits is damage, not a small object.
  void validate_objects() const;

  // Adds a level on top, then drains the bottom level into the levels above it (the rehash).
  void grow();

  // Recovery after a crash: clears INSERTING slots, finishes an interrupted resize, frees stale
  // objects, removes duplicate copies, rebuilds the allocator and the cache.
  gphash_recovery recover();

  // ---- BktCache ------------------------------------------------------------------------------

  void reload_cache() {
    cache->reload(live_view(), config.seed ^ mix64(batches));
    ++now;
  }

  void wait_cache() const {
    if (cache) cache->wait();
  }

  void drop_cache() { cache.reset(); }

  // ---- bulk operations -------------------------------------------------------------------------

  // Calls f(std::integral_constant<unsigned, G>{}) with the options' tile size G.
  template <class F>
  void with_tile(F&& f) const {
    switch (options.cg_size) {
      case 1: return f(std::integral_constant<unsigned, 1>{});
      case 2: return f(std::integral_constant<unsigned, 2>{});
      case 4: return f(std::integral_constant<unsigned, 4>{});
      case 8: return f(std::integral_constant<unsigned, 8>{});
      case 16: return f(std::integral_constant<unsigned, 16>{});
      default: return f(std::integral_constant<unsigned, 32>{});
    }
  }

  template <bulk_op Op>
  void dispatch(const bulk_args& a, cudaStream_t stream) {
    const std::uint32_t block = options.block_threads;
    with_tile([&](auto g) {
      launch(bulk_kernel<Key, g.value, Op>, blocks_for(a.n * g.value, block), block, 0, stream,
             live_view(), a);
    });
  }

  // Displacement for the keys keys[index[i]], i < n (index null: keys[i]); returns the items
  // moved. Synchronous.
  unsigned long long make_room(const void* keys, const std::uint64_t* index, std::uint64_t n,
                               cudaStream_t stream) {
    if (n == 0) return 0;
    check_bulk("make_room", keys, false, nullptr, n);
    set_counter(1, 0);
    const std::uint32_t block = options.block_threads;
    with_tile([&](auto g) {
      launch(make_room_kernel<Key, g.value>, blocks_for(n * g.value, block), block, 0, stream,
             live_view(), keys, index, n, counters.data() + 1);
    });
    check_cuda(cudaStreamSynchronize(stream), "GPHash displacement");
    return read_counter(1);
  }

  // A bulk call's arrays: a null one that a kernel would read, or a count whose value bytes
  // overflow, would fault inside the kernel and leave the CUDA context unusable.
  void check_bulk(const char* op, const void* keys, bool reads_values, const void* values,
                  std::size_t n) const {
    const auto fail = [&](const std::string& why) {
      throw_error(errc::invalid_argument, what() + ": " + op + " of " + std::to_string(n) +
                                              " keys: " + why + "; nothing was done");
    };
    if (keys == nullptr) fail("the keys are a null pointer");
    if (reads_values && values == nullptr) fail("the values are a null pointer");
    if (!checked_mul(n, config.value_bytes)) fail("their values' bytes overflow 64 bits");
  }

  template <bulk_op Op>
  void run(const Key* keys, const void* values, void* out, std::size_t n, hash_status* status,
           cudaStream_t stream) {
    if (n == 0) return;
    constexpr bool inserts = Op == bulk_op::insert || Op == bulk_op::upsert;
    check_bulk(to_string(Op), keys, inserts || Op == bulk_op::update, values, n);
    bulk_args a{keys,
                static_cast<const std::byte*>(values),
                static_cast<std::byte*>(out),
                status,
                n,
                nullptr,
                nullptr,
                counters.data()};
    if (inserts && (options.displace || options.auto_resize)) {
      ensure(retry_a, n);
      ensure(retry_b, n);
      a.retry = retry_a.data();
      set_counter(0, 0);  // the retry count: only a batch that may retry uses it
    }
    dispatch<Op>(a, stream);
    check_cuda(cudaStreamSynchronize(stream), "GPHash bulk operation");
    // Keys that found every candidate slot (or every value cell) taken: make room by moving
    // items (displacement), else add a level; then retry just those keys. A round that moves an
    // item frees a slot that one of the keys can take, so rounds of displacement end.
    while (a.retry != nullptr) {
      const unsigned long long again = read_counter(0);
      if (again == 0) break;
      const bool moved = options.displace && make_room(a.keys, a.retry, again, stream) > 0;
      if (!moved) {
        if (!options.auto_resize) break;
        reclaim(stream);
        check_cuda(cudaStreamSynchronize(stream), "GPHash reclaim");
        grow();
      }
      std::swap(retry_a, retry_b);
      a.index = retry_b.data();
      a.retry = retry_a.data();
      a.n = again;
      set_counter(0, 0);
      dispatch<Op>(a, stream);
      check_cuda(cudaStreamSynchronize(stream), "GPHash bulk operation");
    }
    // Only updates, upserts and erases retire cells; after a batch of finds or inserts there is
    // nothing to fold, and the scan of the whole bitmap would be a batch's fixed cost for nothing.
    if constexpr (Op == bulk_op::update || Op == bulk_op::upsert || Op == bulk_op::erase) {
      reclaim(stream);
    }
    ++batches;
    if (cache) {
      ++now;
      if (cache_opts.reload_every != 0 && batches % cache_opts.reload_every == 0) reload_cache();
    }
  }

  // The bytes of a value in the value cache, 0 when values are not cached. Not for
  // variable-length keys: a find compares the key with the key record in the cell, in the pool,
  // so it reads the cell across PCIe whatever the cache holds (docs/gphash.md, "BktCache").
  std::uint32_t cached_value_bytes() const {
    const bool on = !variable_keys && config.value_bytes <= cache_opts.value_cache_limit;
    return on ? config.value_bytes : 0;
  }

  // A fresh cache for the table's current geometry, loaded by the policy.
  void restart_cache() {
    cache =
        std::make_unique<bucket_cache>(cache_opts, (2ull << state.top) - (1ull << bottom()),
                                       config.slots_per_bucket, slot_words(), cached_value_bytes());
    reload_cache();
  }
};

#include "resize_recovery.cuh"

// ---- gphash ------------------------------------------------------------------------------------

template <class Key>
gphash<Key>::gphash(std::unique_ptr<impl> impl) : impl_(std::move(impl)) {}
template <class Key>
gphash<Key>::gphash(gphash&&) noexcept = default;
template <class Key>
gphash<Key>& gphash<Key>::operator=(gphash&&) noexcept = default;
template <class Key>
gphash<Key>::~gphash() {
  if (impl_) impl_->wait_cache();
}

template <class Key>
typename gphash<Key>::impl& gphash<Key>::self() const {
  if (!impl_) throw_error(errc::invalid_argument, "gpm::gphash: this table was moved from");
  return *impl_;
}

template <class Key>
gphash<Key> gphash<Key>::create(pool& p, const std::string& name, const gphash_config& config,
                                const gphash_options& options) {
  validate_config(config, impl::variable_keys);
  validate_options(options);
  require(!name.empty() && name.find('.') == std::string::npos,
          "gphash::create: the table name must be non-empty and contain no '.'");
  if (p.find(name)) {
    throw_error(errc::already_exists, "gphash::create: pool " + p.path() +
                                          " already holds an "
                                          "object named '" +
                                          name + "': open it, or remove it first");
  }
  auto m = std::make_unique<impl>();
  m->owner = &p;
  m->name = name;
  m->config = config;
  m->options = options;
  // The header object comes first and is sealed last: a crash in between leaves a table that
  // open() rejects (bad magic) and remove() clears.
  const std::uint64_t rec = p.allocate(name, sizeof(table_record), 128, kTypeTag);
  m->claim = p.claim(name, "a gphash");
  table_state s{};
  s.top = config.top_level;
  const std::uint64_t slot_bytes = m->slot_words() * 8ull;
  std::uint64_t slots = 0;
  for (std::uint32_t d = 0; d < config.level_count; ++d) {
    const std::uint32_t level = config.top_level - d;
    s.level_offset[level] =
        p.allocate(level_name(name, level), m->level_slots(level) * slot_bytes, 128, kTypeTag);
    slots += m->level_slots(level);
  }
  s.segments = 1;
  s.seg_cells[0] = cells_for(slots);
  s.seg_offset[0] =
      p.allocate(segment_name(name, 0), s.seg_cells[0] * m->cell_bytes(), 128, kTypeTag);
  auto* record = p.host_ptr<table_record>(rec);
  table_header& h = record->header;
  h.common = format::make_header(kKind, sizeof(table_record));
  h.key_bytes = impl::key_bytes();
  h.max_key_bytes = impl::variable_keys ? config.max_key_bytes : 0;
  h.slot_bytes = static_cast<std::uint32_t>(slot_bytes);
  h.hash_count = config.hash_count;
  h.level_count = config.level_count;
  h.slots_per_bucket = config.slots_per_bucket;
  h.value_bytes = config.value_bytes;
  h.initial_top = config.top_level;
  h.seed = config.seed;
  format::seal_header(&h);
  s.seq = 1;
  s.checksum = state_checksum(s);
  record->state[1] = s;
  persist_at("gphash.create.record", record, sizeof *record);
  m->record = record;
  m->state = s;
  m->device_base = p.ref().base;
  m->rebuild_allocator(m->config.level_count);
  m->rebuild_gpu_words();
  return gphash(std::move(m));
}

template <class Key>
gphash<Key> gphash<Key>::open(pool& p, const std::string& name, const gphash_options& options) {
  validate_options(options);
  auto m = std::make_unique<impl>();
  m->owner = &p;
  m->name = name;
  m->options = options;
  const pool_object o = p.open_object(name, kKind, m->what());
  m->claim = p.claim(name, "a gphash");
  check_table_geometry(p.host_ptr<char>(o.offset), impl::key_bytes(), m->what());
  m->record = p.host_ptr<table_record>(o.offset);
  const table_header& h = m->record->header;
  m->config.hash_count = h.hash_count;
  m->config.level_count = h.level_count;
  m->config.slots_per_bucket = h.slots_per_bucket;
  m->config.value_bytes = h.value_bytes;
  m->config.top_level = h.initial_top;
  m->config.seed = h.seed;
  m->config.max_key_bytes = h.max_key_bytes;
  m->state = read_state(*m->record, m->what());
  if (m->state.top + 1 < h.level_count + (m->state.resizing ? 1u : 0u)) {
    throw_error(errc::corrupt, m->what() + " has a state record with too few levels");
  }
  m->validate_objects();
  m->device_base = p.ref().base;
  m->recover();
  return gphash(std::move(m));
}

template <class Key>
void gphash<Key>::remove(pool& p, const std::string& name) {
  const std::optional<pool_object> head = p.find(name);
  if (head && head->type_tag != kTypeTag) {
    throw_error(errc::invalid_argument, "gphash::remove: object '" + name + "' of pool " +
                                            p.path() + " is not a GPHash table: nothing was freed");
  }
  // The header first: freeing it is refused (busy) while the table is open in this process, and
  // then nothing is freed. A remove cut short by a crash after it is finished by the next one.
  if (head) p.free(name);
  bool found = head.has_value();
  std::uint32_t n = 0;
  for (const pool_object& o : p.objects()) {
    if (part_of(name, o, n) != table_part::none) {
      p.free(o.name);
      found = true;
    }
  }
  if (!found) {
    throw_error(errc::not_found,
                "gphash::remove: pool " + p.path() + " holds no table named '" + name + "'");
  }
}

template <class Key>
gphash_ref<Key> gphash<Key>::ref() const {
  return gphash_ref<Key>(self().live_view());
}
template <class Key>
const gphash_config& gphash<Key>::config() const {
  return self().config;
}
template <class Key>
const gphash_options& gphash<Key>::options() const {
  return self().options;
}

template <class Key>
void gphash<Key>::insert(const Key* keys, const void* values, std::size_t n, hash_status* status,
                         cudaStream_t stream) {
  self().template run<bulk_op::insert>(keys, values, nullptr, n, status, stream);
}
template <class Key>
void gphash<Key>::upsert(const Key* keys, const void* values, std::size_t n, hash_status* status,
                         cudaStream_t stream) {
  self().template run<bulk_op::upsert>(keys, values, nullptr, n, status, stream);
}
template <class Key>
void gphash<Key>::update(const Key* keys, const void* values, std::size_t n, hash_status* status,
                         cudaStream_t stream) {
  self().template run<bulk_op::update>(keys, values, nullptr, n, status, stream);
}
template <class Key>
void gphash<Key>::find(const Key* keys, std::size_t n, void* values_out, hash_status* status,
                       cudaStream_t stream) const {
  self().template run<bulk_op::find>(keys, nullptr, values_out, n, status, stream);
}
template <class Key>
void gphash<Key>::erase(const Key* keys, std::size_t n, hash_status* status, cudaStream_t stream) {
  self().template run<bulk_op::erase>(keys, nullptr, nullptr, n, status, stream);
}
template <class Key>
void gphash<Key>::reclaim(cudaStream_t stream) {
  self().reclaim(stream);
}
template <class Key>
std::uint64_t gphash<Key>::make_room(const Key* keys, std::size_t n, cudaStream_t stream) {
  return self().make_room(keys, nullptr, n, stream);
}
template <class Key>
void gphash<Key>::resize() {
  self().grow();
}
template <class Key>
gphash_recovery gphash<Key>::recover() {
  return self().recover();
}
template <class Key>
const gphash_recovery& gphash<Key>::last_recovery() const {
  return self().last;
}
template <class Key>
std::uint64_t gphash<Key>::size() const {
  return self().template scan<scan_op::count_items>(self().config.level_count);
}
template <class Key>
std::uint64_t gphash<Key>::capacity() const {
  std::uint64_t slots = 0;
  for (std::uint32_t d = 0; d < self().config.level_count; ++d) {
    slots += self().level_slots(self().state.top - d);
  }
  return slots;
}
template <class Key>
double gphash<Key>::load_factor() const {
  return static_cast<double>(size()) / static_cast<double>(capacity());
}

template <class Key>
gphash_stats gphash<Key>::stats() const {
  const impl& m = self();
  gphash_stats s;
  s.top_level = m.state.top;
  s.level_count = m.config.level_count;
  s.buckets = (2ull << m.state.top) - (1ull << m.bottom());
  s.slots = capacity();
  s.value_cells = m.values.cells();
  s.resizes = m.state.resizes;
  s.cache_enabled = m.cache != nullptr;
  if (m.cache) {
    s.cached_buckets = m.cache->capacity();
    const auto c = m.cache->counts();
    s.cache_hits = c[0];
    s.cache_misses = c[1];
    s.value_cache_bytes = m.cache->value_bytes();
    s.value_cache_hits = c[2];
    s.value_cache_fallbacks = c[3];
  }
  s.fingerprint_mirror_bytes = m.mirror_bytes();
  for (const auto& [level, words] : m.update_gens) s.update_generation_bytes += words.bytes();
  return s;
}

namespace {

// Part of check(): every ready BktCache bucket holds what the pool's bucket holds, slot words
// and (the value cache) published slots' values. A stale copy would serve finds an old value and
// make updates, whose CAS expects the value offset the probe read, lose to a change that never
// happened. `v` is the host view of the table; the reload, if any, is waited for.
template <class Impl>
void check_cache(const Impl& m, const table_view& v, gphash_check& out) {
  m.cache->wait();
  const cache_view c = m.cache->view(m.now, m.bottom(), m.state.top);
  const std::uint64_t words = std::uint64_t{v.slots} * v.slot_words;
  const std::uint32_t value_words = m.cached_value_bytes() / 8;
  const auto fetch = [](auto& to, const auto* from) {
    if (to.empty()) return;
    check_cuda(cudaMemcpy(to.data(), from, to.size() * sizeof to[0], cudaMemcpyDeviceToHost),
               "cudaMemcpy (GPHash check of BktCache)");
  };
  std::vector<std::uint32_t> map(c.buckets);
  std::vector<std::uint64_t> slots(c.capacity * words);
  std::vector<std::uint64_t> values(c.values != nullptr ? c.capacity * v.slots * value_words : 0);
  fetch(map, c.map);
  fetch(slots, c.slots);
  fetch(values, c.values);
  for (std::uint64_t x = 0; x < c.buckets; ++x) {
    if ((map[x] & 1u) == 0) continue;  // not cached, or still being fetched
    const std::uint64_t y = (map[x] >> 1) - 1;
    const location at = bucket_of_global(c, x);
    for (std::uint32_t s = 0; s < v.slots; ++s) {
      const slot_ref pool = slot_at(v, at.level, at.bucket, s);
      const slot_ref cached{slots.data() + y * words, s, v.slots};
      const std::string where = "level " + std::to_string(at.level) + " bucket " +
                                std::to_string(at.bucket) + " slot " + std::to_string(s);
      bool same = true;
      for (std::uint32_t w = 0; w < v.slot_words; ++w) same = same && cached[w] == pool[w];
      if (!same) {
        out.problems.push_back(where + ": BktCache holds word 0 " + std::to_string(cached[0]) +
                               " and value offset " + std::to_string(cached[1]) + ", the pool " +
                               std::to_string(pool[0]) + " and " + std::to_string(pool[1]));
        continue;
      }
      if (values.empty() || !is_published(pool[0])) continue;
      const auto* cell = reinterpret_cast<const std::uint64_t*>(cell_value(v, pool[1]));
      if (!std::equal(cell, cell + value_words, values.data() + (y * v.slots + s) * value_words)) {
        out.problems.push_back(where + ": the value cache differs from the value in the pool");
      }
    }
  }
}

}  // namespace

template <class Key>
gphash_check gphash<Key>::check() const {
  const impl& m = self();
  check_cuda(cudaDeviceSynchronize(), "GPHash check");
  gphash_check c;
  const table_view v = [&] {
    table_view h = m.view(m.config.level_count + (m.state.resizing ? 1 : 0), false);
    h.base = m.owner->host_ref().base;
    return h;
  }();
  std::map<std::vector<std::uint64_t>, std::uint64_t> seen;
  std::map<std::uint64_t, std::uint64_t> cells;
  for (std::uint32_t d = 0; d < v.levels; ++d) {
    const std::uint32_t level = v.top - d;
    for (std::uint64_t b = 0; b < (1ull << level); ++b) {
      for (std::uint32_t s = 0; s < v.slots; ++s) {
        const slot_ref slot = slot_at(v, level, b, s);
        if (slot[0] == kInserting) ++c.inserting_slots;
        if (!is_published(slot[0])) continue;
        ++c.items;
        slot_image img;
        img.word = slot[0];
        img.value = slot[1];
        std::vector<std::uint64_t> key{img.word, 0};  // fingerprint word, then any key words
        for (std::uint32_t w = 2; w < v.slot_words; ++w) {
          img.key[w - 2] = slot[w];
          key.push_back(slot[w]);
        }
        const bool cell_ok = cell_of(v, slot[1]) != kNone;
        if constexpr (impl::variable_keys) {
          if (cell_ok) {  // the key's bytes, from its record
            const varkey k = key_ops<varkey>::key_at(v, img);
            key.resize(2 + (k.bytes + 7) / 8, 0);
            key[1] = k.bytes;
            std::memcpy(key.data() + 2, k.data, std::min(k.bytes, m.config.max_key_bytes));
            if (k.bytes > m.config.max_key_bytes ||
                key_ops<varkey>::word(k, key_ops<varkey>::hash(k, v.seed)) != slot[0]) {
              c.problems.push_back("a variable-length key does not match its fingerprint");
            }
          }
        }
        if (++seen[key] == 2) ++c.duplicates;
        if (!cell_ok) {
          c.problems.push_back("level " + std::to_string(level) + " bucket " + std::to_string(b) +
                               " slot " + std::to_string(s) + ": value offset " +
                               std::to_string(slot[1]) + " is not a value cell");
        } else if (++cells[slot[1]] == 2) {
          c.problems.push_back("value cell at offset " + std::to_string(slot[1]) +
                               " is referenced by two items");
        }
        if constexpr (std::is_same_v<Key, key32>) {
          const key32 k = key_ops<key32>::key_at(v, img);
          if (key_ops<key32>::word(k, key_ops<key32>::hash(k, v.seed)) != slot[0]) {
            c.problems.push_back("level " + std::to_string(level) + " bucket " + std::to_string(b) +
                                 " slot " + std::to_string(s) +
                                 ": the key does not match its fingerprint (torn slot)");
          }
        }
      }
    }
  }
  for (const auto& [level, words] : m.mirror) {
    std::vector<std::uint64_t> mirrored(words.size());
    words.copy_to_host(mirrored.data(), mirrored.size());
    for (std::uint64_t i = 0; i < mirrored.size(); ++i) {
      const auto s = static_cast<std::uint32_t>(i % v.slots);
      const std::uint64_t pool_word = slot_at(v, level, i / v.slots, s)[0];
      if (mirrored[i] != pool_word) {
        c.problems.push_back("level " + std::to_string(level) + " bucket " +
                             std::to_string(i / v.slots) + " slot " + std::to_string(s) +
                             ": the fingerprint mirror holds " + std::to_string(mirrored[i]) +
                             ", the pool " + std::to_string(pool_word));
      }
    }
  }
  if (m.cache && !m.state.resizing) check_cache(m, v, c);
  if (c.duplicates != 0) c.problems.push_back(std::to_string(c.duplicates) + " duplicate keys");
  if (m.state.resizing) c.problems.push_back("a resize is in progress (run recover())");
  c.ok = c.problems.empty() && c.inserting_slots == 0;
  return c;
}

template <class Key>
void gphash<Key>::enable_cache(const cache_options& options) {
  require(options.fraction > 0 && options.fraction <= 1,
          "gphash::enable_cache: fraction must be in (0, 1]");
  self().drop_cache();
  self().cache_opts = options;
  self().restart_cache();
}
template <class Key>
void gphash<Key>::disable_cache() {
  self().drop_cache();
}
template <class Key>
bool gphash<Key>::cache_enabled() const {
  return self().cache != nullptr;
}
template <class Key>
void gphash<Key>::reload_cache() {
  require(self().cache != nullptr, "gphash::reload_cache: the bucket cache is not enabled");
  self().reload_cache();
}
template <class Key>
void gphash<Key>::wait_cache_reload() const {
  self().wait_cache();
}

template class gphash<std::uint64_t>;
template class gphash<key32>;
template class gphash<varkey>;

}  // namespace gpm
