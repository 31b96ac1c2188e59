// Road-like graph generation and the DIMACS `.gr` parser (see graph.hpp).
#include "graph.hpp"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <utility>

#include <gpm/platform/checksum.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/hash.hpp>

namespace gpmbench::native {

namespace {

constexpr std::uint64_t kMaxNodes = 1ull << 32;
constexpr std::uint64_t kRoadReach = 8;  // extra roads join intersections this close: road-like

// Builds CSR from arc (tail, head) pairs by counting, keeping each node's arcs in input order.
csr_graph from_arcs(std::uint64_t nodes,
                    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& arcs) {
  csr_graph g;
  g.nodes = nodes;
  g.row.assign(nodes + 1, 0);
  for (const auto& [t, h] : arcs) ++g.row[t + 1];
  for (std::uint64_t v = 0; v < nodes; ++v) g.row[v + 1] += g.row[v];
  g.col.resize(arcs.size());
  std::vector<std::uint64_t> next(g.row.begin(), g.row.end() - 1);
  for (const auto& [t, h] : arcs) g.col[next[t]++] = h;
  return g;
}

}  // namespace

std::uint64_t csr_graph::checksum() const {
  return gpm::checksum64(col.data(), col.size() * sizeof(col[0]),
                         gpm::checksum64(row.data(), row.size() * sizeof(row[0]), nodes));
}

csr_graph road_grid(std::uint64_t width, std::uint64_t height, std::uint64_t extra_roads,
                    std::uint64_t seed) {
  gpm::require(width > 0 && height > 0, "road_grid: width and height must be at least 1");
  gpm::require(width <= kMaxNodes / height,
               "road_grid: more than 2^32 intersections; use a smaller grid");
  const std::uint64_t n = width * height;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> arcs;
  arcs.reserve(4 * n + 2 * extra_roads);
  auto road = [&](std::uint64_t a, std::uint64_t b) {
    arcs.emplace_back(static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b));
    arcs.emplace_back(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(a));
  };
  for (std::uint64_t y = 0; y < height; ++y) {
    for (std::uint64_t x = 0; x < width; ++x) {
      if (x + 1 < width) road(y * width + x, y * width + x + 1);
      if (y + 1 < height) road(y * width + x, (y + 1) * width + x);
    }
  }
  for (std::uint64_t r = 0; r < extra_roads; ++r) {
    const std::uint64_t h = gpm::splitmix64(seed * 0x9e3779b97f4a7c15ull + r);
    const std::uint64_t x = h % width, y = (h >> 20) % height;
    const std::uint64_t dx = (h >> 40) % (2 * kRoadReach + 1),
                        dy = (h >> 48) % (2 * kRoadReach + 1);
    const std::uint64_t x2 = std::min(width - 1, (x + dx >= kRoadReach) ? x + dx - kRoadReach : 0);
    const std::uint64_t y2 = std::min(height - 1, (y + dy >= kRoadReach) ? y + dy - kRoadReach : 0);
    if (x2 != x || y2 != y) road(y * width + x, y2 * width + x2);
  }
  return from_arcs(n, arcs);
}

csr_graph read_dimacs(const std::string& path) {
  std::ifstream in(path);
  if (!in) gpm::throw_error(gpm::errc::io, "cannot open the graph file " + path);
  std::uint64_t nodes = 0, arcs_declared = 0, line_no = 0;
  bool have_problem = false;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> arcs;
  std::string line;
  auto fail = [&](const std::string& what) {
    gpm::throw_error(gpm::errc::corrupt, path + ", line " + std::to_string(line_no) + ": " + what +
                                             " (a DIMACS .gr file has 'p sp <nodes> <arcs>', "
                                             "then 'a <tail> <head> <weight>' lines)");
  };
  // Reads the next unsigned number of `rest`, failing with `what` if there is none.
  auto number = [&](std::string_view& rest, const char* what) {
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec != std::errc() || end == rest.data()) fail(std::string("expected ") + what);
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
    return v;
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string_view rest(line);
    if (rest.empty() || rest.front() == 'c') continue;
    if (rest.substr(0, 5) == "p sp ") {
      if (have_problem) fail("a second 'p' line");
      rest.remove_prefix(5);
      nodes = number(rest, "the number of nodes");
      arcs_declared = number(rest, "the number of arcs");
      if (nodes == 0 || nodes > kMaxNodes) fail("the number of nodes must be 1 to 2^32");
      have_problem = true;
      arcs.reserve(arcs_declared);
      continue;
    }
    if (rest.substr(0, 2) == "a ") {
      if (!have_problem) fail("an arc before the 'p sp' line");
      rest.remove_prefix(2);
      const std::uint64_t tail = number(rest, "the arc's tail node");
      const std::uint64_t head = number(rest, "the arc's head node");
      number(rest, "the arc's weight");
      if (tail < 1 || tail > nodes || head < 1 || head > nodes) {
        fail("node number out of range 1.." + std::to_string(nodes));
      }
      if (arcs.size() == arcs_declared) fail("more arcs than the 'p' line declares");
      arcs.emplace_back(static_cast<std::uint32_t>(tail - 1), static_cast<std::uint32_t>(head - 1));
      continue;
    }
    fail("unknown line '" + line.substr(0, 40) + "'");
  }
  if (!have_problem) fail("no 'p sp <nodes> <arcs>' line");
  if (arcs.size() != arcs_declared) {
    fail("the 'p' line declares " + std::to_string(arcs_declared) + " arcs, the file has " +
         std::to_string(arcs.size()));
  }
  return from_arcs(nodes, arcs);
}

}  // namespace gpmbench::native
