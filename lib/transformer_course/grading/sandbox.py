"""A kernel for one submission, in an allow-list sandbox, with limits on time, memory and output.

The sandbox is bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), which needs
unprivileged user namespaces from the host. Inside it the kernel has:

* no capabilities, and its own user, PID, IPC, UTS, cgroup and network namespaces: no network
  (not even loopback to the host), and every process it starts dies with it;
* a file system built from an allow-list: the system's programs and libraries, the Python
  installation and virtual environment, the course package (less the grader's references and
  case generators, :mod:`.references`, which are covered) and the data cache, all read-only;
  a private, empty working folder (its home) and a private ``/tmp``; nothing else, so the
  instructor's notebooks, ``.git``, other submissions and the reports are not there at all;
* an environment built from an allow-list (nothing of the grader's own environment, so no
  secret in it reaches student code).

Limits: a wall-clock limit per cell and per notebook, and a memory limit on the whole sandbox
(resident memory of all its processes, polled every 0.1 s). Breaking one stops the sandbox; the
grader records why and goes on with the next submission. Without bubblewrap, grading refuses to
run unless the instructor asks for ``sandbox=False`` (``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from jupyter_client.manager import KernelManager

from . import protocol

__all__ = ["Limits", "SandboxResult", "run_submission", "sandbox_available", "sandbox_command", "SandboxUnavailable",
           "KERNEL_ENVIRONMENT"]

# The only variables a kernel gets from the grader's environment (when set there).
KERNEL_ENVIRONMENT = ("COURSE_PROFILE", "COURSE_DATA_DIR", "KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "MPLBACKEND", "LANG")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or the host refuses it the namespaces it needs."""


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
    timed_out: set = field(default_factory=set)  # request keys that ran past the cell limit
    isolated: bool = False


@lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """True when bubblewrap is installed and can make the namespaces the sandbox uses here."""
    if shutil.which("bwrap") is None:
        return False
    try:
        probe = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--", "true"]
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _package_folder() -> Path:
    """The folder of the installed ``transformer_course`` package (a checkout's ``lib/`` when editable)."""
    return Path(__file__).resolve().parents[1]


def _readonly_paths() -> list[str]:
    """What a kernel may read: system folders, Python, its packages, the course package, the data."""
    paths = [str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve()), str(_package_folder())]
    paths += [str(Path(entry).resolve()) for entry in sys.path
              if entry and Path(entry).is_dir() and Path(entry).name in ("site-packages", "dist-packages")]
    data = os.environ.get("COURSE_DATA_DIR")
    if data and Path(data).is_dir():
        paths.append(str(Path(data).resolve()))
    kept = []
    for path in sorted(set(paths), key=len):  # a folder inside one already kept adds nothing
        if not any(path == other or path.startswith(other.rstrip("/") + "/") for other in kept):
            kept.append(path)
    return kept


def sandbox_command(workdir: str, environment: dict) -> list[str]:
    """The ``bwrap`` command line that starts a kernel in the sandbox (see the module docstring).

    Args:
        workdir: str, the kernel's private working folder (it holds the connection file and the
            kernel's sockets, so it is the one folder shared with the grader).
        environment: the kernel's whole environment.

    Returns:
        list of str, ending with the Python command that starts ``ipykernel``.
    """
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--clearenv",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    for system in ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/etc"):
        if os.path.islink(system):
            command += ["--symlink", os.readlink(system), system]
        elif os.path.isdir(system):
            command += ["--ro-bind", system, system]
    for path in _readonly_paths():
        command += ["--ro-bind", path, path]
    # The grader's references and case generators: covered, with the compiled copies beside them.
    grading = _package_folder() / "grading"
    command += ["--ro-bind", "/dev/null", str(grading / "references.py")]
    if (grading / "__pycache__").is_dir():
        command += ["--tmpfs", str(grading / "__pycache__")]
    command += ["--bind", workdir, workdir, "--chdir", workdir]
    for key, value in environment.items():
        command += ["--setenv", key, value]
    return [*command, "--", sys.executable, "-m", "ipykernel_launcher"]


def _kernel_environment(workdir: str, extra: dict | None) -> dict:
    """The allow-listed environment of a kernel: nothing else of the grader's reaches it."""
    environment = {key: os.environ[key] for key in KERNEL_ENVIRONMENT if key in os.environ}
    environment.update({key: str(value) for key, value in (extra or {}).items() if key in KERNEL_ENVIRONMENT})
    environment.update({
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": workdir,
        "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "LANG": environment.get("LANG", "C.UTF-8"),
    })
    return environment


