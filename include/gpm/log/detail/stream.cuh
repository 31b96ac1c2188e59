// The one logging engine behind hcl_log and conv_log: a stream of 4-byte chunks with a tail word.
// Entries are stacked in a stream (newest last) and each ends with a trailer (size, checksum).
// The two logs differ only in where chunk k of a stream lives (the Layout): striped across
// 128-byte rows for HCL, packed for a conventional partition. Locking, geometry and fault
// reporting are the callers' business; this file must never take a lock or read blockIdx.
//
// Insert protocol (the paper's, §5.2): write the entry's chunks, persist them, then store and
// persist the tail. The tail is the sentinel: an entry past the tail does not exist, so a crash
// mid-insert leaves the log as it was. The checksum catches what the protocol cannot: media
// corruption, or a tail whose generation tag wrapped around. Each persist is a named persist site
// (listed in src/log/log_object.cu) that the crash-image checker can disable.
#pragma once

#include <cstdint>

#include <gpm/log/detail/format.hpp>
#include <gpm/log/log_status.cuh>
#include <gpm/platform/atomic.cuh>
#include <gpm/platform/persist.hpp>

namespace gpm::detail::log {

// HCL: chunk k of lane L of a warp sits in row k of the warp's region, at byte 4 * L, so the 32
// lanes writing their chunk k together fill one 128-byte line.
struct striped_layout {
  char* warp_base;
  std::uint32_t lane;

  GPM_HOST_DEVICE std::uint32_t* chunk(std::uint64_t k) const {
    return reinterpret_cast<std::uint32_t*>(warp_base + k * line_bytes + lane * chunk_bytes);
  }
  GPM_HOST_DEVICE void persist_chunks(const char* site, std::uint64_t first,
                                      std::uint64_t end) const {
    gpm::persist_at(site, warp_base + first * line_bytes, (end - first) * line_bytes);
  }
};

// Conventional log: a partition's chunks are contiguous.
struct packed_layout {
  std::uint32_t* base;

  GPM_HOST_DEVICE std::uint32_t* chunk(std::uint64_t k) const { return base + k; }
  GPM_HOST_DEVICE void persist_chunks(const char* site, std::uint64_t first,
                                      std::uint64_t end) const {
    gpm::persist_at(site, base + first, (end - first) * chunk_bytes);
  }
};

// The bytes of an entry: up to two ranges read as one (undo entries are a small record followed
// by the old bytes, which are read straight from the pool).
struct byte_source {
  const unsigned char* part[2] = {nullptr, nullptr};
  std::uint64_t bytes[2] = {0, 0};

  GPM_HOST_DEVICE std::uint64_t size() const { return bytes[0] + bytes[1]; }
  GPM_HOST_DEVICE std::uint32_t chunk(std::uint64_t k) const {
    const std::uint64_t pos = k * chunk_bytes;
    for (int p = 0; p < 2; ++p) {
      const std::uint64_t start = p == 0 ? 0 : bytes[0];
      if (pos >= start && pos + chunk_bytes <= start + bytes[p] &&
          reinterpret_cast<std::uintptr_t>(part[p] + (pos - start)) % chunk_bytes == 0) {
        return load_bytes_as<std::uint32_t>(part[p] + (pos - start));
      }
    }
    // A chunk that straddles the two parts, ends the entry, or is unaligned: byte by byte.
    std::uint32_t word = 0;
    for (std::uint64_t i = 0; i < chunk_bytes; ++i) {
      const std::uint64_t b = pos + i;
      std::uint32_t v = 0;
      if (b < bytes[0]) {
        v = part[0][b];
      } else if (b - bytes[0] < bytes[1]) {
        v = part[1][b - bytes[0]];
      }
      word |= v << (8 * i);
    }
    return word;
  }
};

// One stream's tail and the facts needed to validate its entries.
struct stream_ref {
  std::uint64_t* tail;
  std::uint64_t capacity;  // chunks
  std::uint64_t generation;
  std::uint64_t id;  // thread or partition index, folded into checksums
};

GPM_HOST_DEVICE inline std::uint64_t load_used(const stream_ref& s) {
  const std::uint64_t word =
      atomic_ref<std::uint64_t, pool_scope>(*s.tail).load(memory_order_relaxed);
  return tail_used(word, s.generation);
}

// Publishes the stream's new tail and persists it at the caller's persist site.
GPM_HOST_DEVICE inline void store_used(const stream_ref& s, std::uint64_t used, const char* site) {
  atomic_ref<std::uint64_t, pool_scope>(*s.tail).store(tail_word(s.generation, used),
                                                       memory_order_relaxed);
  gpm::persist_at(site, s.tail, sizeof(std::uint64_t));
}

template <class Layout, class Source>
GPM_HOST_DEVICE log_status append(const Layout& at, const stream_ref& s, const Source& src) {
  const std::uint64_t used = load_used(s);
  const std::uint64_t bytes = src.size();
  const std::uint64_t n = chunks_for(bytes);
  if (used > s.capacity) return log_status::corrupt;
  if (bytes > 0xffffffffull || n + trailer_chunks > s.capacity - used) return log_status::full;
  std::uint64_t h = entry_seed(s.generation, s.id, used, bytes);
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint32_t c = src.chunk(k);
    *at.chunk(used + k) = c;
    h = fold_chunk(h, c);
  }
  *at.chunk(used + n) = static_cast<std::uint32_t>(bytes);
  *at.chunk(used + n + 1) = static_cast<std::uint32_t>(h);
  *at.chunk(used + n + 2) = static_cast<std::uint32_t>(h >> 32);
  // The entry is durable before its tail.
  at.persist_chunks("log.append.entry", used, used + n + trailer_chunks);
  store_used(s, used + n + trailer_chunks, "log.append.tail");
  return log_status::ok;
}

