"""``nbjax.profiler`` (XLA's profiler through jaxlib), ``nbjax.monitoring`` (JAX's compile
events), ``experimental.mesh_utils`` and ``experimental.compilation_cache``: JAX's names,
behaviour and messages (JAX 0.10.2)."""
import gzip
import json
import logging
import pathlib

import numpy as np
import pytest

import nbjax
import nbjax.numpy as jnp
from nbjax import monitoring, profiler
from nbjax.experimental import mesh_utils
from nbjax.experimental.compilation_cache import compilation_cache


def test_trace_writes_annotations_for_tensorboard_and_perfetto(tmp_path):
  with profiler.trace(tmp_path, create_perfetto_trace=True):
    with profiler.TraceAnnotation("my_label", a=1):
      nbjax.jit(lambda x: x @ x)(jnp.ones((32, 32))).block_until_ready()
    with profiler.StepTraceAnnotation("train", step_num=3):
      jnp.ones(3).sum()
    profiler.annotate_function(lambda x: x + 1, name="event_name")(1)
  run, = (tmp_path / "plugins" / "profile").iterdir()
  names = {p.name.split(".", 1)[1] for p in run.iterdir() if "." in p.name}
  assert {"xplane.pb", "trace.json.gz"} <= names and (run / "perfetto_trace.json.gz").exists()
  trace_json, = run.glob("*.trace.json.gz")
  events = {e.get("name") for e in json.load(gzip.open(trace_json))["traceEvents"]}
  assert {"my_label", "train", "event_name"} <= events
  with pytest.raises(RuntimeError, match="No profile started"):
    profiler.stop_trace()
  profiler.start_trace(tmp_path / "again")
  try:
    with pytest.raises(RuntimeError, match="Profile has already been started. Only one "
                       "profile may be run at a time."):
      profiler.start_trace(tmp_path)
  finally:
    profiler.stop_trace()


def test_device_memory_profile_is_gzipped_pprof(tmp_path):
  x = nbjax.jit(lambda x: x + 1)(np.ones(1000))  # a live XLA buffer
  prof = profiler.device_memory_profile()
  assert prof[:2] == b"\x1f\x8b" and len(gzip.decompress(prof)) > 0
  profiler.save_device_memory_profile(tmp_path / "m.prof")
  assert (tmp_path / "m.prof").read_bytes()[:2] == b"\x1f\x8b"
  del x
  with pytest.raises(ValueError, match="No active profiler server."):
    profiler.stop_server()


def test_monitoring_listeners_and_compile_events(caplog):
  seen, spans, scalars, plain = [], [], [], []
  listeners = [(monitoring.register_event_duration_secs_listener,
                monitoring.unregister_event_duration_listener,
                lambda e, d, **k: seen.append((e, k, d))),
               (monitoring.register_event_time_span_listener,
                monitoring.unregister_event_time_span_listener,
                lambda e, s, t, **k: spans.append((e, t - s))),
               (monitoring.register_scalar_listener, monitoring.unregister_scalar_listener,
                lambda e, v, **k: scalars.append(e)),
               (monitoring.register_event_listener, monitoring.unregister_event_listener,
                lambda e, **k: plain.append((e, k)))]
  for reg, _, f in listeners:
    reg(f)
  try:
    def my_fun(x):
      return x * 2
    with nbjax.log_compiles(True), caplog.at_level(logging.WARNING):
      nbjax.jit(my_fun)(jnp.ones(3))
    monitoring.record_event("/my/event", k="v")
  finally:
    for _, unreg, f in listeners:
      unreg(f)
  assert [(e, k) for e, k, _ in seen] == [
      ("/jax/core/compile/jaxpr_trace_duration", {"fun_name": "my_fun"}),
      ("/jax/core/compile/jaxpr_to_mlir_module_duration", {"fun_name": "jit(my_fun)"}),
      ("/jax/core/compile/backend_compile_duration", {"fun_name": "jit(my_fun)"})]
  assert all(d >= 0 for *_, d in seen) and [e for e, _ in spans] == [e for e, _, _ in seen]
  assert scalars == [e for e, _, _ in seen] and plain == [("/my/event", {"k": "v"})]
  text = caplog.text
  assert "Finished tracing my_fun for jit in" in text
  assert "Finished XLA compilation of jit(my_fun) in" in text
  monitoring.record_event("/my/event")  # unregistered: no listener runs
  assert len(plain) == 1


def test_mesh_utils_on_cpu_devices():
  devs = nbjax.devices()
  mesh = mesh_utils.create_device_mesh((len(devs),))
  assert mesh.shape == (len(devs),) and list(mesh) == devs
  assert mesh_utils.create_hybrid_device_mesh((len(devs),), (1,), process_is_granule=True
                                              ).tolist() == devs
  with pytest.raises(ValueError, match=f"Number of devices {len(devs)} must equal the product "
                     rf"of mesh_shape \({2 * len(devs)},\)"):
    mesh_utils.create_device_mesh((2 * len(devs),))
  with pytest.raises(ValueError, match=r"`mesh_shape` passed to `create_device_mesh` should be "
                     r"a sequence of ints. Got \('a',\)"):
    mesh_utils.create_device_mesh(("a",))
  with pytest.raises(ValueError, match="does not have attribute slice_index. See "
                     "`process_is_granule` option."):
    mesh_utils.create_hybrid_device_mesh((1,), (1,))
  m = nbjax.sharding.Mesh(mesh, ("x",))
  assert m.shape == {"x": len(devs)}


def test_compilation_cache_set_cache_dir(tmp_path):
  old = nbjax.config.jax_compilation_cache_dir
  try:
    compilation_cache.set_cache_dir(str(tmp_path))
    assert nbjax.config.jax_compilation_cache_dir == str(tmp_path)
    compilation_cache.reset_cache()
  finally:
    nbjax.config.update("jax_compilation_cache_dir", old)


def test_topologies_as_jax_on_cpu():
  """``experimental.topologies`` (aot_test): the attached topology is the devices; a
  compile-only topology is not implemented on a CPU-only install, with JAX's errors."""
  from nbjax.experimental import topologies
  topo = topologies.get_attached_topology()
  assert topo.devices == nbjax.devices()
  mesh = topologies.make_mesh(topo, (len(topo.devices),), ("x",))
  assert mesh.axis_names == ("x",) and list(mesh.devices.flat) == topo.devices
  with pytest.raises(NotImplementedError, match="^topology not implemented for cpu$"):
    topologies.get_topology_desc(platform="cpu")
  with pytest.raises(RuntimeError, match="JAX TPU support not installed"):
    topologies.get_topology_desc()


def test_stop_and_get_fdo_profile_as_jax():
  """JAX's stop_and_get_fdo_profile: stops the running trace (a later one may start) and
  returns XLA's FDO profile; without a trace, JAX's RuntimeError."""
  with pytest.raises(RuntimeError, match="No profile started"):
    profiler.stop_and_get_fdo_profile()
  profiler.start_trace("unused")
  nbjax.jit(lambda x: x + 1)(1.0)
  assert isinstance(profiler.stop_and_get_fdo_profile(), (bytes, str))
  with pytest.raises(RuntimeError, match="No profile started"):
    profiler.stop_trace()
