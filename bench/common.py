"""What the benches share: the served app, random-weight ViTs, timing, memory, and their Markdown tables.

Every bench runs from the repository root as a module, `python -m bench.<name>`, so `attention`,
`app` and `tests` import as they are; a bench that measures in a fresh process starts itself the
same way (`in_fresh_process`).
"""

from __future__ import annotations

import gc
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

ROOT = Path(__file__).resolve().parent.parent
PHOTO = ROOT / "examples" / "photos" / "chelsea.jpg"  # 720x480 after the benches' resize; 30x45 patches at 480 px
DIGITS = [ROOT / "examples" / "digits" / f"digit_{i}.png" for i in range(10)]
DINO_S16 = "vit_small_patch16_224.dino"  # timm name of the app's default model, dino_vits16
DINO_S16_REPO = f"timm/{DINO_S16}"


# ----- the served app ------------------------------------------------------------------------
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def app_env(prefix: str = "bench", offline: bool = True, **extra: str) -> dict[str, str]:
    """This process's environment for a served app, with `extra` on top: no analytics, Gradio's temp
    and examples folders fresh, and (offline) HF_HUB_OFFLINE=1 with an empty HF_HOME, so the ViT
    model is mnist_vit. A folder named in `extra` is used as given."""
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **({"HF_HUB_OFFLINE": "1"} if offline else {}), **extra}
    fresh = {"GRADIO_TEMP_DIR": "gradio", "GRADIO_EXAMPLES_CACHE": "examples", **({"HF_HOME": "hf"} if offline else {})}
    for var, kind in fresh.items():
        if var not in extra:
            env[var] = tempfile.mkdtemp(prefix=f"{prefix}-{kind}-")
    return env


