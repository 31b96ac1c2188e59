// gpm::checkpointer (see checkpoint.hpp; on-media format in format.hpp). A checkpoint of a group
// writes every changed chunk of the group into the copy the commit record in force does not
// reference (the working copy), waits until those bytes are in host memory, then writes the other
// commit record with the new slots and digests and persists it: the atomic flip. Nothing the
// record in force references is ever overwritten, so a crash at any moment leaves it restorable.
//
// The protocol's persist sites (gpm::persist_at; docs/crash-checking.md names the test that
// catches the removal of each):
//   checkpoint.create.header  a new checkpoint's header
//   checkpoint.add.entry      a new chunk's table entry, which makes the chunk exist
//   checkpoint.copy.working   a changed chunk's working copy once its copy has completed, on both
//                             copy paths (the copy kernel's stores or the DMA are in host memory
//                             then; on device-DAX pools this also writes back CPU caches); the
//                             copy kernel has no persist of its own (kernels.cu)
//   checkpoint.record.write   the commit record not in force, with the new slots and digests:
//                             the flip (record_store.cpp)
#include <gpm/checkpoint/checkpoint.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <gpm/checkpoint/format.hpp>
#include <gpm/platform/checksum.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/platform/persist.hpp>

#include "copy_engine.hpp"
#include "record_store.hpp"

