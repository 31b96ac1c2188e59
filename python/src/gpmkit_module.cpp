// gpmkit._core: the nanobind bindings behind the Python package `gpmkit` (python/gpmkit): which
// backend this build runs kernels on; pools (gpm::pool) with their named objects exported
// without a copy, through the buffer protocol on the host (NumPy) and through DLPack where a GPU
// maps the pool (PyTorch, CuPy); and checkpointers (gpm::checkpointer) of arrays in the device's
// memory. gpm::error becomes gpmkit.Error with the error's code and message. An exported array
// and a checkpointer keep the pool mapped; closing a pool that one of them still uses is refused
// (busy), so nothing ever points into unmapped memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/config.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/platform/persist.hpp>
#include <gpm/platform/runtime.hpp>
#include <gpm/pool/pool.hpp>

namespace nb = nanobind;
using namespace nb::literals;

namespace {

PyObject* error_type = nullptr;  // gpmkit.Error, created at import

// The pool a Python Pool owns. Arrays exported from it hold a copy of the shared_ptr, so the
// mapping lives as long as the last of them.
class py_pool {
 public:
  explicit py_pool(gpm::pool p) : pool_(std::make_shared<gpm::pool>(std::move(p))) {}

  gpm::pool& live() const {
    if (!pool_ || !pool_->is_open()) {
      gpm::throw_error(gpm::errc::invalid_argument, "the pool is closed");
    }
    return *pool_;
  }
  void close() {
    if (!pool_) return;
    const long views = pool_.use_count() - 1;
    if (views > 0) {
      gpm::throw_error(gpm::errc::busy,
                       "pool " + pool_->path() + ": " + std::to_string(views) +
                           " exported array(s) still view it; delete them before close()");
    }
    pool_->close();
    pool_.reset();
  }
  bool is_open() const { return pool_ && pool_->is_open(); }
  // A share of the pool for what must keep it open (a checkpointer).
  std::shared_ptr<gpm::pool> lease() const {
    live();
    return pool_;
  }

  // Object `name`'s bytes as a one-dimensional uint8 array in framework F (nb::numpy for the
  // host's view; none, a DLPack array, on the device that maps the pool), keeping the pool
  // mapped while it lives.
  template <class... F>
  nb::ndarray<F..., std::uint8_t, nb::ndim<1>> export_bytes(const std::string& name,
                                                             bool on_gpu) const {
    const gpm::pool_object o = live().get(name);
    void* data = nullptr;
    int device = nb::device::cpu::value;
    int device_id = 0;
    if (on_gpu) {
      if (!pool_->mapped_into_gpu()) {
        gpm::throw_error(gpm::errc::no_device,
                         "pool " + pool_->path() + " is not mapped into a GPU: open it on a "
                         "machine with one (gpmkit.backend() == 'cuda'), or use array()");
      }
      data = pool_->ref().ptr<std::uint8_t>(o.offset);
      // The emulator's GPU is this CPU: its device pointers are host pointers.
      device = GPM_BACKEND_CUDA ? nb::device::cuda::value : nb::device::cpu::value;
      // The GPU is this thread's current one, which the pool was mapped into (one GPU per
      // process: rank r of a job on cuda:r after torch.cuda.set_device(r)); naming device 0
      // there would give frameworks a tensor on the wrong GPU.
      if (GPM_BACKEND_CUDA) gpm::check_cuda(cudaGetDevice(&device_id), "cudaGetDevice");
    } else {
      data = pool_->host_ptr<std::uint8_t>(o.offset);
    }
    auto* lease = new std::shared_ptr<gpm::pool>(pool_);
    nb::capsule owner(lease, [](void* p) noexcept {
      delete static_cast<std::shared_ptr<gpm::pool>*>(p);
    });
    const std::size_t shape[1] = {static_cast<std::size_t>(o.bytes)};
    return nb::ndarray<F..., std::uint8_t, nb::ndim<1>>(
        data, 1, shape, owner, nullptr, nb::dtype<std::uint8_t>(), device, device_id);
  }

