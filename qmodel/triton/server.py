"""A real Triton Inference Server on loopback, for measurements.

Runs the ``tritonserver`` binary that the nvidia-pytriton wheel carries (with its Python
backend), bound to 127.0.0.1 on free ports, and perf_analyzer from the tritonclient 2.50 wheel
(docs/triton-server.md says how to install both). Used to make the real test data of
tests/data/triton and, later, to compare qmodel with a server.

Nothing here is needed to read what a server wrote: the readers of :mod:`qmodel.triton` take
files.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .http import fetch

__all__ = ["Installation", "find_installation", "TritonServer", "run_perf_analyzer",
           "write_sleeping_ensemble",
           "free_port", "write_sleeping_model", "write_workload_model", "BACKENDS",
           "check_backend"]

# Where the unpacked wheels lie: nvidia-pytriton's pytriton/tritonserver and
# nvidia_pytriton.libs, and bin/perf_analyzer with lib/ (libb64.so.0d, libcudart.so.12)
DIST_VARIABLE = "QMODEL_TRITON_DIST"
HOW = ("run make triton (it unpacks nvidia-pytriton==0.7.0 and tritonclient==2.50.0's "
       "perf_analyzer into .venv/triton-dist), or unpack them into a folder and set "
       "QMODEL_TRITON_DIST to it (docs/triton-server.md)")
# where make triton puts the installation: inside the virtual environment that runs qmodel
VENV_DIST = Path(sys.prefix) / "triton-dist"


@dataclass(frozen=True)
class Installation:
    """The files a server run needs."""

    root: Path

    @property
    def server(self) -> Path:
        return self.root / "pytriton" / "tritonserver" / "bin" / "tritonserver"

    @property
    def libs(self) -> Path:
        return self.root / "nvidia_pytriton.libs"

    @property
    def python_backend(self) -> Path:
        return self.root / "pytriton" / "tritonserver" / "backends" / "python"

    @property
    def stub(self) -> Path:
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return (self.root / "pytriton" / "tritonserver" / "python_backend_stubs" / version
                / "triton_python_backend_stub")

    @property
    def perf_analyzer(self) -> Path:
        return self.root / "bin" / "perf_analyzer"

    def missing(self) -> list[str]:
        """The files that are not there."""
        return [str(p) for p in (self.server, self.libs, self.python_backend, self.stub,
                                 self.perf_analyzer) if not p.exists()]


def find_installation(root=None) -> Installation:
    """The installation at ``root``, at $QMODEL_TRITON_DIST, or where ``make triton`` puts it
    (``<venv>/triton-dist``); RuntimeError saying how to make one where files are missing."""
    root = root or os.environ.get(DIST_VARIABLE) or (VENV_DIST if VENV_DIST.is_dir() else None)
    if not root:
        raise RuntimeError(f"no Triton installation: {HOW}")
    found = Installation(Path(root))
    missing = found.missing()
    if missing:
        raise RuntimeError(f"the Triton installation at {root} lacks {', '.join(missing)}: "
                           f"{HOW}")
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _library_path(*folders) -> str:
    # the Python backend's stub must load the libpython of the interpreter whose standard
    # library it uses: that interpreter's LIBDIR first
    parts = [sysconfig.get_config_var("LIBDIR"), *map(str, folders),
             os.environ.get("LD_LIBRARY_PATH", "")]
    return ":".join(p for p in parts if p)


class TritonServer:
    """``with TritonServer(repository) as server:`` a tritonserver on free loopback ports.

    Parameters
    ----------
    repository : path
        The model repository (a folder of model folders with config.pbtxt).
    trace_file : path, optional
        Where Triton writes its request trace (TIMESTAMPS level, switched on and off with
        :meth:`trace`; written when the server stops).
    trace_count : int
        Most requests traced (-1: all); about 1 KB of trace per request.
    installation : Installation, optional
        Default :func:`find_installation`.
    ready_timeout : float
        Seconds to wait for the models to load.
    cpus : str, optional
        CPUs the server (and its Python stubs) may run on, as taskset takes them ("0").
    """

    def __init__(self, repository, *, trace_file=None, trace_count: int = -1,
                 installation: Installation | None = None, ready_timeout: float = 60.0,
                 cpus: str | None = None):
        self.repository = Path(repository)
        self.trace_file = None if trace_file is None else Path(trace_file)
        self.trace_count = trace_count
        self.installation = installation or find_installation()
        self.ready_timeout = ready_timeout
        self.cpus = cpus
        self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        self.process = None
        self._scratch = None

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def _backends(self) -> Path:
        """A backend folder with the Python backend and this interpreter's stub."""
        folder = Path(self._scratch.name) / "backends" / "python"
        folder.mkdir(parents=True)
        for f in self.installation.python_backend.iterdir():
            (folder / f.name).symlink_to(f)
        (folder / "triton_python_backend_stub").symlink_to(self.installation.stub)
        return folder.parent

    def start(self) -> "TritonServer":
        self._scratch = tempfile.TemporaryDirectory(prefix="qmodel-triton-")
        self.log_path = Path(self._scratch.name) / "server.log"
        args = [str(self.installation.server), "--model-repository", str(self.repository),
                "--backend-directory", str(self._backends()),
                "--http-address", "127.0.0.1", "--grpc-address", "127.0.0.1",
                "--metrics-address", "127.0.0.1", "--http-port", str(self.http_port),
                "--grpc-port", str(self.grpc_port), "--metrics-port", str(self.metrics_port),
                "--allow-gpu-metrics", "false", "--exit-timeout-secs", "5",
                "--metrics-config", "summary_latencies=true"]
        if self.trace_file is not None:
            args += ["--trace-config", f"triton,file={self.trace_file}",
                     "--trace-config", "triton,log-frequency=0", "--trace-config", "rate=1",
                     "--trace-config", "level=OFF",
                     "--trace-config", f"count={self.trace_count}"]
        if self.cpus is not None:
            args = ["taskset", "-c", self.cpus, *args]
        env = dict(os.environ, LD_LIBRARY_PATH=_library_path(self.installation.libs),
                   PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with {self.process.returncode} while "
                                   f"starting:\n{self.log_tail()}")
            try:
                fetch(f"{self.http_url}/v2/health/ready", "readiness", timeout=1)
                return self
            except ValueError:            # not listening yet, or models still loading
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"tritonserver not ready after {self.ready_timeout:g} s:\n"
                           f"{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 20 s; the trace file is complete after this."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self._scratch is not None:
            self._scratch.cleanup()
            self._scratch = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def stats(self, model: str) -> dict:
        """``GET /v2/models/<model>/stats`` as a dict."""
        return json.loads(fetch(f"{self.http_url}/v2/models/{model}/stats", "statistics"))

    def config(self, model: str) -> dict:
        """The configuration the server runs (its defaults filled in), as a dict."""
        return json.loads(fetch(f"{self.http_url}/v2/models/{model}/config", "configuration"))

    def metrics(self) -> str:
        """The Prometheus text of the metrics endpoint."""
        return fetch(self.metrics_url, "metrics").decode()

    def trace(self, level: str) -> None:
        """Switch the request trace: "TIMESTAMPS" or "OFF"."""
        body = json.dumps({"trace_level": [level]}).encode()
        request = urllib.request.Request(f"{self.http_url}/v2/trace/setting", data=body,
                                         method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10):
            pass