namespace gpm {

namespace fmt = format::checkpoint;
namespace kd = checkpoint_detail;

std::string_view to_string(copy_path p) noexcept {
  switch (p) {
    case copy_path::automatic: return "automatic";
    case copy_path::gpu_stores: return "gpu-stores";
    case copy_path::dma: return "dma";
  }
  return "unknown";
}

bool pending_checkpoint::ready() const {
  return future_.valid() && future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

namespace {

std::uint64_t entry_checksum(const fmt::chunk_entry& e) {
  fmt::chunk_entry c = e;
  c.checksum = 0;
  return checksum64(&c, sizeof c, e.index);
}

using kd::action;
using kd::all_zero;
using kd::batch_job;
using kd::clock;
using kd::copy_engine;
using kd::copy_job;
using kd::record_store;

// ---- a chunk in this process -------------------------------------------------------------------

// The predictor of HeteroCheckpoint (DSN'14, Fig. 4), per chunk: a saturating 2-bit counter that
// a changed checksum moves towards "not redundant" and an unchanged one towards "redundant".
// Chunks in the two redundant states are checksummed first and copied only if changed; the others
// are copied at once, their checksum computed by the copy.
enum predictor : std::uint8_t { redundant, likely_redundant, unlikely_redundant, not_redundant };

struct chunk_state {
  fmt::chunk_entry* entry = nullptr;  // in the pool
  void* device = nullptr;             // the registered buffer (nullptr: not attached)
  std::optional<gpm::stream> stream;  // of a pre-copy, made by the first one
  std::uint8_t prediction = not_redundant;
  // What a precopy() hint started on the stream, and into which slot.
  std::optional<action> precopy;
  std::uint32_t precopy_slot = 0;
  device_buffer<unsigned char> shadow;  // the capture of checkpoint_async
  const void* source = nullptr;         // what the running checkpoint reads
};

}  // namespace

struct checkpointer::impl {
  object_claim claim;  // the checkpoint's object, for the handle's life (declared first: last out)
  pool* p = nullptr;
  std::string name;
  checkpoint_options options;
  std::vector<chunk_state> chunks;  // by table index
  record_store records;
  std::optional<copy_engine> engine;  // once the records and the chunk table are loaded
  std::uint64_t commits_since_snapshot = 0;
  std::mutex mutex;  // one operation at a time
  std::shared_future<checkpoint_result> pending;

  ~impl() { wait_pending_quietly(); }

  void wait_pending_quietly() {
    if (pending.valid()) pending.wait();
  }
  void wait_pending() {
    if (pending.valid()) {
      auto f = std::move(pending);
      pending = {};
      f.get();  // a failure surfaces to the next caller if nobody asked for it
    }
  }

  // One operation at a time, after the pending asynchronous checkpoint: that one takes the lock
  // itself, so it is waited for before locking.
  std::unique_lock<std::mutex> exclusive() {
    wait_pending();
    return std::unique_lock(mutex);
  }

  void notice(const std::string& text) const {
    if (options.notice) {
      options.notice(text);
    } else {
      std::fprintf(stderr, "gpmkit: %s\n", text.c_str());
    }
  }

  std::string who() const { return "checkpoint \"" + name + "\" in " + p->path(); }

  static std::string object_name(std::string_view cp) { return "cp." + std::string(cp); }
  std::string copy_name(std::uint32_t index, int slot) const {
    return object_name(name) + "." + std::to_string(index) + (slot == 0 ? ".a" : ".b");
  }

  // ---- chunks -----------------------------------------------------------------------------

  std::optional<std::uint32_t> find_chunk(std::string_view chunk) const {
    for (std::uint32_t i = 0; i < chunks.size(); ++i) {
      if (chunks[i].entry != nullptr && std::string_view(chunks[i].entry->name) == chunk) return i;
    }
    return std::nullopt;
  }

  std::uint32_t index_named(std::string_view chunk) const {
    const auto i = find_chunk(chunk);
    if (!i) {
      throw_error(errc::not_found, who() + " has no chunk named \"" + std::string(chunk) +
                                       "\"; register it with add() first.");
    }
    return *i;
  }

  void load_table() {
    chunks.resize(records.max_chunks());
    for (std::uint32_t i = 0; i < records.max_chunks(); ++i) {
      fmt::chunk_entry& e = records.table()[i];
      if (all_zero(&e, sizeof e)) continue;
      const bool valid = e.used == 1 && e.index == i && e.checksum == entry_checksum(e) &&
                         e.name[fmt::kChunkNameMax] == '\0' && e.copy_offset[0] != 0 &&
                         e.copy_offset[1] != 0;
      if (valid) {
        for (int s = 0; s < 2; ++s) {
          if (!p->host_ref().contains(e.copy_offset[s], e.bytes)) {
            throw_error(errc::corrupt, who() + ": chunk \"" + e.name +
                                           "\" has a copy outside the pool; the checkpoint is "
                                           "damaged.");
          }
        }
        chunks[i].entry = &e;
      } else if (records.current[i].written_seq != 0) {
        // A committed chunk's entry was complete before its first checkpoint: this is damage.
        throw_error(errc::corrupt, who() + ": the chunk table entry " + std::to_string(i) +
                                       " fails its checksum although checkpoints hold its data; "
                                       "the checkpoint is damaged.");
      }
      // Otherwise an add() was interrupted by a crash: the slot is free again.
    }
  }

  std::vector<std::uint32_t> group_members(std::uint32_t group) const {
    std::vector<std::uint32_t> out;
    for (std::uint32_t i = 0; i < chunks.size(); ++i) {
      if (chunks[i].entry != nullptr && chunks[i].entry->group == group) out.push_back(i);
    }
    return out;
  }

  // The registered chunks of a group, every one attached to a buffer in this process.
  std::vector<std::uint32_t> attached_group(std::uint32_t group, const char* op) const {
    const std::vector<std::uint32_t> members = group_members(group);
    if (members.empty()) {
      throw_error(errc::not_found, who() + " has no chunks in group " + std::to_string(group) +
                                       "; add() them before " + op + ".");
    }
    for (std::uint32_t i : members) {
      if (chunks[i].device == nullptr) {
        throw_error(errc::invalid_argument, who() + ": chunk \"" + chunks[i].entry->name +
                                                "\" of group " + std::to_string(group) +
                                                " has no GPU buffer in this process; add() it "
                                                "before " +
                                                op + ".");
      }
    }
    return members;
  }

  std::uint32_t working_slot(std::uint32_t i) const {
    return records.current[i].written_seq == 0 ? 0 : 1 - records.current[i].slot;
  }
  void* copy_host(std::uint32_t i, std::uint32_t slot) const {
    return p->host_ptr<void>(chunks[i].entry->copy_offset[slot]);
  }

  // ---- GPU work ---------------------------------------------------------------------------

  copy_job job(std::uint32_t i) const {
    const chunk_state& c = chunks[i];
    return {i, c.source, c.entry->bytes, *c.stream};
  }
  void enqueue(action a, std::uint32_t i, std::uint32_t slot, copy_path via) {
    engine->enqueue(a, job(i), chunks[i].entry->copy_offset[slot], via);
  }
  std::uint64_t finish(std::uint32_t i) { return engine->finish(job(i)); }

  // Measures the copy paths on the group's largest chunk, into its working copy, which no record
  // references. A pre-copied chunk's working copy holds its checkpoint already: it is not
  // measured on; with nothing else to measure on, the choice waits for a later checkpoint.
  void choose_path(const std::vector<std::uint32_t>& members) {
    if (engine->path() != copy_path::automatic) return;
    std::vector<std::uint32_t> candidates;
    for (std::uint32_t i : members) {
      if (!chunks[i].precopy) candidates.push_back(i);
    }
    if (candidates.empty()) return;
    const std::uint32_t big = *std::max_element(
        candidates.begin(), candidates.end(), [&](std::uint32_t a, std::uint32_t b) {
          return chunks[a].entry->bytes < chunks[b].entry->bytes;
        });
    engine->measure({chunks[big].source, chunks[big].entry->bytes,
                     chunks[big].entry->copy_offset[working_slot(big)]});
    notice(who() + ": copies chunks by " + std::string(to_string(engine->path())) +
           " (measured on \"" + chunks[big].entry->name + "\", " +
           std::to_string(chunks[big].entry->bytes) + " bytes)");
  }

  // The checkpoint itself; the chunks' sources are set and ordered after the data's producers.
  checkpoint_result run(std::uint32_t group, const std::vector<std::uint32_t>& members,
                        clock::time_point t0) {
    checkpoint_result r;
    r.seq = records.seq + 1;
    r.chunks = static_cast<std::uint32_t>(members.size());
    choose_path(members);
    r.path = engine->effective_path();
    std::vector<fmt::record_entry> next = records.current;
    std::vector<action> todo(chunks.size(), action::copy);
    std::vector<std::uint32_t> slot(chunks.size());
    std::vector<std::uint64_t> digest(chunks.size());
    std::vector<std::uint32_t> fresh;
    for (std::uint32_t i : members) {
      chunk_state& c = chunks[i];
      slot[i] = working_slot(i);
      if (c.precopy) {
        todo[i] = *c.precopy;
        slot[i] = c.precopy_slot;
        ++r.precopied;
        continue;  // already on its stream
      }
      todo[i] = options.eliminate_redundant && records.current[i].written_seq != 0 &&
                        c.prediction <= likely_redundant
                    ? action::digest_first
                    : action::copy;
      fresh.push_back(i);
    }
    run_batch(fresh, todo, slot, r.path, digest);
    for (std::uint32_t i : members) {
      if (chunks[i].precopy) digest[i] = finish(i);
    }
    // Chunks checksummed first: unchanged ones keep their consistent copy, changed ones are
    // copied now (a misprediction), in one more batch.
    std::vector<std::uint32_t> mispredicted;
    for (std::uint32_t i : members) {
      if (todo[i] != action::digest_first) continue;
      if (digest[i] == records.current[i].digest) {
        next[i].confirmed_seq = r.seq;
        ++r.redundant;
      } else {
        ++r.mispredicted;
        todo[i] = action::copy;
        mispredicted.push_back(i);
      }
    }
    run_batch(mispredicted, todo, slot, r.path, digest);
    for (std::uint32_t i : members) {
      chunk_state& c = chunks[i];
      const bool changed = todo[i] == action::copy;
      if (changed) {
        // The bytes are in host memory (the copy's stream has completed); on device-DAX pools
        // this also writes back what a CPU cache may hold.
        persist_at("checkpoint.copy.working", copy_host(i, slot[i]), c.entry->bytes);
        next[i] = {digest[i], r.seq, r.seq, slot[i], 0};
        ++r.copied;
        r.bytes_copied += c.entry->bytes;
      }
      const bool same =
          records.current[i].written_seq != 0 && digest[i] == records.current[i].digest;
      c.prediction = same ? (c.prediction > redundant ? c.prediction - 1 : redundant)
                          : (c.prediction < not_redundant ? c.prediction + 1 : not_redundant);
      c.precopy.reset();
    }
    crash_point("checkpoint.copied");
    records.commit(next, r.seq);
    if (options.snapshot_every != 0 && ++commits_since_snapshot >= options.snapshot_every) {
      p->snapshot();
      commits_since_snapshot = 0;
      r.snapshotted = true;
    }
    (void)group;
    r.seconds = seconds_since(t0);
    return r;
  }

  // `todo` for each of `list` (its source, into its working copy `slot`) in one batch on the
  // engine's stream, waited for; their digests into `digest`.
  void run_batch(const std::vector<std::uint32_t>& list, const std::vector<action>& todo,
                 const std::vector<std::uint32_t>& slot, copy_path via,
                 std::vector<std::uint64_t>& digest) {
    if (list.empty()) return;
    std::vector<batch_job> jobs;
    jobs.reserve(list.size());
    for (std::uint32_t i : list) {
      const chunk_state& c = chunks[i];
      jobs.push_back(
          {c.source, c.entry->bytes, todo[i] == action::copy ? c.entry->copy_offset[slot[i]] : 0});
    }
    engine->enqueue_batch(jobs, via);
    const std::vector<std::uint64_t> d = engine->finish_batch();
    for (std::size_t k = 0; k < list.size(); ++k) digest[list[k]] = d[k];
  }

  // Makes `waiter` wait for the work enqueued on `s` so far.
  static void order_after(cudaStream_t s, cudaStream_t waiter) {
    gpm::event e;
    e.record(s);
    check_cuda(cudaStreamWaitEvent(waiter, e.get(), 0), "cudaStreamWaitEvent");
  }
};

// ---- checkpointer ----------------------------------------------------------------------------

namespace {

void validate_checkpoint_name(std::string_view name) {
  require(!name.empty() && name.size() <= fmt::kCheckpointNameMax &&
              name.find('\0') == std::string_view::npos,
          "checkpoint name \"" + std::string(name) + "\" must be 1 to " +
              std::to_string(fmt::kCheckpointNameMax) + " bytes");
}

std::unique_ptr<checkpointer::impl> attach(pool& p, std::string_view name,
                                           checkpoint_options options, std::uint64_t offset) {
  auto m = std::make_unique<checkpointer::impl>();
  m->claim = p.claim(checkpointer::impl::object_name(name), "a checkpointer");
  m->p = &p;
  m->name = std::string(name);
  m->options = std::move(options);
  m->records.object = p.host_ptr<char>(offset);
  m->records.header = reinterpret_cast<const fmt::header*>(m->records.object);
  m->records.who = m->who();
  m->records.object_name = checkpointer::impl::object_name(name);
  return m;
}

void finish_attach(checkpointer::impl& m) {
  m.engine.emplace(*m.p, m.records.max_chunks(), m.options.path);
}

}  // namespace

checkpointer checkpointer::create(pool& p, std::string_view name, checkpoint_options options) {
  validate_checkpoint_name(name);
  require(options.max_chunks >= 1 && options.max_chunks <= fmt::kMaxChunksLimit,
          "checkpoint_options::max_chunks must be 1 to " + std::to_string(fmt::kMaxChunksLimit));
  const std::string object = impl::object_name(name);
  if (p.find(object)) {
    throw_error(errc::already_exists, "pool " + p.path() + " already holds checkpoint \"" +
                                          std::string(name) + "\"; open it instead.");
  }
  const std::uint32_t n = options.max_chunks;
  // Zero-filled by the pool, so that both commit records read as "never written".
  const std::uint64_t offset = p.allocate(object, fmt::object_bytes(n), fmt::kAlign);
  fmt::header h{};
  h.common = format::make_header(fmt::kKind, fmt::object_bytes(n));
  h.max_chunks = n;
  h.table_offset = sizeof(fmt::header);
  h.records_offset = h.table_offset + std::uint64_t{n} * sizeof(fmt::chunk_entry);
  h.record_bytes = fmt::record_bytes(n);
  std::memcpy(h.name, name.data(), name.size());
  format::seal_header(&h);
  auto* dst = p.host_ptr<fmt::header>(offset);
  std::memcpy(dst, &h, sizeof h);
  persist_at("checkpoint.create.header", dst, sizeof h);
  // A crash before this point leaves an object whose header fails validation; open says so.
  auto m = attach(p, name, std::move(options), offset);
  m->records.load();
  m->load_table();
  finish_attach(*m);
  return checkpointer(std::move(m));
}

checkpointer checkpointer::open(pool& p, std::string_view name, checkpoint_options options) {
  validate_checkpoint_name(name);
  const std::string who = "checkpoint \"" + std::string(name) + "\" in " + p.path();
  const pool_object obj = p.open_object(impl::object_name(name), fmt::kKind, who);
  const auto* h = p.host_ptr<fmt::header>(obj.offset);
  if (h->max_chunks == 0 || h->max_chunks > fmt::kMaxChunksLimit ||
      h->table_offset != sizeof(fmt::header) ||
      h->records_offset !=
          h->table_offset + std::uint64_t{h->max_chunks} * sizeof(fmt::chunk_entry) ||
      h->record_bytes != fmt::record_bytes(h->max_chunks) ||
      h->common.object_bytes != fmt::object_bytes(h->max_chunks) ||
      std::string_view(h->name, strnlen(h->name, sizeof h->name)) != name) {
    throw_error(errc::corrupt, who +
                                   ": the header's sizes or name do not match its capacity and "
                                   "the checkpoint's name; the checkpoint is damaged.");
  }
  auto m = attach(p, name, std::move(options), obj.offset);
  m->records.load();
  m->load_table();
  finish_attach(*m);
  return checkpointer(std::move(m));
}

checkpointer checkpointer::open_or_create(pool& p, std::string_view name,
                                          checkpoint_options options) {
  return exists(p, name) ? open(p, name, std::move(options)) : create(p, name, std::move(options));
}

bool checkpointer::exists(const pool& p, std::string_view name) {
  return p.find(impl::object_name(name)).has_value();
}

checkpointer::checkpointer(std::unique_ptr<impl> m) : impl_(std::move(m)) {}
checkpointer::checkpointer(checkpointer&&) noexcept = default;
checkpointer& checkpointer::operator=(checkpointer&&) noexcept = default;
checkpointer::~checkpointer() = default;

checkpointer::impl& checkpointer::live() const {
  if (!impl_) throw_error(errc::invalid_argument, "the checkpointer is closed");
  return *impl_;
}

void checkpointer::close() {
  if (impl_) impl_->wait_pending();
  impl_.reset();
}

const std::string& checkpointer::name() const { return live().name; }

void checkpointer::add(std::string_view name, void* device_ptr, std::uint64_t bytes,
                       std::uint32_t group, std::uint64_t type_tag) {
  impl& m = live();
  const auto lock = m.exclusive();
  require(!name.empty() && name.size() <= fmt::kChunkNameMax &&
              name.find('\0') == std::string_view::npos,
          "chunk name \"" + std::string(name) + "\" must be 1 to " +
              std::to_string(fmt::kChunkNameMax) + " bytes");
  require(bytes > 0, "chunk \"" + std::string(name) + "\": a chunk needs at least one byte");
  require(device_ptr != nullptr && reinterpret_cast<std::uintptr_t>(device_ptr) % 8 == 0,
          "chunk \"" + std::string(name) +
              "\": the GPU buffer must be non-null and 8-byte "
              "aligned (cudaMalloc gives 256)");
  if (const auto i = m.find_chunk(name)) {
    const fmt::chunk_entry& e = *m.chunks[*i].entry;
    if (e.bytes != bytes || e.type_tag != type_tag || e.group != group) {
      throw_error(errc::invalid_argument,
                  m.who() + ": chunk \"" + std::string(name) + "\" was registered with " +
                      std::to_string(e.bytes) + " bytes, type tag " + std::to_string(e.type_tag) +
                      ", group " + std::to_string(e.group) + "; now " + std::to_string(bytes) +
                      " bytes, type tag " + std::to_string(type_tag) + ", group " +
                      std::to_string(group) + ". Register the buffer it was checkpointed from.");
    }
    m.chunks[*i].device = device_ptr;
    return;
  }
  std::uint32_t index = 0;
  while (index < m.records.max_chunks() && m.chunks[index].entry != nullptr) ++index;
  if (index == m.records.max_chunks()) {
    throw_error(errc::out_of_memory,
                m.who() + " holds its maximum of " + std::to_string(m.records.max_chunks()) +
                    " chunks; create it with a larger checkpoint_options::max_chunks.");
  }
  // The copies first (each crash-atomic; a crash leaves them for the next add to find), then
  // the entry, which makes the chunk exist.
  fmt::chunk_entry e{};
  std::memcpy(e.name, name.data(), name.size());
  e.bytes = bytes;
  e.type_tag = type_tag;
  e.group = group;
  e.index = index;
  e.used = 1;
  for (int s = 0; s < 2; ++s) {
    const std::string copy = m.copy_name(index, s);
    if (auto old = m.p->find(copy); old && old->bytes != bytes) m.p->free(copy);
    const auto found = m.p->find(copy);
    e.copy_offset[s] = found ? found->offset : m.p->allocate(copy, bytes, 4096);
  }
  crash_point("checkpoint.add.copies_allocated");
  e.checksum = entry_checksum(e);
  fmt::chunk_entry& slot = m.records.table()[index];
  std::memcpy(&slot, &e, sizeof e);
  persist_at("checkpoint.add.entry", &slot, sizeof slot);
  // A torn earlier registration left nothing committed.
  m.records.current[index] = fmt::record_entry{};
  chunk_state& c = m.chunks[index];
  c.entry = &slot;
  c.device = device_ptr;
  c.prediction = not_redundant;
}

void checkpointer::precopy(std::string_view name, cudaStream_t after) {
  impl& m = live();
  const auto lock = m.exclusive();
  if (!m.options.honour_precopy) return;
  const std::uint32_t i = m.index_named(name);
  chunk_state& c = m.chunks[i];
  require(c.device != nullptr, m.who() + ": chunk \"" + std::string(name) +
                                   "\" has no GPU buffer in this process; add() it first.");
  if (c.precopy) return;  // already started since the last checkpoint
  if (!c.stream) c.stream.emplace(true);
  m.order_after(after, *c.stream);
  c.source = c.device;
  const bool digest_first = m.options.eliminate_redundant &&
                            m.records.current[i].written_seq != 0 &&
                            c.prediction <= likely_redundant;
  c.precopy = digest_first ? action::digest_first : action::copy;
  c.precopy_slot = m.working_slot(i);
  m.enqueue(*c.precopy, i, c.precopy_slot, m.engine->effective_path());
}

checkpoint_result checkpointer::checkpoint(std::uint32_t group, cudaStream_t stream) {
  impl& m = live();
  const auto t0 = clock::now();
  const auto lock = m.exclusive();
  const std::vector<std::uint32_t> members = m.attached_group(group, "checkpointing");
  for (std::uint32_t i : members) m.chunks[i].source = m.chunks[i].device;
  m.order_after(stream, m.engine->stream());
  return m.run(group, members, t0);
}

pending_checkpoint checkpointer::checkpoint_async(std::uint32_t group, cudaStream_t stream) {
  impl& m = live();
  const auto t0 = clock::now();
  const auto lock = m.exclusive();
  const std::vector<std::uint32_t> members = m.attached_group(group, "checkpointing");
  std::vector<batch_job> capture;
  for (std::uint32_t i : members) {
    chunk_state& c = m.chunks[i];
    if (c.precopy) {
      // The application promised not to change it: read in place, and later work on `stream`
      // waits for its pre-copy.
      c.source = c.device;
      m.order_after(*c.stream, stream);
      continue;
    }
    if (c.shadow.size() != c.entry->bytes) c.shadow = device_buffer<unsigned char>(c.entry->bytes);
    c.source = c.shadow.data();
    capture.push_back({c.device, c.entry->bytes, 0, c.shadow.data()});
  }
  if (!capture.empty()) {
    // The capture: one copy kernel at HBM speed on the engine's stream, where the checkpoint
    // follows; later work on `stream` waits for it.
    m.order_after(stream, m.engine->stream());
    m.engine->enqueue_batch(capture, copy_path::gpu_stores);
    m.order_after(m.engine->stream(), stream);
  }
  impl* self = &m;
  // CUDA's current device is per thread, and a new thread's is device 0: the background task
  // runs on the caller's, where the chunks' streams and the engine's buffers live (rank r of a
  // job on GPU r).
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  m.pending = std::async(std::launch::async, [self, group, members, t0, device] {
                check_cuda(cudaSetDevice(device), "cudaSetDevice");
                std::lock_guard inner(self->mutex);
                return self->run(group, members, t0);
              }).share();
  // The background task takes the mutex once this call releases it.
  return pending_checkpoint(m.pending);
}

restore_result checkpointer::restore(std::uint32_t group, cudaStream_t stream) {
  impl& m = live();
  const auto t0 = clock::now();
  const auto lock = m.exclusive();
  const std::vector<std::uint32_t> members = m.attached_group(group, "restoring");
  restore_result r;
  r.chunks = static_cast<std::uint32_t>(members.size());
  for (std::uint32_t i : members) {
    if (m.records.current[i].written_seq == 0) {
      throw_error(errc::not_found, m.who() + ": chunk \"" + m.chunks[i].entry->name +
                                       "\" of group " + std::to_string(group) +
                                       " has never been checkpointed; nothing to restore" +
                                       " (call checkpoint() first, or start from initial values).");
    }
  }
  // Restore overwrites the buffers: work already enqueued on `stream` must finish first, and so
  // must a pre-copy reading them.
  m.order_after(stream, m.engine->stream());
  for (std::uint32_t i : members) {
    if (m.chunks[i].precopy) m.chunks[i].stream->synchronize();
  }
  // Copies each of `list` from its copy in `slot` into its buffer and checks it, in one batch:
  // the chunks whose digest is not `expected`'s.
  auto load = [&](const std::vector<std::uint32_t>& list, auto&& slot_of, auto&& expected) {
    std::vector<batch_job> jobs;
    for (std::uint32_t i : list) {
      chunk_state& c = m.chunks[i];
      check_cuda(cudaMemcpyAsync(c.device, m.copy_host(i, slot_of(i)), c.entry->bytes,
                                 cudaMemcpyHostToDevice, m.engine->stream()),
                 "cudaMemcpyAsync (restore)");
      c.source = c.device;
      jobs.push_back({c.device, c.entry->bytes});
    }
    m.engine->enqueue_batch(jobs, copy_path::dma);
    const std::vector<std::uint64_t> digest = m.engine->finish_batch();
    std::vector<std::uint32_t> failed;
    for (std::size_t k = 0; k < list.size(); ++k) {
      if (digest[k] != expected(list[k])) failed.push_back(list[k]);
    }
    return failed;
  };
  const fmt::record_entry* older = m.records.previous_valid ? m.records.previous.data() : nullptr;
  // The other copy holds an older state of a chunk if the previous record vouches for it.
  auto has_older = [&](std::uint32_t i) {
    return older != nullptr && older[i].written_seq != 0 &&
           older[i].slot != m.records.current[i].slot;
  };
  for (std::uint32_t i : members) {
    r.bytes += m.chunks[i].entry->bytes;
    r.seq = std::max(r.seq, m.records.current[i].confirmed_seq);
  }
  const std::vector<std::uint32_t> failed = load(
      members, [&](std::uint32_t i) { return m.records.current[i].slot; },
      [&](std::uint32_t i) { return m.records.current[i].digest; });
  std::vector<std::uint32_t> repairable;
  for (std::uint32_t i : failed) {
    if (has_older(i)) repairable.push_back(i);
  }
  const std::vector<std::uint32_t> unrepaired =
      repairable.empty() ? std::vector<std::uint32_t>{}
                         : load(
                               repairable, [&](std::uint32_t i) { return older[i].slot; },
                               [&](std::uint32_t i) { return older[i].digest; });
  for (std::uint32_t i : failed) {
    const fmt::record_entry& e = m.records.current[i];
    std::string what = "chunk \"" + std::string(m.chunks[i].entry->name) +
                       "\": its copy from checkpoint " + std::to_string(e.written_seq) +
                       " fails its checksum";
    if (has_older(i)) {
      if (std::find(unrepaired.begin(), unrepaired.end(), i) == unrepaired.end()) {
        what +=
            "; restored its older copy, from checkpoint " + std::to_string(older[i].written_seq);
        m.notice(m.who() + ": " + what);
        r.repaired.push_back(what);
        continue;
      }
      what += ", and so does its older copy";
    } else {
      what += ", and it has no valid older copy";
    }
    throw_error(errc::corrupt, m.who() + ": " + what +
                                   ". The media is damaged; restore the pool from its snapshot "
                                   "(gpm::pool::restore) or start over.");
  }
  // Work enqueued later on `stream` sees the restored buffers (the batches have completed). A
  // pre-copy of the buffers' previous contents no longer describes them.
  for (std::uint32_t i : members) m.chunks[i].precopy.reset();
  r.seconds = seconds_since(t0);
  return r;
}

std::uint64_t checkpointer::last_checkpoint(std::uint32_t group) const {
  impl& m = live();
  const auto lock = m.exclusive();
  std::uint64_t last = 0;
  bool first = true;
  for (std::uint32_t i : m.group_members(group)) {
    last = first ? m.records.current[i].confirmed_seq
                 : std::min(last, m.records.current[i].confirmed_seq);
    first = false;
  }
  return last;
}

std::vector<chunk_info> checkpointer::chunks() const {
  impl& m = live();
  const auto lock = m.exclusive();
  std::vector<chunk_info> out;
  for (std::uint32_t i = 0; i < m.chunks.size(); ++i) {
    const chunk_state& c = m.chunks[i];
    if (c.entry == nullptr) continue;
    out.push_back({c.entry->name, c.entry->bytes, c.entry->type_tag, c.entry->group,
                   m.records.current[i].confirmed_seq, c.device != nullptr});
  }
  return out;
}

copy_path checkpointer::chosen_path() const { return live().engine->path(); }

snapshot_result checkpointer::snapshot() {
  impl& m = live();
  const auto lock = m.exclusive();
  return m.p->snapshot();
}

}  // namespace gpm