  void persist(const std::optional<std::string>& name) const {
    gpm::pool& p = live();
    if (name) {
      const gpm::pool_object o = p.get(*name);
      gpm::persist(p.host_ptr<std::uint8_t>(o.offset), o.bytes);
    } else {
      gpm::persist(p.host_ptr<std::uint8_t>(0), p.size());
    }
  }

 private:
  std::shared_ptr<gpm::pool> pool_;
};

// The device memory arrays of a checkpoint live in: GPU memory in the CUDA build, this host's
// memory on the emulator (whose GPU is the CPU).
constexpr int kDeviceMemory = GPM_BACKEND_CUDA ? nb::device::cuda::value : nb::device::cpu::value;

// gpm::checkpoint_type_tag<T>() for the element type of a DLPack array.
std::uint64_t type_tag_of(const nb::dlpack::dtype& t) {
  const auto code = static_cast<nb::dlpack::dtype_code>(t.code);
  const std::uint64_t bytes = t.bits / 8u;
  const bool floating = code == nb::dlpack::dtype_code::Float;
  const bool integral = code == nb::dlpack::dtype_code::Int || code == nb::dlpack::dtype_code::UInt;
  const bool is_signed = floating || code == nb::dlpack::dtype_code::Int;
  return 0x6370000000000000ull | (bytes << 8) | (floating ? 4u : 0u) | (integral ? 2u : 0u) |
         (is_signed ? 1u : 0u);
}

gpm::copy_path copy_path_of(const std::string& p) {
  if (p == "automatic") return gpm::copy_path::automatic;
  if (p == "gpu_stores") return gpm::copy_path::gpu_stores;
  if (p == "dma") return gpm::copy_path::dma;
  gpm::throw_error(gpm::errc::invalid_argument,
                   "path must be 'automatic', 'gpu_stores' or 'dma', not '" + p + "'");
}

// A stream handle from Python (0: the legacy default stream).
cudaStream_t stream_of(std::uintptr_t handle) { return reinterpret_cast<cudaStream_t>(handle); }

nb::dict checkpoint_dict(const gpm::checkpoint_result& r) {
  nb::dict d;
  d["seq"] = r.seq;
  d["chunks"] = r.chunks;
  d["copied"] = r.copied;
  d["redundant"] = r.redundant;
  d["precopied"] = r.precopied;
  d["mispredicted"] = r.mispredicted;
  d["bytes_copied"] = r.bytes_copied;
  d["path"] = std::string(to_string(r.path));
  d["snapshotted"] = r.snapshotted;
  d["seconds"] = r.seconds;
  return d;
}

// A checkpointer with the pool it lives in and the arrays registered with it (held, so that
// their memory outlives the registration).
class py_checkpointer {
 public:
  py_checkpointer(std::shared_ptr<gpm::pool> pool, gpm::checkpointer c)
      : pool_(std::move(pool)), c_(std::make_unique<gpm::checkpointer>(std::move(c))) {}

  gpm::checkpointer& live() const {
    if (!c_) gpm::throw_error(gpm::errc::invalid_argument, "the checkpointer is closed");
    return *c_;
  }
  void add(const std::string& name, nb::ndarray<nb::c_contig> a, std::uint32_t group) {
    if (a.device_type() != kDeviceMemory) {
      gpm::throw_error(gpm::errc::invalid_argument,
                       "chunk '" + name + "': its array is not in the device's memory (" +
                           (GPM_BACKEND_CUDA ? "a CUDA tensor or array"
                                             : "a CPU array: the emulator's device is the CPU") +
                           ")");
    }
    live().add(name, a.data(), a.nbytes(), group, type_tag_of(a.dtype()));
    arrays_.insert_or_assign(name, nb::cast(a));
  }
  void close() {
    if (!c_) return;
    c_->close();
    c_.reset();
    arrays_.clear();
    pool_.reset();
  }

