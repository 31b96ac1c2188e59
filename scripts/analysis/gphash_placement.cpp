// GPHash's placement rule simulated on the host: random keys inserted one at a time into the
// default geometry (2 levels, the lower half the size of the top, 2 hash locations, 8-slot
// buckets; bucket indices as the engine's level_bucket takes them), until the first insert that
// finds all 32 candidate slots full; prints the load factor then. With --moves 1, such an insert
// first tries one displacement: a key in one of its 4 candidate buckets moves to one of that
// key's own other candidate buckets with room, and the insert takes its slot. No concurrency, no
// persistence: it answers what placement and displacement can reach (docs/gphash.md, "Load
// factor"), not what the GPU does.
//   g++ -O2 -std=c++20 -Iinclude scripts/analysis/gphash_placement.cpp -o gphash_placement
//   ./gphash_placement <log2 top buckets> [--moves 0|1]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gpm/platform/hash.hpp>

namespace {

constexpr int kSlots = 8;
constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

struct level {
  std::uint64_t mask;
  std::vector<std::uint64_t> keys;  // kSlots per bucket
  std::vector<std::uint8_t> used;
  explicit level(std::uint64_t buckets)
      : mask(buckets - 1), keys(buckets * kSlots), used(buckets) {}
  bool full(std::uint64_t b) const { return used[b] == kSlots; }
  void put(std::uint64_t b, std::uint64_t key) { keys[b * kSlots + used[b]++] = key; }
};

struct table {
  level top, bottom;
  explicit table(std::uint64_t top_buckets) : top(top_buckets), bottom(top_buckets / 2) {}
  level& at(int lv) { return lv == 0 ? top : bottom; }
  // The bucket of hash location j at level lv (0: top), as the engine's level_bucket.
  std::uint64_t bucket(std::uint64_t key, int j, int lv) {
    const std::uint64_t h = gpm::mix64(key * kGolden + 12345);
    return gpm::mix64(h + (j + 1) * kGolden) & at(lv).mask;
  }
  // The engine's rule: the hash location whose buckets hold fewer keys, its top level first.
  bool place(std::uint64_t key) {
    int best = -1, best_load = 1 << 30;
    for (int j = 0; j < 2; ++j) {
      const std::uint64_t t = bucket(key, j, 0), b = bucket(key, j, 1);
      if (top.full(t) && bottom.full(b)) continue;
      const int load = top.used[t] + bottom.used[b];
      if (load < best_load) best_load = load, best = j;
    }
    if (best < 0) return false;
    const std::uint64_t t = bucket(key, best, 0);
    if (!top.full(t)) {
      top.put(t, key);
    } else {
      bottom.put(bucket(key, best, 1), key);
    }
    return true;
  }
  bool displace_for(std::uint64_t key) {
    for (int j = 0; j < 2; ++j) {
      for (int lv = 0; lv < 2; ++lv) {
        const std::uint64_t from = bucket(key, j, lv);
        for (int s = 0; s < kSlots; ++s) {
          std::uint64_t& resident = at(lv).keys[from * kSlots + s];
          for (int i = 0; i < 2; ++i) {
            for (int l2 = 0; l2 < 2; ++l2) {
              const std::uint64_t to = bucket(resident, i, l2);
              if ((l2 == lv && to == from) || at(l2).full(to)) continue;
              at(l2).put(to, resident);
              resident = key;
              return true;
            }
          }
        }
      }
    }
    return false;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <log2 top buckets> [--moves 0|1]\n", argv[0]);
    return 2;
  }
  const int bits = std::atoi(argv[1]);
  const bool moves = argc >= 4 && std::strcmp(argv[2], "--moves") == 0 && std::atoi(argv[3]) != 0;
  if (bits < 2 || bits > 30) {
    std::fprintf(stderr, "log2 top buckets must be 2..30\n");
    return 2;
  }
  table t(1ull << bits);
  const std::uint64_t slots = (t.top.used.size() + t.bottom.used.size()) * kSlots;
  std::uint64_t stored = 0, displaced = 0;
  for (std::uint64_t key = 1;; ++key) {
    if (t.place(key)) {
      ++stored;
    } else if (moves && t.displace_for(key)) {
      ++stored;
      ++displaced;
    } else {
      break;
    }
  }
  std::printf("top buckets 2^%d, moves %d: load factor %.4f at the first full insert (%llu keys, "
              "%llu displaced)\n",
              bits, moves ? 1 : 0, static_cast<double>(stored) / static_cast<double>(slots),
              static_cast<unsigned long long>(stored), static_cast<unsigned long long>(displaced));
  return 0;
}
