"""A real JupyterLab on loopback for the browser tests: a random port, no token, every folder temporary (its
root, config, data, runtime, IPython's), the package on the kernel's path; started once, stopped at the end."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat

from tests.conftest import ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(timeout: float = 90) -> Iterator[tuple[str, Path, float]]:
    """(url, root folder, seconds it took to answer) of a JupyterLab served from a fresh temporary folder."""
    with tempfile.TemporaryDirectory(prefix="lab-") as tmp:
        base = Path(tmp)
        root = base / "root"
        root.mkdir()
        env = os.environ | {
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "JUPYTER_CONFIG_DIR": str(base / "config"),
            "JUPYTER_DATA_DIR": str(base / "data"),
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
            "IPYTHONDIR": str(base / "ipython"),
        }
        labconfig = base / "config" / "labconfig"
        labconfig.mkdir(parents=True)
        news = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
        (labconfig / "page_config.json").write_text(json.dumps(news))
        port = free_port()
        args = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
        args += [f"--ServerApp.root_dir={root}", "--IdentityProvider.token=", "--ServerApp.password="]
        args += ["--ServerApp.disable_check_xsrf=True", "--LabApp.expose_app_in_browser=True", "--allow-root"]
        log = open(base / "lab.log", "wb")
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=root)
        url = f"http://127.0.0.1:{port}"
        try:
            while True:
                try:
                    urllib.request.urlopen(f"{url}/api/status", timeout=2).read()
                    break
                except OSError:
                    if proc.poll() is not None or time.perf_counter() - t0 > timeout:
                        raise RuntimeError((base / "lab.log").read_text()[-3000:]) from None
                    time.sleep(0.3)
            yield url, root, time.perf_counter() - t0
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of these code cells at `path`."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path
