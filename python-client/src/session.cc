// Sessions in tensord._C: the Session class, connecting to or spawning a
// daemon, the default session, a session's memory statistics, the meta
// cache, and what the client and the daemon hold for a tensor (metadata,
// storage ids).
#include <cstdint>
#include <memory>
#include <string>

#include "binding.h"
#include "convert.h"
#include "errors.h"

namespace tensord::python {
namespace {

py::dict MetaDict(const tensord::TensorMeta& m) {
  py::dict d;
  d["sizes"] = py::tuple(py::cast(m.sizes));
  d["strides"] = py::tuple(py::cast(m.strides));
  d["storage_offset"] = m.storage_offset;
  d["dtype"] = static_cast<int>(m.dtype);
  d["device"] = m.device.ToString();
  return d;
}

py::dict StatsDict(const tc::Stats& s) {
  py::dict d;
  d["ops_issued"] = s.ops_issued;
  d["messages_sent"] = s.messages_sent;
  d["timed_flushes"] = s.timed_flushes;
  d["round_trips"] = s.round_trips;
  d["predicted_backwards"] = s.predicted_backwards;
  d["uploads"] = s.uploads;
  d["releases"] = s.releases;
  d["shm_uploads"] = s.shm_uploads;
  d["shm_fetches"] = s.shm_fetches;
  d["shm_adopted_uploads"] = s.shm_adopted_uploads;
  d["shm_segments_created"] = s.shm_segments_created;
  d["artifact_bytes_sent"] = s.artifact_bytes_sent;
  return d;
}

py::dict DeviceInfoDict(const tc::DeviceInfo& d) {
  py::dict out;
  const std::string name = d.device.ToString();
  out["name"] = name;
  out["type"] = name.substr(0, name.find(':'));
  out["index"] = d.device.index;
  out["description"] = d.description;
  out["total_memory"] = d.total_memory_bytes;
  out["free_memory"] = d.free_memory_bytes;
  out["major"] = d.capability_major;
  out["minor"] = d.capability_minor;
  return out;
}

std::shared_ptr<tc::Session> SessionOrNone() { return tc::DefaultSessionIfAny(); }

}  // namespace

void BindSession(py::module_& m) {
  py::class_<tc::Session, std::shared_ptr<tc::Session>>(m, "Session",
                                                          "A session with a tensord daemon (see tensord.connect).")
      .def_property_readonly("session_id", &tc::Session::session_id)
      .def_property_readonly("address", &tc::Session::address)
      .def_property_readonly("daemon_pid", &tc::Session::daemon_pid)
      .def_property_readonly("closed", &tc::Session::closed)
      .def_property_readonly("uses_shared_memory", &tc::Session::uses_shared_memory)
      .def_property_readonly("uses_same_host_stream", &tc::Session::uses_same_host_stream)
      .def_property_readonly("uses_tcp_stream", &tc::Session::uses_tcp_stream)
      .def_property_readonly("devices", [](const tc::Session& s) { return s.daemon_info().devices; })
      .def_property_readonly(
          "device_info",
          [](const tc::Session& s) {
            py::list out;
            for (const tc::DeviceInfo& d : s.daemon_info().device_info) out.append(DeviceInfoDict(d));
            return out;
          },
          "The devices the daemon serves as it described them when the session opened: a list of dicts with "
          "name, type, index, description, total_memory and free_memory (bytes), major and minor (compute "
          "capability, 0 where the kind has none).")
      .def_property_readonly("server_version", [](const tc::Session& s) { return s.daemon_info().server_version; })
      .def_property_readonly("cuda_driver_version",
                             [](const tc::Session& s) { return s.daemon_info().cuda_driver_version; })
      .def_property_readonly("cuda_runtime_version",
                             [](const tc::Session& s) { return s.daemon_info().cuda_runtime_version; })
      .def_property_readonly("cuda_unavailable_reason",
                             [](const tc::Session& s) { return s.daemon_info().cuda_unavailable_reason; })
      .def("stats", [](const tc::Session& s) { return StatsDict(s.stats()); })
      .def(
          "build_artifact",
          [](tc::Session& s, const std::string& name, const std::vector<std::pair<std::string, std::string>>& sources,
             const std::vector<std::string>& cuda_archs, const std::vector<std::string>& cflags,
             const std::vector<std::string>& cuda_cflags, const std::vector<std::string>& ldflags) {
            tc::Session::ArtifactBuild b{name, sources, cuda_archs, cflags, cuda_cflags, ldflags};
            absl::StatusOr<std::string> r;
            {
              py::gil_scoped_release release;  // a build takes seconds to minutes
              r = s.BuildArtifactOnDaemon(b);
            }
            return py::bytes(Unwrap(std::move(r)));
          },
          py::arg("name"), py::arg("sources"), py::arg("cuda_archs"), py::arg("cflags"), py::arg("cuda_cflags"),
          py::arg("ldflags"),
          "Builds a kernel artifact on the daemon from (name, text) sources; returns the file's bytes. RuntimeError "
          "when the daemon refuses or the build fails.")
      .def(
          "memory_stats",
          [](tc::Session& s, py::handle device, bool reset_peak, bool empty_cache) {
            const Device d = DeviceOf(device);
            absl::StatusOr<tc::MemoryStats> r;
            {
              py::gil_scoped_release nogil;
              r = s.GetMemoryStats(d, reset_peak, empty_cache);
            }
            const tc::MemoryStats st = Unwrap(std::move(r));
            py::dict out;
            out["allocated_bytes"] = st.allocated_bytes;
            out["peak_allocated_bytes"] = st.peak_allocated_bytes;
            out["reserved_bytes"] = st.reserved_bytes;
            out["total_bytes"] = st.total_bytes;
            return out;
          },
          py::arg("device"), py::arg("reset_peak") = false, py::arg("empty_cache") = false,
          "The session's memory on `device` (a device or its name), in bytes, once the daemon executed everything "
          "sent before: dict of allocated_bytes, peak_allocated_bytes (before the reset, with reset_peak), "
          "reserved_bytes (the device's allocator, for all sessions; after it gave back its cache, with "
          "empty_cache) and total_bytes (the device's memory). RuntimeError for a device the daemon does not "
          "serve.")
      .def("synchronize",
           [](tc::Session& s) {
             absl::Status st;
             {
               py::gil_scoped_release nogil;
               st = s.Synchronize();
             }
             Check(st);
           })
      .def("close", [](tc::Session& s) {
        absl::Status st;
        {
          py::gil_scoped_release nogil;
          st = s.Close();
        }
        Check(st);
      });
  // flush_interval_us < 0: SessionOptions' default ($TENSORD_FLUSH_US, else 2 ms).
  auto options = [](int flush_interval_us) {
    return tc::SessionOptions{.flush_interval_us = flush_interval_us, .client_name = "tensord-python"};
  };
  m.def(
      "connect",
      [options](const std::string& address, int flush_interval_us) {
        absl::StatusOr<std::shared_ptr<tc::Session>> s;
        {
          py::gil_scoped_release nogil;
          s = tc::Session::Connect(address, options(flush_interval_us));
        }
        return Unwrap(std::move(s));
      },
      py::arg("address"), py::arg("flush_interval_us") = -1);
  m.def(
      "spawn_embedded",
      [options](int flush_interval_us) {
        absl::StatusOr<std::shared_ptr<tc::Session>> s;
        {
          py::gil_scoped_release nogil;
          s = tc::Session::SpawnEmbedded(options(flush_interval_us));
        }
        return Unwrap(std::move(s));
      },
      py::arg("flush_interval_us") = -1);
  m.def("current_session", []() {
    absl::StatusOr<std::shared_ptr<tc::Session>> s;
    {
      py::gil_scoped_release nogil;
      s = tc::CurrentSession();
    }
    return Unwrap(std::move(s));
  });
  m.def("default_session", &SessionOrNone);
  m.def("current_session_if_any", &tc::CurrentSessionIfAny,
        "The session factories on this thread use if one is open (this thread's, else the default), else None; "
        "never creates one.");
  m.def("set_default_session", &tc::SetDefaultSession);
  m.def("exchange_thread_session", &tc::ExchangeThreadSession);
  m.def("shutdown", []() {
    py::gil_scoped_release nogil;
    tc::ShutdownAll();
  });
  m.def("meta_ops_run", &tc::MetaOpsRun);
  m.def(
      "_set_math_mode",
      [](bool matmul_allow_tf32, bool conv_allow_tf32) {
        tensord::MathMode mode;
        mode.matmul_allow_tf32 = matmul_allow_tf32;
        mode.conv_allow_tf32 = conv_allow_tf32;
        absl::Status st;
        {
          py::gil_scoped_release nogil;
          st = tc::SetMathMode(mode);
        }
        Check(st);
      },
      py::arg("matmul_allow_tf32"), py::arg("conv_allow_tf32"),
      "Sets the process's numerics switches (tensord.backends flags): sent to the current session, if one is open, "
      "and to every session opened later.");
  m.def(
      "_get_math_mode",
      []() {
        const tensord::MathMode mode = tc::GetMathMode();
        return py::make_tuple(mode.matmul_allow_tf32, mode.conv_allow_tf32);
      },
      "The numerics switches last set: (matmul_allow_tf32, conv_allow_tf32).");
  m.def(
      "_meta_cache_info",
      []() {
        const tc::MetaCacheInfo i = tc::GetMetaCacheInfo();
        py::dict d;
        d["enabled"] = i.enabled;
        d["hits"] = i.hits;
        d["misses"] = i.misses;
        d["size"] = i.size;
        d["capacity"] = i.capacity;
        return d;
      },
      "This thread's meta cache: dict of enabled, hits, misses, size and capacity (entries).");
  m.def("_set_meta_cache_enabled", &tc::SetMetaCacheEnabled, py::arg("enabled"),
        "Turns this thread's meta cache on or off (entries are kept).");
  m.def("_clear_meta_cache", &tc::ClearMetaCache, "Drops this thread's meta cache entries and zeroes its counters.");
  m.def(
      "_daemon_meta",
      [](const tc::Tensor& t) {
        absl::StatusOr<tensord::TensorMeta> r;
        {
          py::gil_scoped_release nogil;
          r = t.DaemonMeta();
        }
        return MetaDict(Unwrap(std::move(r)));
      },
      "The metadata the daemon holds for a tensor (a sync point): dict of sizes, strides, storage_offset, dtype "
      "(code), device.");
  m.def("_client_meta", [](const tc::Tensor& t) { return MetaDict(t.meta()); });
  m.def("_storage_id", [](const tc::Tensor& t) { return t.storage_id(); },
        "The client's id of the storage a tensor views (no round trip; meta tensors too): a view shares its "
        "input's id, every fresh tensor has a new one. For tests and tools comparing aliasing.");
  m.def(
      "_daemon_storage_id",
      [](const tc::Tensor& t) {
        absl::StatusOr<uint64_t> r;
        {
          py::gil_scoped_release nogil;
          r = t.DaemonStorageId();
        }
        return Unwrap(std::move(r));
      },
      "The daemon's id of the storage a tensor views (a sync point): equal ids mean the same storage.");
}

}  // namespace tensord::python