class _SandboxedKernelManager(KernelManager):
    """Starts ipykernel with the command in ``launch_prefix`` (the sandbox, or plain Python)."""

    launch_prefix: list = []

    def format_kernel_cmd(self, extra_arguments=None):
        return [*self.launch_prefix, "-f", self.connection_file]

    def interrupt_kernel(self) -> None:
        """Interrupt through the control channel: a signal sent to the sandbox's process group would
        not reach a kernel inside its own PID namespace; ipykernel interrupts itself on the message."""
        if not self.has_kernel:
            return
        self._connect_control_socket()
        self.session.send(self._control_socket, self.session.msg("interrupt_request", content={}))


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


class _KernelStopped(Exception):
    pass


# After the shell channel's execute_reply, iopub is read until it reports idle or stays quiet for
# this long: an idle message can be lost, the reply cannot (nbclient does the same).
_IOPUB_DRAIN_SECONDS = 1.0


class _ReplyLines:
    """The part of a graded call's stdout the grader reads, in bounded memory.

    Keeps the lines that start with the request's nonce (at most 4, each at most
    ``protocol.MAX_REPLY_CHARACTERS`` long) and counts every occurrence of the nonce, also inside
    other lines or across message boundaries; everything else the kernel prints is dropped as it
    arrives, so a call that floods stdout costs the grader no memory.
    """

    def __init__(self, nonce: str | None):
        self.nonce, self.partial, self.carry, self.lines, self.count = nonce, "", "", [], 0

    def add(self, text: str) -> None:
        if not self.nonce:
            return
        self.count += (self.carry + text).count(self.nonce)
        self.carry = (self.carry + text)[-(len(self.nonce) - 1):]
        pieces = (self.partial + text).split("\n")
        self.partial = pieces.pop()
        for line in pieces:
            if line.startswith(self.nonce) and len(self.lines) < 4:
                self.lines.append(line)
        if len(self.partial) > protocol.MAX_REPLY_CHARACTERS:
            self.partial = "\x00"  # too long to be a reply; the rest of this line is dropped

    def text(self) -> str:
        lines = self.lines + ([self.partial] if self.partial.startswith(self.nonce or "\x00") else [])
        if self.count > 1 and "".join(lines).count(self.nonce) < 2:
            lines.append(self.nonce)  # seen more than once: parse_reply calls the reply forged
        return "\n".join(lines)


def _execute(manager, client, code: str, timeout: float, nonce: str | None = None):
    """Run ``code``; return (the reply lines for ``nonce``, (error name, value) or None, timed out?).

    Done when the shell channel's ``execute_reply`` to this request has come and iopub has said
    idle or stayed quiet for ``_IOPUB_DRAIN_SECONDS``. Reads only messages whose parent is this
    request, so output from an earlier, interrupted request can never be mistaken for this one's.

    Raises:
        _KernelStopped: if the kernel died (crashed, or was killed by the watchdog).
    """
    msg_id = client.execute(code, store_history=False, allow_stdin=False)
    deadline, collected, error = time.monotonic() + timeout, _ReplyLines(nonce), None
    replied_at, idle = None, False
    while True:
        now = time.monotonic()
        if now > deadline:
            return collected.text(), error, True
        if replied_at is None:
            try:
                shell = client.get_shell_msg(timeout=0.01)
            except queue.Empty:
                shell = None
            if shell is not None and shell.get("parent_header", {}).get("msg_id") == msg_id:
                replied_at = time.monotonic()
                content = shell.get("content", {})
                if content.get("status") == "error" and error is None:
                    error = (content.get("ename"), content.get("evalue"))
        if replied_at is not None and (idle or time.monotonic() - replied_at > _IOPUB_DRAIN_SECONDS):
            return collected.text(), error, False
        try:
            message = client.get_iopub_msg(timeout=0.05)
        except queue.Empty:
            if not manager.is_alive():
                raise _KernelStopped() from None
            continue
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream" and content.get("name") == "stdout":
            collected.add(content.get("text", ""))
        elif kind == "error":
            error = (content.get("ename"), content.get("evalue"))
        elif kind == "status" and content.get("execution_state") == "idle":
            idle = True
            if replied_at is not None:
                return collected.text(), error, False


