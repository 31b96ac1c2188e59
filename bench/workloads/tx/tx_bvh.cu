// gpmbench workloads tx_bvh_1 and tx_bvh_2: the Helper Warps paper's BVH benchmark (TPDS'20
// §6.3, after Karras, HPG'12) over seeded random triangles (100,000 and 187,854, the sizes of the
// paper's meshes; the meshes themselves are not public, docs/workloads/tx.md). One repeat is two
// kernels of transactions on a gpm::tx_heap that holds the tree: the build (B: each internal node
// finds its range of the sorted Morton codes and its split, and links its two children, no
// conflicts) and the reduce (R: a thread per leaf walks up; at each node the first arrival sets
// the node's flag and stops, the second computes the node's bounding box from its children's and
// goes on, so every node is reduced exactly once).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <gpm/platform/hash.hpp>

#include "gpmbench/resources.hpp"
#include "workloads/tx/tx_apps.hpp"

namespace gpmbench::tx {

namespace {

constexpr std::uint32_t kNone = 0xffffffffu;      // no parent (the root), no child yet
constexpr std::uint32_t kUnsetBox = 0x7fc00000u;  // a NaN: equal to no computed bound

struct box {
  float lo[3];
  float hi[3];
};
constexpr std::uint32_t kBoxWords = sizeof(box) / 4;

GPM_HOST_DEVICE inline box unite(const box& a, const box& b) {
  box u;
  for (int k = 0; k < 3; ++k) {
    u.lo[k] = fminf(a.lo[k], b.lo[k]);
    u.hi[k] = fmaxf(a.hi[k], b.hi[k]);
  }
  return u;
}

// The tree in the heap: n leaves and n - 1 internal nodes; internal nodes are 0 .. n - 2 (the
// root is 0), leaf j (the j-th triangle in Morton order) is node n - 1 + j.
struct tree_layout {
  std::uint32_t n;

  GPM_HOST_DEVICE std::uint32_t nodes() const { return 2 * n - 1; }
  GPM_HOST_DEVICE std::uint32_t leaf(std::uint64_t j) const {
    return n - 1 + static_cast<std::uint32_t>(j);
  }
  GPM_HOST_DEVICE std::uint64_t parent(std::uint32_t node) const { return node; }
  GPM_HOST_DEVICE std::uint64_t left(std::uint32_t i) const { return nodes() + i; }
  GPM_HOST_DEVICE std::uint64_t right(std::uint32_t i) const { return nodes() + (n - 1) + i; }
  // 0: unvisited, 1: one child reduced, 2: reduced.
  GPM_HOST_DEVICE std::uint64_t flag(std::uint32_t i) const { return nodes() + 2 * (n - 1) + i; }
  GPM_HOST_DEVICE std::uint64_t bounds(std::uint32_t node) const {
    return nodes() + 3 * std::uint64_t{n - 1} + std::uint64_t{kBoxWords} * node;
  }
  GPM_HOST_DEVICE std::uint64_t words() const { return bounds(nodes()); }
};

// Length of the common prefix of sorted keys i and j (keys are Morton code << 32 | triangle, so
// all distinct); -1 outside the array (Karras's delta).
__device__ inline int common_prefix(const std::uint64_t* keys, std::int64_t n, std::int64_t i,
                                    std::int64_t j) {
  if (j < 0 || j >= n) return -1;
  return __clzll(static_cast<long long>(keys[i] ^ keys[j]));
}

// B: internal node i's children, from the range of keys it covers and the split in it.
struct build {
  tree_layout tree;
  const std::uint64_t* keys;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    const std::int64_t n = tree.n;
    std::uint64_t failed = 0;
    for (std::uint64_t node : tx.workers(n - 1)) {
      const auto i = static_cast<std::int64_t>(node);
      const int d = common_prefix(keys, n, i, i + 1) > common_prefix(keys, n, i, i - 1) ? 1 : -1;
      const int shortest = common_prefix(keys, n, i, i - d);
      std::int64_t reach = 2;
      while (common_prefix(keys, n, i, i + reach * d) > shortest) reach *= 2;
      std::int64_t len = 0;
      for (std::int64_t t = reach / 2; t >= 1; t /= 2) {
        if (common_prefix(keys, n, i, i + (len + t) * d) > shortest) len += t;
      }
      const std::int64_t j = i + len * d;
      const int node_prefix = common_prefix(keys, n, i, j);
      std::int64_t split = 0;
      for (std::int64_t t = len; t > 1;) {
        t = (t + 1) / 2;
        if (common_prefix(keys, n, i, i + (split + t) * d) > node_prefix) split += t;
      }
      const std::int64_t gamma = i + split * d + (d < 0 ? -1 : 0);
      const auto l = static_cast<std::uint32_t>(std::min(i, j) == gamma ? tree.leaf(gamma) : gamma);
      const auto r = static_cast<std::uint32_t>(std::max(i, j) == gamma + 1 ? tree.leaf(gamma + 1)
                                                                            : gamma + 1);
      const auto me = static_cast<std::uint32_t>(i);
      const gpm::tx_result res = tx.run([&](auto& t) {
        t.write(tree.left(me), l);
        t.write(tree.right(me), r);
        t.write(tree.parent(l), me);
        t.write(tree.parent(r), me);
      });
      failed += res.status != gpm::tx_status::committed;
    }
    count_failures(failures, failed);
  }
};

// R: a thread per leaf walks towards the root, one transaction per node it reaches.
struct reduce {
  tree_layout tree;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t j : tx.workers(tree.n)) {
      std::uint32_t child = tree.leaf(j);
      for (bool climbing = true; climbing;) {
        std::uint32_t at = kNone;
        const gpm::tx_result res = tx.run([&](auto& t) {
          at = t.read(tree.parent(child));
          if (t.read(tree.flag(at)) == 0) {  // the first child here: the other one finishes it
            t.write(tree.flag(at), 1);
            climbing = false;
            return;
          }
          const box a = t.template read_as<box>(tree.bounds(t.read(tree.left(at))));
          const box b = t.template read_as<box>(tree.bounds(t.read(tree.right(at))));
          t.write_as(tree.bounds(at), unite(a, b));
          t.write(tree.flag(at), 2);
          climbing = at != 0;
        });
        if (res.status != gpm::tx_status::committed) {
          ++failed;
          break;
        }
        child = at;
      }
    }
    count_failures(failures, failed);
  }
};

