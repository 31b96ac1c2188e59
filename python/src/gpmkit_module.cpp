// gpmkit._core: the nanobind bindings behind the Python package `gpmkit` (python/gpmkit): which
// backend this build runs kernels on, and pools (gpm::pool) with their named objects exported
// without a copy, through the buffer protocol on the host (NumPy) and through DLPack where a GPU
// maps the pool (PyTorch, CuPy). gpm::error becomes gpmkit.Error with the error's code and
// message. An exported array keeps the pool mapped; closing a pool that arrays still view is
// refused (busy), so no array ever points into unmapped memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <memory>
#include <string>

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

  // Object `name`'s bytes as a one-dimensional uint8 array in framework F (nb::numpy for the
  // host's view; none, a DLPack array, on the device that maps the pool), keeping the pool
  // mapped while it lives.
  template <class... F>
  nb::ndarray<F..., std::uint8_t, nb::ndim<1>> export_bytes(const std::string& name,
                                                             bool on_gpu) const {
    const gpm::pool_object o = live().get(name);
    void* data = nullptr;
    int device = nb::device::cpu::value;
    if (on_gpu) {
      if (!pool_->mapped_into_gpu()) {
        gpm::throw_error(gpm::errc::no_device,
                         "pool " + pool_->path() + " is not mapped into a GPU: open it on a "
                         "machine with one (gpmkit.backend() == 'cuda'), or use array()");
      }
      data = pool_->ref().ptr<std::uint8_t>(o.offset);
      // The emulator's GPU is this CPU: its device pointers are host pointers.
      device = GPM_BACKEND_CUDA ? nb::device::cuda::value : nb::device::cpu::value;
    } else {
      data = pool_->host_ptr<std::uint8_t>(o.offset);
    }
    auto* lease = new std::shared_ptr<gpm::pool>(pool_);
    nb::capsule owner(lease, [](void* p) noexcept {
      delete static_cast<std::shared_ptr<gpm::pool>*>(p);
    });
    const std::size_t shape[1] = {static_cast<std::size_t>(o.bytes)};
    return nb::ndarray<F..., std::uint8_t, nb::ndim<1>>(data, 1, shape, owner, nullptr,
                                                         nb::dtype<std::uint8_t>(), device, 0);
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
             bool restore) {
            return py_pool(gpm::pool::open(
                path, layout, make_options(pm_dir, snapshot_dir, gpu, restore, 1024)));
          },
          "path"_a, "layout"_a, "pm_dir"_a = nb::none(), "snapshot_dir"_a = nb::none(),
          "gpu"_a = "auto", "restore_from_snapshot"_a = true)
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
}