@dataclass
class Server:
    """A server process started by `start_server`: its process, its URL, its environment, its log."""

    proc: subprocess.Popen
    url: str
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None  # stdout and stderr, when asked for

    def stop(self, kill: bool = False) -> int | None:
        """Ends the process (terminate, or kill); returns its exit code if it had exited by itself."""
        code = self.proc.poll()
        if code is None:
            if kill:
                self.proc.kill()
            else:
                self.proc.terminate()
            self.proc.wait(timeout=30)
        return code

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def answers(url: str, timeout: float = 180, poll: float = 0.5, proc: subprocess.Popen | None = None) -> bool:
    """Whether `url` answers 2xx within `timeout` s, asked every `poll` s (False at once if `proc` ends)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and (proc is None or proc.poll() is None):
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return True
        except OSError:
            time.sleep(poll)
    return False


def start_server(
    cmd: Sequence[str],
    port: int,
    env: dict[str, str] | None = None,
    timeout: float = 180,
    path: str = "",
    poll: float = 0.5,
    log: Path | None = None,
) -> Server:
    """Starts `cmd` (a server on 127.0.0.1:`port`) and returns once `url + path` answers 2xx; exits
    the bench with what went wrong (and the log's tail) if the process ends or `timeout` s pass first."""
    url = f"http://127.0.0.1:{port}/"
    out = open(log, "wb") if log else subprocess.DEVNULL  # noqa: SIM115 - the child writes it until it ends
    proc = subprocess.Popen(list(cmd), cwd=ROOT, env=env or dict(os.environ), stdout=out, stderr=subprocess.STDOUT)
    server = Server(proc, url, env or dict(os.environ), log)
    if answers(url + path, timeout, poll, proc):
        return server
    code = server.stop(kill=True)
    tail = log.read_text(errors="replace")[-3000:] if log else ""
    why = f"exited with code {code}" if code is not None else f"did not answer within {timeout:.0f} s"
    raise SystemExit(f"{shlex.join(cmd)} {why} at {url + path}\n{tail}")


def start_app(env: dict[str, str] | None = None, port: int | None = None, **kw: Any) -> Server:
    """`python app.py`, as users run it, on `port` (default: a free one); see `start_server`."""
    port = port or free_port()
    env = {**(env if env is not None else app_env()), "GRADIO_SERVER_PORT": str(port)}
    return start_server([sys.executable, str(ROOT / "app.py")], port, env, **kw)


# ----- random-weight models ------------------------------------------------------------------
def random_vit(name: str = DINO_S16, seed: int = 0, **kw: Any) -> torch.nn.Module:
    """A timm model with seeded random weights (the hub is out of reach here; time and memory do not
    depend on the weights), in eval mode: by default no head (`num_classes=0`) and any input size."""
    import timm
    import torch

    torch.manual_seed(seed)
    return timm.create_model(name, pretrained=False, **{"num_classes": 0, "dynamic_img_size": True, **kw}).eval()


def fake_hub_cache(home: Path, name: str = DINO_S16) -> None:
    """Random weights of timm's `name` (no head) put into `home`/hub exactly as a hub download would."""
    from safetensors.torch import save

    from tests.hub_cache import add_to_hub_cache

    model = random_vit(name, dynamic_img_size=False)
    data = save({k: v.contiguous() for k, v in model.state_dict().items()})
    add_to_hub_cache(f"timm/{name}", {"model.safetensors": data}, cache_dir=home / "hub")


def offline_dino(prefix: str = "bench", force: bool = False) -> tuple[Path | None, str]:
    """Makes `load_vit("dino_vits16")` work here: the real weights when cached (unless `force`), else a
    temporary HF_HOME (this process's and its children's, HF_HUB_OFFLINE=1) holding random weights of
    the same architecture (same cost). Returns (that home or None, a line saying which weights)."""
    from attention.vit.models.sources import is_cached

    if not force and is_cached(DINO_S16):
        return None, f"real {DINO_S16_REPO} weights from the HF cache"
    home = Path(tempfile.mkdtemp(prefix=f"{prefix}-hf-"))
    os.environ.update(HF_HOME=str(home), HF_HUB_OFFLINE="1")
    import huggingface_hub.constants as c

    c.HF_HOME, c.HF_HUB_CACHE, c.HF_HUB_OFFLINE = str(home), str(home / "hub"), True
    fake_hub_cache(home)
    return home, f"RANDOM weights of {DINO_S16} in a temporary HF cache (real ones not cached)"


# ----- timing --------------------------------------------------------------------------------
def interleaved_times(
    fns: Sequence[Callable[[], object]],
    repeats: int,
    warmup: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> list[list[float]]:
    """Wall seconds of each fn over `repeats` rounds, calls interleaved (a, b, a, b, ...) so drifting
    load hits all alike; one untimed call each first (model load, first-call costs) unless not `warmup`.
    clock: `time.thread_time` counts the calling thread's CPU seconds instead (torch on 1 thread on a shared
    machine: the time the work took, not the time it waited for a core)."""
    if warmup:
        for fn in fns:
            fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, ts in zip(fns, times):
            t = clock()
            fn()
            ts.append(clock() - t)
    return times


def interleaved_medians(
    fns: dict[str, Callable[[], object]],
    repeats: int,
    warmup: bool = True,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """{name: median seconds by `clock` (wall by default)} of `interleaved_times` over the named fns."""
    times = interleaved_times(list(fns.values()), repeats, warmup, clock)
    return {name: statistics.median(ts) for name, ts in zip(fns, times)}


def median_seconds(fn: Callable[[], object], repeats: int, warmup: bool = False) -> float:
    """Median wall seconds of `repeats` calls of fn (after one untimed call if `warmup`)."""
    return statistics.median(interleaved_times([fn], repeats, warmup)[0])


def cuda_synced(fn: Callable[[], object]) -> Callable[[], object]:
    """fn followed by `torch.cuda.synchronize()` when CUDA is in use, so its time includes the GPU's."""
    import torch

    if not torch.cuda.is_available():
        return fn

    def run() -> object:
        out = fn()
        torch.cuda.synchronize()
        return out

    return run


def load_average() -> float:
    """The 1-minute load average (benches print it: on a shared machine it says how noisy a run was)."""
    return os.getloadavg()[0]


# ----- memory and CPU of a process -----------------------------------------------------------
def status_mb(field_name: str, pid: int | str = "self") -> float:
    """A /proc/<pid>/status memory field (VmRSS, VmHWM: the peak) in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field_name)


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of a process, MB."""
    return status_mb("VmRSS", pid)


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds a process has used so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RssPeak:
    """The peak RSS (MB, `.peak`) of process `pid`, sampled every `every` s in a thread while in `with`."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every, self.peak, self._stop = pid, every, rss_mb(pid), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
            except OSError:  # the process ended
                return

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def reset_peak() -> float:
    """Collects garbage, resets this process's peak RSS (VmHWM) to its RSS now and returns that RSS (MB)."""
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return rss_mb()


def peak_growth_mb(fn: Callable[[], object]) -> float:
    """How far this process's RSS rose above its level before fn() at the peak during the call, MB."""
    base = reset_peak()
    fn()
    return status_mb("VmHWM") - base


def in_fresh_process(
    module: str, args: Sequence[str], env: dict[str, str] | None = None, check: bool = True, unmap: bool = True
) -> dict:
    """Runs `python -m module *args` (a bench's child) and returns the JSON object its last stdout line
    prints. With `unmap`, glibc's mmap threshold is fixed, so each large tensor goes back to the OS when
    freed and RSS follows live memory. With `check=False` a failed child gives {"error": its last stderr line}."""
    env = dict(env or os.environ)
    if unmap:
        env["MALLOC_MMAP_THRESHOLD_"] = "65536"
    out = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True, env=env)
    if out.returncode:
        if check:
            raise SystemExit(f"python -m {module} {shlex.join(args)} failed:\n{out.stderr[-3000:]}")
        return {"error": (out.stderr.strip().splitlines() or ["(no output)"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----- Markdown for README.md and docs/ --------------------------------------------------------
def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table: the header, its rule, one line a row (cells as given, '|' escaped)."""

    def line(cells: Sequence[object]) -> str:
        return "|" + "|".join(f" {c} ".replace("|", "\\|") if str(c) else " " for c in cells) + "|"

    return "\n".join([line(header), line(["---"] * len(header)), *(line(r) for r in rows)])


def readme_block(bench: str, table: str, body: str) -> str:
    """`body` between the markers for `bench`'s table `table`, naming the command that made it (this
    process's own arguments): the page quoting it (README.md or a page of docs/) takes the printed block
    verbatim, by hand or through `bench.blocks.refresh_blocks`."""
    command = shlex.join(["python", "-m", f"bench.{bench}", *sys.argv[1:]])
    return f"<!-- bench:{bench} {table}; refresh: {command} -->\n{body}\n<!-- /bench -->"