// Spreads the low 10 bits of v to every third bit.
std::uint32_t spread_bits(std::uint32_t v) {
  v = (v * 0x00010001u) & 0xFF0000FFu;
  v = (v * 0x00000101u) & 0x0F00F00Fu;
  v = (v * 0x00000011u) & 0xC30C30C3u;
  v = (v * 0x00000005u) & 0x49249249u;
  return v;
}

float unit_float(std::uint64_t h) { return static_cast<float>(h >> 40) * 0x1p-24f; }

bool same_box(const box& a, const box& b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class bvh final : public application {
 public:
  explicit bvh(std::uint64_t triangles) : tree_{static_cast<std::uint32_t>(triangles)} {
    // Seeded random triangles: a centroid in the unit cube, corners within 0.005 of it.
    const std::uint32_t n = tree_.n;
    std::vector<box> triangle(n);
    std::vector<std::uint64_t> keys(n);
    for (std::uint32_t k = 0; k < 3; ++k) scene_.lo[k] = 1, scene_.hi[k] = 0;
    for (std::uint32_t t = 0; t < n; ++t) {
      float c[3];
      for (std::uint32_t k = 0; k < 3; ++k) c[k] = unit_float(gpm::mix64(0x425648ull + 16 * t + k));
      box b{{c[0], c[1], c[2]}, {c[0], c[1], c[2]}};
      for (std::uint32_t corner = 0; corner < 3; ++corner) {
        for (std::uint32_t k = 0; k < 3; ++k) {
          const float v =
              c[k] +
              0.01f * (unit_float(gpm::mix64(0x425648ull + 16 * t + 3 + 3 * corner + k)) - 0.5f);
          b.lo[k] = std::min(b.lo[k], v);
          b.hi[k] = std::max(b.hi[k], v);
        }
      }
      triangle[t] = b;
      scene_ = unite(scene_, b);
      std::uint32_t code = 0;
      for (std::uint32_t k = 0; k < 3; ++k) {
        const auto q = static_cast<std::uint32_t>(std::min(1023.0f, c[k] * 1024.0f));
        code |= spread_bits(q) << (2 - k);
      }
      keys[t] = std::uint64_t{code} << 32 | t;
    }
    std::sort(keys.begin(), keys.end());
    keys_ = gpm::device_buffer<std::uint64_t>(n);
    keys_.copy_from_host(keys.data(), n);
    // The initial image: no links, no flags, internal boxes unset, leaf boxes in Morton order.
    initial_.assign(tree_.words(), 0);
    std::fill(initial_.begin(), initial_.begin() + tree_.flag(0), kNone);
    for (std::uint32_t node = 0; node < tree_.nodes(); ++node) {
      if (node < n - 1) {
        std::fill_n(initial_.begin() + tree_.bounds(node), kBoxWords, kUnsetBox);
      } else {
        const box& b = triangle[keys[node - (n - 1)] & 0xffffffffu];
        std::memcpy(&initial_[tree_.bounds(node)], &b, sizeof b);
      }
    }
  }

  std::uint64_t words() const override { return tree_.words(); }
  // B: one per internal node; R: two arrivals at every internal node.
  std::uint64_t transactions() const override { return 3 * std::uint64_t{tree_.n - 1}; }
  std::uint32_t record_words() const override { return kBoxWords + 1; }
  named_counts sizes() const override { return {{"triangles", tree_.n}}; }
  std::vector<std::string> phases() const override { return {"build", "reduce"}; }
  void reset(gpm::tx_heap& heap) override { heap.store(0, initial_.data(), initial_.size()); }
  std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t s) override {
    const double b = failures_.timed_launch(
        heap, launch, s, build{tree_, keys_.data(), failures_.device()}, "BVH build");
    const double r =
        failures_.timed_launch(heap, launch, s, reduce{tree_, failures_.device()}, "BVH reduce");
    return {b, r};
  }
  // Complete: a tree whose every node is reached once from the root, each internal box the union
  // of its children's (so it contains them), the root's the scene's. After a recovery, the commits
  // of a prefix: links come in whole nodes and a reduced node's children are leaves or reduced.
  void check(const gpm::tx_heap& heap, bool complete) override {
    std::vector<std::uint32_t> w(tree_.words());
    heap.load(0, w.data(), w.size());
    const auto bounds = [&](std::uint32_t node) {
      box b;
      std::memcpy(&b, &w[tree_.bounds(node)], sizeof b);
      return b;
    };
    const std::uint32_t n = tree_.n;
    const auto fail = [](std::uint32_t node, const std::string& what) {
      check_failed("BVH: internal node " + std::to_string(node) + " " + what);
    };
    for (std::uint32_t i = 0; i + 1 < n; ++i) {
      const std::uint32_t l = w[tree_.left(i)], r = w[tree_.right(i)], f = w[tree_.flag(i)];
      if (l == kNone && r == kNone && !complete) {
        if (f != 0) fail(i, "was reduced before it was built");
        continue;
      }
      if (l >= tree_.nodes() || r >= tree_.nodes() || w[tree_.parent(l)] != i ||
          w[tree_.parent(r)] != i) {
        fail(i, "is not linked both ways with two children");
      }
      const auto reduced = [&](std::uint32_t c) { return c >= n - 1 || w[tree_.flag(c)] == 2; };
      if (f > 2 || (complete && f != 2)) fail(i, "has flag " + std::to_string(f));
      if (f == 2 &&
          (!reduced(l) || !reduced(r) || !same_box(bounds(i), unite(bounds(l), bounds(r))))) {
        fail(i, "does not hold the union of its reduced children's boxes");
      }
    }
    if (!complete) return;
    if (w[tree_.parent(0)] != kNone) check_failed("BVH: the root has a parent");
    if (!same_box(bounds(0), scene_)) check_failed("BVH: the root's box is not the scene's");
    std::vector<bool> seen(tree_.nodes(), false);
    std::vector<std::uint32_t> stack{0};
    std::uint64_t visited = 0;
    while (!stack.empty()) {
      const std::uint32_t node = stack.back();
      stack.pop_back();
      if (seen[node]) check_failed("BVH: node " + std::to_string(node) + " is reached twice");
      seen[node] = true;
      ++visited;
      if (node < n - 1) stack.insert(stack.end(), {w[tree_.left(node)], w[tree_.right(node)]});
    }
    if (visited != tree_.nodes()) {
      check_failed("BVH: the root reaches " + std::to_string(visited) + " nodes, not " +
                   std::to_string(tree_.nodes()));
    }
  }

 private:
  tree_layout tree_;
  box scene_{};
  gpm::device_buffer<std::uint64_t> keys_;
  std::vector<std::uint32_t> initial_;
  failure_counter failures_;
};

}  // namespace

application_factory bvh_application(std::uint64_t triangles) {
  return [=](const mode_context& ctx) -> std::unique_ptr<application> {
    return std::make_unique<bvh>(scaled(ctx, triangles, 16, 256));
  };
}

}  // namespace gpmbench::tx

namespace gpmbench {

workload tx_bvh_1_workload() {
  return tx::paper_workload(
      "tx_bvh_1",
      "BVH 1: Karras build and bounding-box reduce over 100,000 seeded random "
      "triangles as transactions (TPDS'20 B1, R1)",
      tx::bvh_application(100'000));
}

workload tx_bvh_2_workload() {
  return tx::paper_workload(
      "tx_bvh_2",
      "BVH 2: Karras build and bounding-box reduce over 187,854 seeded random "
      "triangles as transactions (TPDS'20 B2, R2)",
      tx::bvh_application(187'854));
}

}  // namespace gpmbench