def _run(manager, client, code, limits, result, label, nonce=None):
    """Run one cell or graded call; interrupt it at the cell limit. None if the kernel stopped answering."""
    text, error, timed_out = _execute(manager, client, code, limits.cell_seconds, nonce)
    if timed_out:
        result.problems.append(f"{label} ran past the {limits.cell_seconds:.0f} s cell limit and was interrupted")
        manager.interrupt_kernel()
        _, _, still_running = _execute(manager, client, "pass", limits.cell_seconds)
        if still_running:
            result.stopped = f"{label} ran past the {limits.cell_seconds:.0f} s cell limit and ignored the interrupt"
            return None
    return text, error, timed_out


@contextmanager
def _working_folder():
    """A fresh folder for one kernel, removed afterwards whatever the kernel left in it.

    ``shutil.rmtree`` recurses in Python and gives up on folders nested thousands deep; ``rm -rf``
    does not. A folder that cannot be removed is left behind rather than stopping the batch.
    """
    workdir = tempfile.mkdtemp(prefix="submission-")
    try:
        yield workdir
    finally:
        try:
            shutil.rmtree(workdir)
        except (OSError, RecursionError):
            subprocess.run(["rm", "-rf", "--one-file-system", workdir], capture_output=True, timeout=300, check=False)


def run_submission(notebook, requests: dict, limits: Limits, environment: dict | None = None,
                   sandbox: bool = True) -> SandboxResult:
    """Run a submitted notebook top to bottom in a sandboxed kernel, then the grader's requests.

    Args:
        notebook: the (tamper-checked) notebook to run; a cell that errors does not stop the run.
        requests: key -> (Python source of one graded call from ``protocol.request_code``, its
            nonce); only the lines carrying the nonce are kept from the call's output. Keys
            look like ``"04.1#2"`` (exercise, case), and after one call of an exercise runs past
            the cell limit that exercise's other calls are skipped.
        limits: :class:`Limits`.
        environment: values for the kernel's allow-listed variables (``KERNEL_ENVIRONMENT``).
        sandbox: bool, run the kernel in the bubblewrap sandbox; False runs it unconfined (only
            for code the instructor trusts).

    Returns:
        :class:`SandboxResult`; never raises for anything the submission does.
    """
    result = SandboxResult(isolated=sandbox)
    with _working_folder() as workdir:
        env = _kernel_environment(workdir, environment)
        manager = _SandboxedKernelManager(transport="ipc", ip=str(Path(workdir, "kernel")))
        manager.connection_file = str(Path(workdir, "connection.json"))
        if sandbox:
            manager.launch_prefix = sandbox_command(workdir, env)
        else:  # unconfined: the same allow-listed environment, the private folder as home and /tmp
            env["TMPDIR"], env["MPLCONFIGDIR"] = workdir, workdir
            manager.launch_prefix = [sys.executable, "-m", "ipykernel_launcher"]
        watchdog, client = _Watchdog(manager, limits), None
        try:
            # The kernel's own stdout and stderr (its start-up banner, crash output) are not the
            # grader's: replies come through the kernel protocol.
            manager.start_kernel(env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            watchdog.start()
            client = manager.client()
            client.start_channels()
            client.wait_for_ready(timeout=limits.cell_seconds)
            _run_all(manager, client, notebook, requests, limits, result)
        except _KernelStopped:
            result.stopped = watchdog.reason or "the kernel died (it crashed or was killed)"
        except Exception as error:  # noqa: BLE001 - a submission must never crash the batch
            result.stopped = watchdog.reason or f"the kernel could not run the notebook ({type(error).__name__}: {error})"
        finally:
            watchdog.done.set()
            if watchdog.reason and not result.stopped:
                result.stopped = watchdog.reason
            if client is not None:
                client.stop_channels()
            try:
                manager.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
    return result


def _run_all(manager, client, notebook, requests, limits, result) -> None:
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        outcome = _run(manager, client, cell.source, limits, result, f"cell {index + 1}")
        if outcome is None:
            return
        if outcome[1] is not None and not outcome[2]:
            result.problems.append(f"cell {index + 1} raised {outcome[1][0]}: {str(outcome[1][1])[:120]}")
    skipped = set()
    for key, (code, nonce) in requests.items():
        exercise = key.split("#")[0]
        if exercise in skipped:  # one endless call is enough: skip that exercise's other cases
            continue
        outcome = _run(manager, client, code, limits, result, f"the graded call {key}", nonce)
        if outcome is None:
            return
        if outcome[2]:
            skipped.add(exercise)
            result.timed_out.add(key)
        result.replies[key] = outcome[0]