// Where the entry that ends at chunk `end` begins, from its trailer (not yet checksummed).
struct entry {
  log_status status;
  std::uint64_t bytes;
  std::uint64_t begin;  // first payload chunk
};

template <class Layout>
GPM_HOST_DEVICE entry entry_ending_at(const Layout& at, const stream_ref& s, std::uint64_t end) {
  if (end == 0) return {log_status::empty, 0, 0};
  if (end < trailer_chunks || end > s.capacity) return {log_status::corrupt, 0, 0};
  const std::uint64_t bytes = *at.chunk(end - trailer_chunks);
  const std::uint64_t n = chunks_for(bytes);
  if (n + trailer_chunks > end) return {log_status::corrupt, 0, 0};
  return {log_status::ok, bytes, end - trailer_chunks - n};
}

// Calls f(k, chunk) for the entry's payload chunks in order and checks its checksum.
template <class Layout, class F>
GPM_HOST_DEVICE log_status walk(const Layout& at, const stream_ref& s, const entry& e, F&& f) {
  const std::uint64_t n = chunks_for(e.bytes);
  std::uint64_t h = entry_seed(s.generation, s.id, e.begin, e.bytes);
  for (std::uint64_t k = 0; k < n; ++k) {
    const std::uint32_t c = *at.chunk(e.begin + k);
    f(k, c);
    h = fold_chunk(h, c);
  }
  const std::uint64_t stored = static_cast<std::uint64_t>(*at.chunk(e.begin + n + 1)) |
                               static_cast<std::uint64_t>(*at.chunk(e.begin + n + 2)) << 32;
  return stored == h ? log_status::ok : log_status::corrupt;
}

// Copies the checksummed payload bytes [0, bytes) of an entry to dst; dst is zeroed if the
// entry is corrupt, so a torn or damaged entry is never handed out.
template <class Layout>
GPM_HOST_DEVICE log_status copy_entry(const Layout& at, const stream_ref& s, const entry& e,
                                      void* dst) {
  auto* out = static_cast<unsigned char*>(dst);
  const std::uint64_t bytes = e.bytes;
  const log_status st = walk(at, s, e, [&](std::uint64_t k, std::uint32_t c) {
    for (std::uint64_t i = 0; i < chunk_bytes && k * chunk_bytes + i < bytes; ++i) {
      out[k * chunk_bytes + i] = static_cast<unsigned char>(c >> (8 * i));
    }
  });
  if (st != log_status::ok) {
    for (std::uint64_t i = 0; i < bytes; ++i) out[i] = 0;
  }
  return st;
}

template <class Layout>
GPM_HOST_DEVICE log_status read_newest(const Layout& at, const stream_ref& s, void* dst,
                                       std::uint64_t bytes) {
  const entry e = entry_ending_at(at, s, load_used(s));
  if (e.status != log_status::ok) return e.status;
  if (e.bytes != bytes) return log_status::size_mismatch;
  return copy_entry(at, s, e, dst);
}

template <class Layout>
GPM_HOST_DEVICE log_status newest_size(const Layout& at, const stream_ref& s,
                                       std::uint32_t& bytes) {
  const entry e = entry_ending_at(at, s, load_used(s));
  bytes = static_cast<std::uint32_t>(e.bytes);
  return e.status;
}

// Drops the newest entry. The caller's size must match the recorded one: that both catches a
// caller out of step with its log and makes the new tail independent of a damaged size word.
template <class Layout>
GPM_HOST_DEVICE log_status remove_newest(const Layout& at, const stream_ref& s,
                                         std::uint64_t bytes) {
  const entry e = entry_ending_at(at, s, load_used(s));
  if (e.status != log_status::ok) return e.status;
  if (e.bytes != bytes) return log_status::size_mismatch;
  store_used(s, e.begin, "log.remove.tail");
  return log_status::ok;
}

GPM_HOST_DEVICE inline void clear_stream(const stream_ref& s) {
  store_used(s, 0, "log.clear_stream.tail");
}

}  // namespace gpm::detail::log