 private:
  std::shared_ptr<gpm::pool> pool_;
  std::unique_ptr<gpm::checkpointer> c_;
  std::map<std::string, nb::object> arrays_;
};

gpm::pool_options make_options(const std::optional<std::string>& pm_dir,
                               const std::optional<std::string>& snapshot_dir,
                               const std::string& gpu, bool restore, std::uint32_t capacity) {
  gpm::pool_options o;
  if (pm_dir) o.pm_dir = *pm_dir;
  if (snapshot_dir) o.snapshot_dir = *snapshot_dir;
  if (gpu == "auto") {
    o.gpu = gpm::gpu_mapping::automatic;
  } else if (gpu == "required") {
    o.gpu = gpm::gpu_mapping::required;
  } else if (gpu == "none") {
    o.gpu = gpm::gpu_mapping::none;
  } else {
    gpm::throw_error(gpm::errc::invalid_argument,
                     "gpu must be 'auto', 'required' or 'none', not '" + gpu + "'");
  }
  o.restore_from_snapshot = restore;
  o.directory_capacity = capacity;
  o.notice = [](const std::string&) {};  // notices are read from Pool.notices
  return o;
}

nb::dict object_dict(const gpm::pool_object& o) {
  nb::dict d;
  d["name"] = o.name;
  d["offset"] = o.offset;
  d["bytes"] = o.bytes;
  d["alignment"] = o.alignment;
  d["type_tag"] = o.type_tag;
  return d;
}

nb::dict info_dict(const gpm::pool_info& i) {
  nb::dict d;
  d["path"] = i.path;
  d["layout"] = i.layout;
  d["uuid"] = i.uuid;
  d["version"] = std::to_string(i.major) + "." + std::to_string(i.minor);
  d["bytes"] = i.bytes;
  d["heap_bytes"] = i.heap_bytes;
  d["free_bytes"] = i.free_bytes;
  d["objects"] = i.objects;
  d["directory_capacity"] = i.directory_capacity;
  d["open_count"] = i.open_count;
  d["last_snapshot_seq"] = i.last_snapshot_seq;
  d["clean_shutdown"] = i.clean_shutdown;
  return d;
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "gpmkit's C++ core (use the gpmkit package)";

  error_type = PyErr_NewExceptionWithDoc(
      "gpmkit.Error", "A gpmkit failure: .code names its kind (gpm::errc), str() says what to do.",
      PyExc_RuntimeError, nullptr);
  m.attr("Error") = nb::handle(error_type);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const gpm::error& e) {
      nb::object exc = nb::steal(PyObject_CallFunction(error_type, "s", e.what()));
      if (!exc.is_valid()) return;  // the call set its own error
      exc.attr("code") = std::string(gpm::to_string(e.code()));
      PyErr_SetObject(error_type, exc.ptr());
    }
  });

  m.def("backend", [] { return GPM_BACKEND_CUDA ? "cuda" : "host"; },
        "'cuda' when kernels run on a GPU, 'host' on gpmkit's host SIMT emulator.");
  m.def(
      "device_info",
      [] {
        const gpm::device_info i = gpm::query_device();
        nb::dict d;
        d["present"] = i.present;
        d["emulated"] = i.emulated;
        d["name"] = i.name;
        d["compute_capability"] = std::to_string(i.compute_major) + "." +
                                  std::to_string(i.compute_minor);
        d["multiprocessors"] = i.multiprocessors;
        d["global_memory"] = i.global_memory;
        d["pcie_generation"] = i.pcie_generation;
        d["pcie_width"] = i.pcie_width;
        d["absent_reason"] = i.absent_reason;
        return d;
      },
      "What the current device is (gpmkit info's device lines).");
  m.def(
      "pm_directory",
      [](const std::optional<std::string>& pm_dir) {
        gpm::pool_options o;
        if (pm_dir) o.pm_dir = *pm_dir;
        return gpm::pool::pm_directory(o);
      },
      "pm_dir"_a = nb::none(), "The directory pool names without a '/' resolve against.");

  nb::class_<py_pool>(m, "Pool", "A persistent memory pool (gpm::pool); see gpmkit.Pool.")
      .def_static(
          "create",
          [](const std::string& path, std::uint64_t bytes, const std::string& layout,
             const std::optional<std::string>& pm_dir,
             const std::optional<std::string>& snapshot_dir, const std::string& gpu,
             std::uint32_t capacity) {
            return py_pool(gpm::pool::create(
                path, bytes, layout, make_options(pm_dir, snapshot_dir, gpu, false, capacity)));
          },
          "path"_a, "bytes"_a, "layout"_a, "pm_dir"_a = nb::none(), "snapshot_dir"_a = nb::none(),
          "gpu"_a = "auto", "directory_capacity"_a = 1024)
      .def_static(
          "open",
          [](const std::string& path, const std::string& layout,
             const std::optional<std::string>& pm_dir,
             const std::optional<std::string>& snapshot_dir, const std::string& gpu,
             bool restore, bool read_only) {
            gpm::pool_options o = make_options(pm_dir, snapshot_dir, gpu, restore, 1024);
            o.read_only = read_only;
            return py_pool(gpm::pool::open(path, layout, o));
          },
          "path"_a, "layout"_a, "pm_dir"_a = nb::none(), "snapshot_dir"_a = nb::none(),
          "gpu"_a = "auto", "restore_from_snapshot"_a = true, "read_only"_a = false)
      .def_static(
          "remove",
          [](const std::string& path, const std::optional<std::string>& pm_dir,
             const std::optional<std::string>& snapshot_dir, bool with_snapshot) {
            gpm::pool::remove(path, make_options(pm_dir, snapshot_dir, "none", false, 1024),
                              with_snapshot);
          },
          "path"_a, "pm_dir"_a = nb::none(), "snapshot_dir"_a = nb::none(),
          "with_snapshot"_a = false)
      .def("close", &py_pool::close)
      .def_prop_ro("is_open", &py_pool::is_open)
      .def_prop_ro("path", [](const py_pool& p) { return p.live().path(); })
      .def_prop_ro("size", [](const py_pool& p) { return p.live().size(); })
      .def_prop_ro("durability",
                   [](const py_pool& p) { return std::string(to_string(p.live().durability())); })
      .def_prop_ro("mapped_into_gpu", [](const py_pool& p) { return p.live().mapped_into_gpu(); })
      .def_prop_ro("was_clean_shutdown",
                   [](const py_pool& p) { return p.live().was_clean_shutdown(); })
      .def_prop_ro("notices", [](const py_pool& p) { return p.live().notices(); })
      .def("info", [](const py_pool& p) { return info_dict(p.live().info()); })
      .def(
          "allocate",
          [](const py_pool& p, const std::string& name, std::uint64_t bytes,
             std::uint64_t alignment) { return p.live().allocate(name, bytes, alignment); },
          "name"_a, "bytes"_a, "alignment"_a = 128)
      .def("free", [](const py_pool& p, const std::string& name) { p.live().free(name); })
      .def("objects",
           [](const py_pool& p) {
             nb::list out;
             for (const gpm::pool_object& o : p.live().objects()) out.append(object_dict(o));
             return out;
           })
      .def("get", [](const py_pool& p, const std::string& name) {
        return object_dict(p.live().get(name));
      })
      .def("host_bytes",
           [](const py_pool& p, const std::string& name) {
             return p.export_bytes<nb::numpy>(name, false);
           })
      .def("gpu_bytes", [](const py_pool& p, const std::string& name) {
        return p.export_bytes<nb::array_api>(name, true);
      })
      .def("persist", &py_pool::persist, "name"_a = nb::none())
      .def("snapshot", [](const py_pool& p) {
        const gpm::snapshot_result r = p.live().snapshot();
        nb::dict d;
        d["seq"] = r.seq;
        d["pages_total"] = r.pages_total;
        d["pages_changed"] = r.pages_changed;
        d["bytes_written"] = r.bytes_written;
        d["seconds"] = r.seconds;
        return d;
      });

  nb::class_<gpm::pending_checkpoint>(m, "PendingCheckpoint",
                                      "An asynchronous checkpoint whose persist runs on.")
      .def("ready", &gpm::pending_checkpoint::ready)
      .def(
          "wait",
          [](const gpm::pending_checkpoint& p) {
            gpm::checkpoint_result r;
            {
              nb::gil_scoped_release unlocked;
              r = p.get();
            }
            return checkpoint_dict(r);
          },
          "Waits until the checkpoint is durable; returns what checkpoint() returns.");

  nb::class_<py_checkpointer>(m, "Checkpointer", "gpm::checkpointer; see gpmkit.Checkpointer.")
      .def_static(
          "open",
          [](const py_pool& pool, const std::string& name, const std::string& how,
             std::uint32_t max_chunks, const std::string& path, bool eliminate_redundant,
             bool honour_precopy, std::uint32_t snapshot_every) {
            gpm::checkpoint_options o;
            o.max_chunks = max_chunks;
            o.path = copy_path_of(path);
            o.eliminate_redundant = eliminate_redundant;
            o.honour_precopy = honour_precopy;
            o.snapshot_every = snapshot_every;
            o.notice = [](const std::string&) {};
            std::shared_ptr<gpm::pool> lease = pool.lease();
            gpm::checkpointer c =
                how == "create" ? gpm::checkpointer::create(*lease, name, o)
                : how == "open" ? gpm::checkpointer::open(*lease, name, o)
                                : gpm::checkpointer::open_or_create(*lease, name, o);
            return py_checkpointer(std::move(lease), std::move(c));
          },
          "pool"_a, "name"_a, "how"_a, "max_chunks"_a, "path"_a, "eliminate_redundant"_a,
          "honour_precopy"_a, "snapshot_every"_a)
      // noconvert: a strided or foreign array is refused (TypeError), never silently replaced by
      // a contiguous copy that the checkpoint would then capture and restore instead.
      .def("add", &py_checkpointer::add, "name"_a, nb::arg("array").noconvert(), "group"_a = 0)
      .def(
          "precopy",
          [](const py_checkpointer& c, const std::string& name) { c.live().precopy(name); },
          "name"_a)
      // `stream`: a CUDA stream handle (PyTorch's torch.cuda.current_stream().cuda_stream); the
      // checkpoint or restore is ordered after the work queued on it. 0: the legacy default
      // stream, which orders only after blocking streams (not PyTorch's side streams).
      .def(
          "checkpoint",
          [](const py_checkpointer& c, std::uint32_t group, std::uintptr_t stream) {
            gpm::checkpoint_result r;
            {
              nb::gil_scoped_release unlocked;
              r = c.live().checkpoint(group, stream_of(stream));
            }
            return checkpoint_dict(r);
          },
          "group"_a = 0, "stream"_a = 0)
      .def(
          "checkpoint_async",
          [](const py_checkpointer& c, std::uint32_t group, std::uintptr_t stream) {
            nb::gil_scoped_release unlocked;
            gpm::pending_checkpoint p = c.live().checkpoint_async(group, stream_of(stream));
            // The capture is ordered before later work on `stream`: waiting for that stream
            // returns once the arrays' contents are captured (not yet durable), so Python may
            // change them at once, also where the host writes them (NumPy on the emulator).
            gpm::check_cuda(cudaStreamSynchronize(stream_of(stream)),
                            "cudaStreamSynchronize (save)");
            return p;
          },
          "group"_a = 0, "stream"_a = 0)
      .def(
          "restore",
          [](const py_checkpointer& c, std::uint32_t group, std::uintptr_t stream) {
            gpm::restore_result r;
            {
              nb::gil_scoped_release unlocked;
              r = c.live().restore(group, stream_of(stream));
            }
            nb::dict d;
            d["seq"] = r.seq;
            d["chunks"] = r.chunks;
            d["bytes"] = r.bytes;
            d["repaired"] = r.repaired;
            d["seconds"] = r.seconds;
            return d;
          },
          "group"_a = 0, "stream"_a = 0)
      .def(
          "last_checkpoint",
          [](const py_checkpointer& c, std::uint32_t group) {
            return c.live().last_checkpoint(group);
          },
          "group"_a = 0)
      .def("chunks",
           [](const py_checkpointer& c) {
             nb::list out;
             for (const gpm::chunk_info& i : c.live().chunks()) {
               nb::dict d;
               d["name"] = i.name;
               d["bytes"] = i.bytes;
               d["group"] = i.group;
               d["last_seq"] = i.last_seq;
               d["attached"] = i.attached;
               out.append(d);
             }
             return out;
           })
      .def("chosen_path",
           [](const py_checkpointer& c) { return std::string(to_string(c.live().chosen_path())); })
      .def("close", &py_checkpointer::close);
}
