// GPHash's resize and recovery: the members of gphash<Key>::impl (gphash.cu) that change the
// table's geometry or repair it after a crash. A resize adds a level on top and drains the bottom
// one into the levels above, each step committed in the double-buffered state record, so that a
// crash at any point leaves a state recovery can finish (FAST'25 §3.2.3, "Resizing", "Recovery");
// recovery clears slots a crash left INSERTING, finishes an interrupted resize, frees objects the
// state does not name and removes duplicate copies. Included by gphash.cu only, inside namespace
// gpm after impl's definition; never on its own.
#pragma once

// Returns the items found above already (duplicates an interrupted rehash left, now cleared).
template <class Key>
std::uint64_t gphash<Key>::impl::finish_resize() {
  const std::uint32_t L = config.level_count;
  const std::uint32_t drained = state.top - L;
  set_counter(1, 0);
  set_counter(2, 0);
  launch(rehash_kernel<Key>, blocks_for(level_slots(drained) * 32, 256), 256, 0, nullptr,
         view(L, false), view(L + 1, false), drained, counters.data() + 1);
  check_cuda(cudaDeviceSynchronize(), "GPHash rehash");
  const unsigned long long failed = read_counter(1);
  if (failed != 0) {
    throw_error(errc::out_of_memory,
                what() + ": " + std::to_string(failed) + " items of level " +
                    std::to_string(drained) +
                    " found no slot in the levels above it while "
                    "resizing; the table stays consistent (those items stay in the old level) "
                    "but cannot grow with this geometry: create it with more hash locations, "
                    "levels or slots per bucket");
  }
  crash_point("gphash.resize.rehashed");
  table_state s = state;
  s.resizing = 0;
  s.level_offset[drained] = 0;
  s.resizes += 1;
  commit(s);
  crash_point("gphash.resize.committed");
  free_stale_objects();
  return read_counter(2);
}

// Frees level and segment objects that the state no longer (or not yet) refers to: left by a
// crash between a pool allocation or free and the state write around it.
template <class Key>
void gphash<Key>::impl::free_stale_objects() {
  for (const pool_object& o : owner->objects()) {
    std::uint32_t n = 0;
    const table_part part = part_of(name, o, n);  // only the table's own objects
    if (part == table_part::none) continue;
    const bool used = part == table_part::level
                          ? state.level_offset[n] == o.offset
                          : n < state.segments && state.seg_offset[n] == o.offset;
    if (!used) owner->free(o.name);
  }
}

// The state record's numbers come from media: a level below 0 or a segment size whose byte
// count wraps around 64 bits is damage, not a small object.
template <class Key>
void gphash<Key>::impl::validate_objects() const {
  const std::uint32_t levels = config.level_count + (state.resizing ? 1 : 0);
  if (state.top + 1 < levels) {
    throw_error(errc::corrupt, what() + ": the state record's top level " +
                                   std::to_string(state.top) + " leaves no room for " +
                                   std::to_string(levels) +
                                   " levels: restore the pool from a snapshot");
  }
  for (std::uint32_t d = 0; d < levels; ++d) {
    const std::uint32_t level = state.top - d;
    const auto o = owner->find(level_name(name, level));
    if (!o || o->offset != state.level_offset[level] ||
        o->bytes < level_slots(level) * slot_words() * 8) {
      throw_error(errc::corrupt, what() + ": level " + std::to_string(level) +
                                     " is missing or does not match the table's state record: "
                                     "restore the pool from a snapshot");
    }
  }
  for (std::uint32_t s = 0; s < state.segments; ++s) {
    const auto o = owner->find(segment_name(name, s));
    const std::optional<std::uint64_t> bytes = checked_mul(state.seg_cells[s], cell_bytes());
    if (!o || o->offset != state.seg_offset[s] || !bytes || o->bytes < *bytes) {
      throw_error(errc::corrupt, what() + ": value segment " + std::to_string(s) +
                                     " is missing or does not match the state record: restore "
                                     "the pool from a snapshot");
    }
  }
}

template <class Key>
void gphash<Key>::impl::grow() {
  const bool cached = cache != nullptr;
  if (cached) drop_cache();
  mirror.clear();  // the rehash moves items without it; rebuilt at the end
  const std::uint32_t top = state.top + 1;
  if (top > kMaxTop) {
    throw_error(errc::out_of_memory,
                what() + " cannot grow beyond 2^" + std::to_string(kMaxTop) + " top-level buckets");
  }
  if (state.segments >= kStateSegments) {
    throw_error(errc::out_of_memory, what() + " has no room for another value segment");
  }
  crash_point("gphash.resize.begin");
  const std::uint64_t slot_bytes = slot_words() * 8ull;
  const std::uint64_t level_off =
      owner->allocate(level_name(name, top), level_slots(top) * slot_bytes, 128, kTypeTag);
  const std::uint64_t cells = cells_for(level_slots(top)) - level_slots(top) / 2;
  const std::uint64_t seg_off =
      owner->allocate(segment_name(name, state.segments), cells * cell_bytes(), 128, kTypeTag);
  crash_point("gphash.resize.allocated");
  table_state s = state;
  s.top = top;
  s.resizing = 1;
  s.level_offset[top] = level_off;
  s.seg_offset[s.segments] = seg_off;
  s.seg_cells[s.segments] = cells;
  s.segments += 1;
  commit(s);
  crash_point("gphash.resize.started");
  // The rehash moves cells and never allocates; the allocator is rebuilt afterwards to cover
  // the new segment.
  finish_resize();
  rebuild_allocator(config.level_count);
  rebuild_gpu_words();
  if (cached) restart_cache();
}

template <class Key>
gphash_recovery gphash<Key>::impl::recover() {
  const auto t0 = std::chrono::steady_clock::now();
  const bool cached = cache != nullptr;  // the cache is rebuilt from the recovered table
  if (cached) drop_cache();
  mirror.clear();  // so is the fingerprint mirror: the repairs below change the pool's words
  gphash_recovery r;
  const std::uint32_t levels = config.level_count + (state.resizing ? 1 : 0);
  r.inserting_cleared = scan<scan_op::clear_inserting>(levels);
  rebuild_allocator(levels);
  crash_point("gphash.recover.cleared");
  if (state.resizing) {
    r.resumed_duplicates = finish_resize();
    r.resize_resumed = true;
  }
  free_stale_objects();
  set_counter(1, 0);
  for (std::uint32_t d = 0; d < config.level_count; ++d) {
    const std::uint32_t level = state.top - d;
    launch(dedupe_kernel<Key>, blocks_for(level_slots(level) * 32, 256), 256, 0, nullptr,
           live_view(false), level, counters.data() + 1);
  }
  check_cuda(cudaDeviceSynchronize(), "GPHash recovery");
  r.duplicates_removed = read_counter(1) + r.resumed_duplicates;
  crash_point("gphash.recover.deduplicated");
  rebuild_allocator(config.level_count);
  r.items = scan<scan_op::count_items>(config.level_count);
  rebuild_gpu_words();
  if (cached) restart_cache();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  last = r;
  return r;
}