def run_perf_analyzer(server: TritonServer, model: str, rate: float, csv_path, *,
                      shape: str = "x:4", interval_ms: int = 5000, repeats: int = 3,
                      timeout: float = 300.0, cpus: str | None = None) -> str:
    """Open-loop Poisson load at ``rate`` requests per second over gRPC; the CSV (-f) goes to
    ``csv_path``; returns perf_analyzer's printed report. ``cpus``: where it may run (taskset)."""
    inst = server.installation
    args = [str(inst.perf_analyzer), "-m", model, "-u", server.grpc_address, "-i", "grpc",
            "--async", "--request-rate-range", f"{rate:g}", "--request-distribution", "poisson",
            "--shape", shape, "--measurement-interval", str(interval_ms), "-r", str(repeats),
            "-s", "50", "-f", str(csv_path)]
    if cpus is not None:
        args = ["taskset", "-c", cpus, *args]
    env = dict(os.environ, LD_LIBRARY_PATH=_library_path(inst.root / "lib", inst.libs))
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"perf_analyzer exited with {done.returncode}:\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


# The answer both served models give: per request, the sum of its inputs' features.
RESPOND = """
    def respond(self, requests):
        responses = []
        for request in requests:
            xs = [pb_utils.get_input_tensor_by_name(request, name).as_numpy()
                  for name in INPUTS]
            y = np.zeros((xs[0].shape[0], 1), dtype=np.float32)
            for x in xs:
                y += x.sum(axis=1, keepdims=True, dtype=np.float32)
            responses.append(pb_utils.InferenceResponse([self.tensor(y)]))
        return responses

    def tensor(self, y):
        # pb_utils.Tensor(name, array) sends an empty tensor under NumPy 2 where the stub is
        # built against NumPy 1 ("output tensor shape does not match size of output"), and
        # DLPack hands the buffer over intact; where DLPack fails instead (seen on a GPU
        # machine: "PyCapsule_GetPointer called with incorrect name"), the plain tensor
        try:
            return pb_utils.Tensor.from_dlpack(OUTPUT, y)
        except Exception:
            return pb_utils.Tensor(OUTPUT, y)
"""

