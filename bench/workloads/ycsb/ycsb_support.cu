// The non-template parts of the YCSB workloads: names, the checked index header, the named sizes
// and the checks that every mode's results go through.
#include <cstring>
#include <string>
#include <vector>

#include "gpmbench/workload.hpp"
#include "workloads/ycsb/kv_format.cuh"
#include "workloads/ycsb/ycsb_ops.cuh"
#include "workloads/ycsb/ycsb_runner.cuh"

namespace gpmbench::ycsb {

const char* to_string(op_status s) {
  switch (s) {
    case op_status::ok: return "ok";
    case op_status::not_found: return "not_found";
    case op_status::duplicate: return "duplicate";
    case op_status::full: return "full";
    case op_status::bad_value: return "bad_value";
  }
  return "unknown";
}

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::find: return "find";
    case op_kind::insert: return "insert";
    case op_kind::update: return "update";
    case op_kind::erase: return "erase";
    case op_kind::read_modify_write: return "read_modify_write";
  }
  return "unknown";
}

namespace {
constexpr const char* kWorkloadNames[] = {
    "A", "B", "C", "D", "F", "LOAD", "pos_search", "neg_search", "insert", "update", "delete"};
}  // namespace

const char* to_string(workload_kind k) { return kWorkloadNames[static_cast<int>(k)]; }

workload_kind workload_kind_from(const std::string& name) {
  std::string known;
  for (int i = 0; i < static_cast<int>(std::size(kWorkloadNames)); ++i) {
    if (name == kWorkloadNames[i]) return static_cast<workload_kind>(i);
    known += (known.empty() ? "" : ", ") + std::string(kWorkloadNames[i]);
  }
  throw usage_error("no YCSB workload named \"" + name + "\"; the workloads are: " + known);
}

op_stream make_stream(workload_kind kind, std::uint64_t loaded, std::uint64_t ops,
                      std::uint64_t batch_size, double theta, std::uint64_t seed) {
  gpm::require(loaded > 0 && batch_size > 0, "ycsb: load at least one key; batches of at least 1");
  if (kind == workload_kind::erase && ops > loaded) {
    throw usage_error("ycsb delete: " + std::to_string(ops) + " deletes of " +
                      std::to_string(loaded) +
                      " loaded keys; every key is deleted once, so use at most as many "
                      "operations as keys");
  }
  return op_stream{kind, loaded, batch_size, seed, zipf_distribution(loaded, theta)};
}

// ---- the checked header ---------------------------------------------------------------------

namespace {

constexpr gpm::format::object_kind kIndexKind{
    "YCSB index header", {'G', 'P', 'M', 'Y', 'C', 'S', 'B', 'I'}, 2, 0, sizeof(index_header)};

std::string layout_name(std::uint32_t layout) {
  switch (static_cast<index_layout>(layout)) {
    case index_layout::clevel: return "a clevel index";
    case index_layout::slab: return "a slab index";
  }
  return "an unknown index";
}

}  // namespace

std::uint64_t create_header(gpm::pool& p, const std::string& name, index_layout layout,
                            record_sizes sizes, const std::uint64_t (&geometry)[4]) {
  const std::uint64_t off = p.allocate(name, sizeof(index_header), 128);
  index_header* h = p.host_ptr<index_header>(off);
  h->common = gpm::format::make_header(kIndexKind, sizeof(index_header));
  h->layout = static_cast<std::uint32_t>(layout);
  h->key_bytes = sizes.key_bytes;
  h->value_bytes = sizes.value_bytes;
  for (int i = 0; i < 4; ++i) h->geometry[i] = geometry[i];
  gpm::format::seal_header(h);
  gpm::persist(h, sizeof(*h));
  return off;
}

const index_header& open_header(const gpm::pool& p, const std::string& name, index_layout layout,
                                record_sizes sizes) {
  const std::string what = "index header \"" + name + "\" in " + p.path();
  const gpm::pool_object o = p.open_object(name, kIndexKind, what);
  const index_header& h = *p.host_ptr<index_header>(o.offset);
  if (h.layout != static_cast<std::uint32_t>(layout)) {
    gpm::throw_error(gpm::errc::layout_mismatch,
                     what + " belongs to " + layout_name(h.layout) + ", not " +
                         layout_name(static_cast<std::uint32_t>(layout)) +
                         ": open it with the index type that created it");
  }
  if (h.key_bytes != sizes.key_bytes || h.value_bytes != sizes.value_bytes) {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "the index \"" + name + "\" holds " + std::to_string(h.key_bytes) +
                         "-byte keys and " + std::to_string(h.value_bytes) + "-byte values, not " +
                         std::to_string(sizes.key_bytes) + "-byte keys and " +
                         std::to_string(sizes.value_bytes) +
                         "-byte values: open it with its key and value types");
  }
  return h;
}

