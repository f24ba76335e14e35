"""A kernel for one submission: its own temporary folder, no network, limits on time and memory.

Isolation uses Linux namespaces through ``unshare`` (util-linux) when the machine allows
unprivileged ones: a new network namespace (no interface but loopback, so no network) and a new
mount namespace in which the instructor's folders (source notebooks with solutions, the other
submissions, the report folder) are covered by empty ``tmpfs`` mounts. Where ``unshare`` is not
permitted the kernel runs without that isolation and every result says so.

Limits: a wall-clock limit per cell and per notebook, and a memory limit on the kernel's process
tree (resident memory, polled every 0.1 s). Breaking one stops that kernel; the grader records
why and goes on with the next submission.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

__all__ = ["Limits", "SandboxResult", "run_submission", "isolation_available"]


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission.

    Attributes:
        cell_seconds: float, wall-clock seconds a cell (or one graded call) may take.
        notebook_seconds: float, wall-clock seconds for the whole notebook and all graded calls.
        memory_mb: int, resident memory of the kernel and its child processes, in MiB.
    """

    cell_seconds: float = 60.0
    notebook_seconds: float = 300.0
    memory_mb: int = 4096


@dataclass
class SandboxResult:
    """What happened in the kernel: the text each graded call printed, and any stop reason."""

    replies: dict = field(default_factory=dict)  # request key -> printed text
    problems: list = field(default_factory=list)  # human-readable notes (cell errors, timeouts)
    stopped: str | None = None  # why the kernel was stopped early, if it was
    isolated: bool = False


@lru_cache(maxsize=1)
def isolation_available() -> bool:
    """True when ``unshare`` can create user, mount and network namespaces here."""
    try:
        return subprocess.run(["unshare", "-rmn", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


class _SandboxedKernelManager(KernelManager):
    """Starts ipykernel through :mod:`transformer_course.grading.launch`, inside namespaces if possible."""

    launch_prefix: list = []

    def format_kernel_cmd(self, extra_arguments=None):
        return [*self.launch_prefix, "-f", self.connection_file]


def _process_tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    total, stack, page = 0, [pid], os.sysconf("SC_PAGE_SIZE")
    while stack:
        current = stack.pop()
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
        stack.extend(children.get(current, []))
    return total


class _Watchdog(threading.Thread):
    def __init__(self, manager: KernelManager, limits: Limits):
        super().__init__(daemon=True)
        self.manager, self.limits, self.reason, self.done = manager, limits, None, threading.Event()
        self.deadline = time.monotonic() + limits.notebook_seconds

    def run(self):
        while not self.done.wait(0.1):
            process = getattr(self.manager.provisioner, "process", None)
            if process is None or process.poll() is not None:
                continue
            if time.monotonic() > self.deadline:
                self.reason = f"the notebook ran past its {self.limits.notebook_seconds:.0f} s limit"
            elif _process_tree_rss(process.pid) > self.limits.memory_mb * 2**20:
                self.reason = f"the kernel used more than {self.limits.memory_mb} MiB of memory"
            if self.reason:
                process.kill()  # the client notices a dead kernel and the grader records why
                return


def _stdout(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream" and output.get("name") == "stdout")


def run_submission(notebook, requests: dict, hide: list, limits: Limits, environment: dict | None = None) -> SandboxResult:
    """Run a submitted notebook top to bottom in a sandboxed kernel, then the grader's requests.

    Args:
        notebook: the (tamper-checked) notebook to run; a cell that errors does not stop the run.
        requests: key -> Python source of one graded call (from ``protocol.request_code``).
        hide: folders the kernel must not see (covered by empty mounts when isolation works).
        limits: :class:`Limits`.
        environment: extra environment variables for the kernel.

    Returns:
        :class:`SandboxResult`; never raises for anything the submission does.
    """
    import tempfile

    result = SandboxResult(isolated=isolation_available())
    with tempfile.TemporaryDirectory(prefix="submission-") as workdir:
        launcher = [sys.executable, "-m", "transformer_course.grading.launch", "--workdir", workdir]
        if result.isolated:
            launcher.append("--isolated")
        for folder in hide:
            launcher += ["--hide", str(Path(folder).resolve())]
        manager = _SandboxedKernelManager(transport="ipc", ip=str(Path(workdir, "kernel")))
        manager.launch_prefix = (["unshare", "-rmn", "--"] if result.isolated else []) + launcher + ["--"]
        manager.connection_file = str(Path(workdir, "connection.json"))
        env = {**os.environ, **(environment or {}), "HOME": workdir, "PYTHONNOUSERSITE": "1"}
        watchdog = _Watchdog(manager, limits)
        client = NotebookClient(notebook, km=manager, timeout=limits.cell_seconds, allow_errors=True,
                                interrupt_on_timeout=False, record_timing=False,
                                resources={"metadata": {"path": workdir}})
        try:
            with client.setup_kernel(env=env, cwd=workdir):
                watchdog.start()
                _run_cells(client, notebook, requests, result)
        except DeadKernelError:
            result.stopped = watchdog.reason or "the kernel died (it crashed or was killed)"
        except Exception as error:  # noqa: BLE001 - a submission must never crash the batch
            result.stopped = watchdog.reason or f"the kernel could not run the notebook ({type(error).__name__}: {error})"
        finally:
            watchdog.done.set()
            if watchdog.reason and not result.stopped:
                result.stopped = watchdog.reason
            try:
                manager.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
    return result


def _run_cell(client, cell, index, result, label) -> bool:
    """Run one cell; on a timeout interrupt the kernel. False if the kernel stopped answering."""
    try:
        client.execute_cell(cell, index)
    except CellTimeoutError:
        result.problems.append(f"{label} ran past the {client.timeout:.0f} s cell limit and was interrupted")
        client.km.interrupt_kernel()
        probe = nbformat.v4.new_code_cell("pass")
        try:
            client.execute_cell(probe, index)
        except CellTimeoutError:
            result.stopped = f"{label} ran past the {client.timeout:.0f} s cell limit and ignored the interrupt"
            return False
    return True


def _run_cells(client, notebook, requests, result) -> None:
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if not _run_cell(client, cell, index, result, f"cell {index + 1}"):
            return
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                result.problems.append(f"cell {index + 1} raised {output.get('ename')}: {str(output.get('evalue'))[:120]}")
    for key, code in requests.items():
        notebook.cells.append(nbformat.v4.new_code_cell(code))
        cell = notebook.cells[-1]
        if not _run_cell(client, cell, len(notebook.cells) - 1, result, f"the graded call {key}"):
            return
        result.replies[key] = _stdout(cell)