# The Python-backend model of write_sleeping_model: one execute() call per batch, which sleeps
# S(k) = base + per_item k (times a lognormal factor of mean 1 where cv > 0)
SLEEPING_MODEL = """\
import math
import time

import numpy as np
import triton_python_backend_utils as pb_utils

BASE, PER_ITEM, CV, SEED = {base!r}, {per_item!r}, {cv!r}, {seed!r}
INPUTS, OUTPUT = {inputs!r}, {output!r}
SIGMA = math.sqrt(math.log1p(CV * CV))


class TritonPythonModel:
    def initialize(self, args):
        self.rng = np.random.default_rng(SEED)

    def execute(self, requests):
        k = len(requests)
        seconds = BASE + PER_ITEM * k
        if CV > 0:
            seconds *= math.exp(SIGMA * self.rng.standard_normal() - SIGMA * SIGMA / 2)
        time.sleep(seconds)
        return self.respond(requests)
""" + RESPOND

# A model that computes one of qmodel's profiling workloads per batch. The stub's embedded
# interpreter ignores PYTHONPATH, so the caller's import path is appended (after the stub's
# own, whose NumPy the stub was built with) for qmodel, threadpoolctl and CuPy. Each batch
# size's call is built once, with the workload's own inputs, so a batch of k costs what
# ``qmodel profile`` measures for k. On the "cupy" backend the instance is a KIND_GPU one,
# its arrays live on the GPU and an execution ends when the GPU has finished the batch.
WORKLOAD_MODEL = """\
import sys

sys.path += [p for p in {paths!r} if p not in sys.path]

import numpy as np  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402

from qmodel.profiling import WORKLOADS  # noqa: E402

WORKLOAD, LARGEST, SEED, BLAS_THREADS = {workload!r}, {largest!r}, {seed!r}, {blas_threads!r}
BACKEND = {backend!r}
INPUTS, OUTPUT = {inputs!r}, {output!r}


class TritonPythonModel:
    def initialize(self, args):
        rng = np.random.default_rng(SEED)
        if BACKEND == "cupy":
            import cupy
            cupy.cuda.Device(int(args.get("model_instance_device_id", 0) or 0)).use()
            self.finish = cupy.cuda.get_current_stream().synchronize
            xp = cupy
        else:
            from threadpoolctl import threadpool_limits
            self.limit = threadpool_limits(limits=BLAS_THREADS, user_api="blas")
            self.finish, xp = (lambda: None), np
        self.calls = [None] + [WORKLOADS[WORKLOAD](k, rng, xp) for k in range(1, LARGEST + 1)]
        for call in self.calls[1:]:         # first calls load kernels and allocate
            call()
        self.finish()

    def execute(self, requests):
        self.calls[len(requests)]()
        self.finish()
        return self.respond(requests)
""" + RESPOND


# where a workload model computes: "numpy" on CPU instances, "cupy" on GPU instances
BACKENDS = ("numpy", "cupy")


