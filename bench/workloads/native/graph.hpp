// The BFS workload's input graphs in compressed sparse rows: a generated road-like graph (a 2-D
// grid of intersections with a few short extra roads, deterministic for a seed), or a DIMACS
// shortest-path `.gr` file (the USA road networks of the 9th DIMACS challenge, the GPM paper's
// input). Read-only input: it never lives in the pool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpmbench::native {

struct csr_graph {
  std::uint64_t nodes = 0;
  std::vector<std::uint64_t> row;  // nodes + 1 offsets into col
  std::vector<std::uint32_t> col;  // the heads of each node's arcs
  std::uint64_t edges() const { return col.size(); }
  std::uint64_t checksum() const;  // identifies the graph in a run's header
};

// A width x height grid whose neighbouring intersections are joined both ways, plus
// `extra_roads` two-way roads between intersections at most 8 cells apart, chosen by `seed`.
// Throws gpm::error (invalid_argument) for an empty grid or more than 2^32 nodes.
csr_graph road_grid(std::uint64_t width, std::uint64_t height, std::uint64_t extra_roads,
                    std::uint64_t seed);

// Parses a DIMACS `.gr` file: "c" comment lines, one "p sp <nodes> <arcs>" line, then "a <tail>
// <head> <weight>" lines with 1-based node numbers. Weights are read and ignored (BFS counts
// hops). Throws gpm::error (io, or corrupt with the file, line number and what is wrong).
csr_graph read_dimacs(const std::string& path);

}  // namespace gpmbench::native
