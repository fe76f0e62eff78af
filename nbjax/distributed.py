"""``nbjax.distributed``: several processes as one computation, as ``jax.distributed``.

Pipeline position: before everything else in a process. ``initialize`` checks its arguments
here and asks ``xla.distributed_initialize`` to start jaxlib's coordination service (process
0) and connect this process's client; the PJRT CPU client created afterwards lists every
process's devices (``nbjax.devices()``; ``local_devices()`` are this process's) and runs
cross-process collectives with gloo over TCP. Sharded ``jit`` over a mesh of those devices
then runs one SPMD program in every process (``interpreters/spmd.py``); ``shard_map`` over
such a mesh runs each process's replicas on its own blocks (``interpreters/shard_map.py``).

Failures: an uncaught exception in one process is raised in the others' waits on
collectives (a RuntimeError naming it). A process that dies without a word (killed) is
declared dead by the coordination service after ``heartbeat_timeout_seconds``, and the
others' collectives then raise a RuntimeError naming it (``xla.wait_sharded``); those
processes leave with status 1. Process 0 included: the service runs in a child process of
its own, which outlives it (a client that loses its service aborts from C++, with no Python
hook in jaxlib 0.10: ``xla.distributed_initialize`` says why).
"""
from __future__ import annotations

import os

__all__ = ["initialize", "shutdown", "is_initialized"]


def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, cluster_detection_method=None,
               initialization_timeout=300, heartbeat_timeout_seconds=100,
               shutdown_timeout_seconds=300, coordinator_bind_address=None,
               slice_index=None, partition_index=None):
  """Initializes the distributed system: call it in every process, before any computation.

  Args:
    coordinator_address: ``host:port`` of process 0, where the coordination service runs
      (else ``$JAX_COORDINATOR_ADDRESS``); every process must name the same one.
    num_processes: the number of processes.
    process_id: this process's index, ``0 <= process_id < num_processes``.
    local_device_ids: accepted for JAX's signature (it selects GPUs; every process here
      drives its own CPU devices: ``jax_num_cpu_devices`` or ``XLA_FLAGS``).
    cluster_detection_method: only ``None``/``"deactivate"`` (no cluster auto-detection).
    initialization_timeout: seconds to wait for every process to connect.
    heartbeat_timeout_seconds: a process that sends no heartbeat for this long is declared
      dead; the others' collectives then raise a RuntimeError naming it (rather than
      waiting on it forever).
    shutdown_timeout_seconds: how long ``shutdown`` waits for the other processes.
    coordinator_bind_address: where process 0's service listens (default ``[::]:port``).

  Raises:
    RuntimeError: when called twice, or after the backend was created (any computation,
      ``nbjax.devices()``, ``device_put``, ...).
  """
  from nbjax import xla
  if xla.backend_initialized():
    raise RuntimeError("jax.distributed.initialize() must be called before any JAX calls "
                       "that might initialise the XLA backend. This includes any "
                       "computation, but also calls to jax.devices, jax.device_put, and "
                       "others.")
  if cluster_detection_method not in (None, "deactivate"):
    raise ValueError(f"nbjax does not auto-detect clusters (cluster_detection_method="
                     f"{cluster_detection_method!r}): pass coordinator_address, "
                     "num_processes and process_id")
  del local_device_ids, slice_index, partition_index
  coordinator_address = coordinator_address or os.environ.get("JAX_COORDINATOR_ADDRESS")
  if coordinator_address is None:
    raise ValueError("coordinator_address should be defined.")
  if num_processes is None:
    raise ValueError("Number of processes must be defined.")
  if process_id is None:
    raise ValueError("The process id of the current process must be defined.")
  if not isinstance(process_id, int):
    raise TypeError("process_id must be a nonnegative int. "
                    f"Got process_id={process_id} of type {type(process_id)}.")
  if not isinstance(num_processes, int):
    raise TypeError("num_processes must be a positive int. "
                    f"Got num_processes={num_processes} of type {type(num_processes)}.")
  if not 0 <= process_id < num_processes:
    raise ValueError("process_id and num_processes must be nonnegative, with process_id < "
                     f"num_processes. Got process_id={process_id}, "
                     f"num_processes={num_processes}.")
  bind = (coordinator_bind_address or os.environ.get("JAX_COORDINATOR_BIND_ADDRESS")
          or "[::]:" + coordinator_address.rsplit(":", 1)[1])
  xla.distributed_initialize(coordinator_address, num_processes, process_id,
                             bind_address=bind, init_timeout=int(initialization_timeout),
                             heartbeat_timeout=int(heartbeat_timeout_seconds),
                             shutdown_timeout=int(shutdown_timeout_seconds))


def is_initialized():
  """Whether ``initialize`` ran (and ``shutdown`` did not since)."""
  from nbjax import xla
  return xla.distributed_state() is not None


def shutdown():
  """Shuts down the distributed system. Does nothing if it is not running."""
  from nbjax import xla
  xla.distributed_shutdown()