def check_backend(backend: str) -> None:
    """A ValueError naming the backends unless ``backend`` is one of BACKENDS."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'numpy' (CPU instances) or 'cupy' (GPU "
                         f"instances), got {backend!r}")


def write_sleeping_model(repository, name: str, node, *, cv: float = 0.0, seed: int = 0):
    """A Python-backend model in ``repository/name`` with ``node``'s batching knobs (CPU
    instances) that sleeps S(k) = base + per_item k per batch of k requests, taken from
    ``node.service`` (an affine law); input "x" (4 floats), output "y"."""
    from .config import write_config

    service = node.service
    if service.kind != "affine":
        raise ValueError("write_sleeping_model needs an affine service law "
                         "(ServiceTime.affine(base, per_item))")
    folder = Path(repository) / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(write_config(
        node, name, kind="KIND_CPU", inputs=[("x", "TYPE_FP32", [4])],
        outputs=[("y", "TYPE_FP32", [1])]))
    _write_sleeper(folder, service, ["x"], "y", cv, seed)
    return folder


def write_workload_model(repository, name: str, node, workload: str, *, seed: int = 0,
                         blas_threads: int = 1, backend: str = "numpy"):
    """A Python-backend model in ``repository/name`` with ``node``'s batching knobs that
    computes qmodel's profiling workload ``workload`` (a name in
    :data:`qmodel.profiling.WORKLOADS`) per batch: on the "numpy" backend in CPU instances
    with ``blas_threads`` BLAS threads, on "cupy" in GPU instances on GPU 0 (an execution
    ends when the GPU has finished; ``blas_threads`` does not apply). ``node.service`` is
    not used: the server's executions are the service law. Input "x" (4 floats), output
    "y"."""
    from ..profiling import WORKLOADS
    from .config import write_config

    if workload not in WORKLOADS:
        raise ValueError(f"workload {workload!r} is unknown; use one of {sorted(WORKLOADS)}")
    if isinstance(blas_threads, bool) or not isinstance(blas_threads, int) or blas_threads < 1:
        raise ValueError(f"blas_threads must be a whole number >= 1, got {blas_threads!r}")
    check_backend(backend)
    folder = Path(repository) / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    # on the GPU: every instance on GPU 0, as the node's count says (without a list Triton
    # would place that count on every GPU it sees)
    gpu = dict(kind="KIND_GPU", gpus=[0]) if backend == "cupy" else dict(kind="KIND_CPU")
    (folder / "config.pbtxt").write_text(write_config(
        node, name, inputs=[("x", "TYPE_FP32", [4])], outputs=[("y", "TYPE_FP32", [1])],
        **gpu))
    (folder / "1" / "model.py").write_text(WORKLOAD_MODEL.format(
        workload=workload, largest=int(node.max_batch_size), seed=int(seed),
        blas_threads=int(blas_threads), backend=backend, inputs=["x"], output="y",
        paths=[str(Path(p).resolve()) for p in sys.path if p]))
    return folder


def _write_sleeper(folder: Path, service, inputs, output: str, cv: float, seed: int) -> None:
    """The Python backend's model.py: sleep S(k) per batch, answer the inputs' sum."""
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "1" / "model.py").write_text(SLEEPING_MODEL.format(
        base=float(service.base), per_item=float(service.per_item), cv=float(cv),
        seed=int(seed), inputs=list(inputs), output=output))


def write_sleeping_ensemble(repository, name: str, ensemble, *, cv: float = 0.0,
                            seed: int = 0):
    """``ensemble`` as a Triton ensemble ``name`` in ``repository``: its config
    (:func:`qmodel.triton.write_config`) and, per stage, a sleeping Python-backend model as
    in :func:`write_sleeping_model` (CPU instances) that reads the stage's inputs (FP32 [1])
    and writes OUTPUT. Returns the ensemble's folder."""
    from .config import write_config

    texts = write_config(ensemble, name, kind="KIND_CPU")
    graph = ensemble.graph
    for stage, node in ensemble.stages.items():
        if node.service.kind != "affine":
            raise ValueError(f"write_sleeping_ensemble: stage {stage!r} needs an affine "
                             "service law (ServiceTime.affine(base, per_item))")
        ups = sorted(graph.predecessors(stage))
        inputs = [f"IN_{u}" for u in ups] or ["INPUT"]
        _write_sleeper(Path(repository) / stage, node.service, inputs, "OUTPUT", cv, seed)
    for model, text in texts.items():
        folder = Path(repository) / model
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "config.pbtxt").write_text(text)
    (Path(repository) / name / "1").mkdir(exist_ok=True)    # an ensemble's empty version
    return Path(repository) / name