// ---- sizes and checks -------------------------------------------------------------------------

ycsb_sizes sizes_for(const mode_context& ctx, std::uint64_t record_bytes) {
  // GPU: the paper's sizes and its default batch of 2^12 operations. Larger batches do not fill
  // the GPU better (4096 warps keep enough PCIe reads in flight) but put more concurrent updates
  // on each Zipf-hot key: at 2^20 the hottest key gets ~30K updates per batch, and the baselines'
  // CAS retries become a storm that grows with the square of that (hash_batch_sweep shows it).
  // Emulator: a few seconds per mode.
  constexpr ycsb_sizes kGpu{16ull << 20, 64ull << 20, 16ull << 20, 1ull << 12};
  constexpr ycsb_sizes kHost{16ull << 10, 32ull << 10, 16ull << 10, 4ull << 10};
  constexpr ycsb_sizes kQuick{2ull << 10, 4ull << 10, 2ull << 10, 1ull << 10};
  ycsb_sizes s = ctx.options.quick ? kQuick : ctx.device.emulated ? kHost : kGpu;
  if (ctx.options.bytes) {
    s.loaded = std::max<std::uint64_t>(1, *ctx.options.bytes / record_bytes);
  }
  return s;
}

std::vector<std::uint64_t> count_statuses(const op_status* status, std::uint64_t n) {
  std::vector<std::uint64_t> counts(kOpStatuses);
  for (std::uint64_t i = 0; i < n; ++i) ++counts[static_cast<unsigned>(status[i]) % kOpStatuses];
  return counts;
}

namespace {
template <class Expected>
void require_each(const std::string& what, const std::vector<op_status>& got, Expected expected) {
  std::uint64_t wrong = 0, first = 0;
  std::vector<std::uint64_t> counts(kOpStatuses);
  for (std::uint64_t i = 0; i < got.size(); ++i) {
    ++counts[static_cast<unsigned>(got[i]) % kOpStatuses];
    if (got[i] != expected(i) && wrong++ == 0) first = i;
  }
  if (wrong == 0) return;
  std::string summary;
  for (unsigned s = 0; s < kOpStatuses; ++s) {
    if (counts[s] != 0) {
      summary += std::string(summary.empty() ? "" : ", ") + to_string(static_cast<op_status>(s)) +
                 " " + std::to_string(counts[s]);
    }
  }
  check_failed(what + ": " + std::to_string(wrong) + " of " + std::to_string(got.size()) +
               " operations got the wrong status (first: operation " + std::to_string(first) +
               " got " + to_string(got[first]) + ", expected " + to_string(expected(first)) +
               "; statuses: " + summary + ")");
}
}  // namespace

void require_all(const std::string& what, const std::vector<op_status>& got,
                 const std::vector<op_status>& expected) {
  require_each(what, got, [&](std::uint64_t i) { return expected[i]; });
}

void require_all(const std::string& what, const std::vector<op_status>& got, op_status expected) {
  require_each(what, got, [&](std::uint64_t) { return expected; });
}

void final_state_checks(const ycsb_plan& plan, std::vector<kv_op>* finds,
                        std::vector<op_status>* expected) {
  const op_stream& st = plan.stream;
  const std::uint64_t present_end =
      st.kind == workload_kind::load || st.kind == workload_kind::insert ? st.loaded + plan.ops
      : st.kind == workload_kind::d ? st.loaded + plan.ops / kLatestInsertPeriod
                                    : st.loaded;
  const std::uint64_t erased_end = st.kind == workload_kind::erase ? plan.ops : 0;
  finds->clear();
  expected->clear();
  for (std::uint64_t id = 0; id < present_end; ++id) {
    finds->push_back(kv_op{id, op_kind::find, 0});
    expected->push_back(id < erased_end ? op_status::not_found : op_status::ok);
  }
  // A few ids that were never inserted must stay absent.
  for (std::uint64_t id = present_end; id < present_end + 64; ++id) {
    finds->push_back(kv_op{id, op_kind::find, 0});
    expected->push_back(op_status::not_found);
  }
}

}  // namespace gpmbench::ycsb
