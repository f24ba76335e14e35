"""A kernel for one submission, in an allow-list sandbox, with limits on time, memory and output.

This module starts the kernel and talks to it (:func:`run_submission`); the sandbox's other jobs
have a module each: :mod:`.confinement` (bubblewrap's command line, the seccomp filter, the
launcher's caps, the kernel's user; :class:`Limits`), :mod:`.snapshot` (the copies of the package a
kernel imports), :mod:`.watchdog` (the limits polled while it runs) and :mod:`.cgroups` (a memory
control group, where the host gives one).

The sandbox is bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), which needs
unprivileged user namespaces from the host. Inside it the kernel has:

* no capabilities, and its own user, PID, IPC, UTS, cgroup and network namespaces: no network
  (not even loopback to the host), and every process it starts dies with it;
* a file system built from an allow-list: the system's programs and libraries, the few ``/etc``
  files Python and its libraries read (never ``/etc/shadow`` or the rest of ``/etc``), the Python
  installation and virtual environment, snapshots of the course package and of this grader
  (:func:`.snapshot.kernel_mounts`: the grader's copy holds only the grading protocol, never its
  references and case generators; each is compiled from its own sources, never from the
  checkout's ``__pycache__``, so nothing written into the checkout later reaches a kernel; the
  kernel that runs the graded calls gets a course package holding only the value format,
  :func:`graded_snapshot`) and the data cache, all read-only; a private, empty
  home and working folder (``/home/student``), a private ``/tmp`` and ``/dev/shm``, each a
  size-capped tmpfs; the kernel's connection file, read-only, and a 64 KiB tmpfs for its sockets
  (``SOCKETS``, which the grader reaches through ``/proc/PID/root``); nothing else, so the
  instructor's notebooks, ``.git``, other submissions and the reports are not there at all, and
  nothing on the host's disk is writable;
* user id 65534 (``nobody``) inside, never 0; no user namespace of its own (``--disable-userns``,
  where bubblewrap has it), so no tmpfs can be mounted where nothing counts it;
* at most :data:`OPEN_FILES` files, sockets and pipes open at once (what the Linux kernel holds
  for each socket's buffers is counted by no process's size);
* a seccomp filter that makes the kernel objects whose memory no process's size shows (System V
  shared memory and message queues, memfd files) and the key calls (``add_key``, ``request_key``,
  ``keyctl``) unavailable: each fails with ENOSYS; the kernel starts in a session keyring of its
  own, never the grader's;
* connections to the kernel's sockets made once, before the submission's first cell, and never
  made again (a dropped one stays dropped; when the request channel's drops, the kernel is
  stopped at once), so no path the kernel could have replaced by a link is ever resolved by the
  grader;
* an environment built from an allow-list (nothing of the grader's own environment, so no
  secret in it reaches student code).

Limits (:class:`Limits`, each a flag of ``transformer-course-grader grade``): a wall-clock limit per
cell and per notebook; a memory limit on the whole sandbox, counting the memory of all its
processes, each page once (:func:`.watchdog._memory_bytes`), **and** what they stored in its tmpfs folders
(polled every 0.1 s); a size cap on each tmpfs folder; a cap on processes and threads
(``RLIMIT_NPROC`` inside the sandbox, and the watchdog's count, which also holds where the
grader runs as root and Linux exempts it from ``RLIMIT_NPROC``; as root, a burst of threads
that ends within one 0.1 s poll can go unseen);
and a cap on the size of any one file (``RLIMIT_FSIZE``: a larger write fails with ``OSError:
File too large``). The grader itself never receives a message from a kernel larger than
``MAX_MESSAGE_MB`` (:func:`_bounded_context`). Breaking a limit the watchdog polls stops the
sandbox; the grader records why and goes on with the next submission. Not counted: what the
Linux kernel itself holds for the sandbox's pipes and sockets (bounded per open file; a memory
cgroup, where the host offers one to the grader, is what would count it). Without bubblewrap,
grading refuses to run unless the instructor asks for ``sandbox=False``
(``--unsafe-no-sandbox``).
"""

from __future__ import annotations

import os
import queue
import shutil
import stat
import subprocess
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import zmq
from jupyter_client.manager import KernelManager

from . import cgroups, protocol
from .confinement import (
    HOME,
    KERNEL_ENVIRONMENT,
    SOCKETS,
    Limits,
    SandboxUnavailable,
    kernel_environment,
    kernels_folder,
    launcher,
    prelude,
    sandbox_available,
    sandbox_command,
    sandbox_user,
)
from .snapshot import GRADED_MODULES, graded_snapshot, kernel_mounts, kernel_python_path, package_snapshot
from .watchdog import Watchdog, out_of_memory_reason, process_tree

__all__ = [
    "Limits",
    "SandboxResult",
    "run_submission",
    "sandbox_available",
    "sandbox_command",
    "SandboxUnavailable",
    "KERNEL_ENVIRONMENT",
    "package_snapshot",
    "graded_snapshot",
    "GRADED_MODULES",
]


@dataclass
class SandboxResult:
    """What happened in the kernel: the text each graded call printed, and any stop reason."""

    replies: dict = field(default_factory=dict)  # request key -> printed text
    problems: list = field(default_factory=list)  # human-readable notes (cell errors, timeouts)
    stopped: str | None = None  # why the kernel was stopped early, if it was
    timed_out: set = field(default_factory=set)  # request keys that ran past the cell limit
    isolated: bool = False
    accounting: str = "watchdog"  # what kept the memory limit: "cgroup v2" or "cgroup v1" (and the watchdog)


class _SandboxedKernelManager(KernelManager):
    """Starts ipykernel with the command in ``launch_prefix`` (the sandbox, or plain Python)."""

    launch_prefix: list = []

    def format_kernel_cmd(self, extra_arguments=None):
        return [*self.launch_prefix, "-f", self.connection_file]

    def interrupt_kernel(self) -> None:
        """Interrupt through the control channel: a signal sent to the sandbox's process group would
        not reach a kernel inside its own PID namespace; ipykernel interrupts itself on the message.

        Only on the connection made before the submission's code ran (:func:`_connect_once`):
        never a new one, whose path the kernel could have replaced by a link.
        """
        if not self.has_kernel or self._control_socket is None:
            return
        self.session.send(self._control_socket, self.session.msg("interrupt_request", content={}))


# The largest message the grader accepts from a kernel: a larger one is never received whole
# (ZeroMQ drops that connection), so a kernel that prints or raises hundreds of MiB at once costs
# the grader nothing. A request that cannot be sent within SEND_SECONDS (the kernel's connection
# is gone) stops the sandbox.
MAX_MESSAGE_MB = 32  # a reply is at most 16 MiB (MAX_REPLY_CHARACTERS)
SEND_SECONDS = 10
# The kernel's output (iopub) waits for the grader in a queue of at most this many messages, so at
# most IOPUB_QUEUE_MESSAGES * MAX_MESSAGE_MB in the grader's memory (ZeroMQ counts messages, not
# bytes); past it the kernel's messages are dropped, as a flood's are. The grader reads as they come.
IOPUB_QUEUE_MESSAGES = 8


@lru_cache(maxsize=1)
def _bounded_context():
    """A ZeroMQ context whose sockets refuse messages over MAX_MESSAGE_MB, give up a send after SEND_SECONDS
    and never reconnect a dropped connection (:func:`_connect_once`)."""
    context = zmq.Context()
    context.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_MB * 2**20)
    context.setsockopt(zmq.SNDTIMEO, SEND_SECONDS * 1000)
    context.setsockopt(zmq.RECONNECT_IVL, -1)
    return context


class _KernelStopped(Exception):
    pass


class _ConnectionDropped(Exception):
    """The request (shell) channel's connection is gone: with reconnection off, no reply can come."""


class _DropWatch:
    """Tells when ZeroMQ drops a socket's connection (its ``EVENT_DISCONNECTED``).

    A message over MAX_MESSAGE_MB drops the connection that carried it at once, and with
    reconnection off (:func:`_connect_once`) it stays dropped: on the shell channel no reply can
    come after that, so the kernel is stopped then, instead of at the cell limit and a send's
    SEND_SECONDS after it.
    """

    def __init__(self, socket):
        self.socket = socket
        self.monitor = socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)

    def dropped(self) -> bool:
        return bool(self.monitor.poll(0))

    def close(self) -> None:
        try:
            self.socket.disable_monitor()
        except zmq.ZMQError:
            pass
        self.monitor.close(linger=0)


# After the shell channel's execute_reply, iopub is read until it reports idle or stays quiet for
# this long: an idle message can be lost, the reply cannot (nbclient does the same). Past it, what
# already waits is still read, at most _LATE_MESSAGES of it (a kernel that floods iopub never ends
# it): the grader's own process, paused on a loaded machine, must not lose output that had come.
_IOPUB_DRAIN_SECONDS = 1.0
_LATE_MESSAGES = 4 * IOPUB_QUEUE_MESSAGES


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
        self.carry = (self.carry + text)[-(len(self.nonce) - 1) :]
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


def _execute(manager, client, code: str, timeout: float, nonce: str | None = None, watch: _DropWatch | None = None):
    """Run ``code``; return (the reply lines for ``nonce``, (error name, value) or None, timed out?).

    Done when the shell channel's ``execute_reply`` to this request has come and iopub has said
    idle, or, ``_IOPUB_DRAIN_SECONDS`` after the reply, holds nothing more that has already come
    (a reply that came is never left unread because the grader looked late). Reads only messages
    whose parent is this request, so output from an earlier, interrupted request can never be
    mistaken for this one's.

    Raises:
        _KernelStopped: if the kernel died (crashed, or was killed by the watchdog).
        _ConnectionDropped: if ``watch`` (the shell channel's) saw its connection dropped.
    """
    if watch is not None and watch.dropped():
        raise _ConnectionDropped()
    msg_id = client.execute(code, store_history=False, allow_stdin=False)
    deadline, collected, error = time.monotonic() + timeout, _ReplyLines(nonce), None
    replied_at, idle, late = None, False, 0
    while True:
        if replied_at is None:
            if time.monotonic() > deadline:
                return collected.text(), error, True
            try:
                shell = client.get_shell_msg(timeout=0.01)
            except queue.Empty:
                shell = None
            if shell is not None and shell.get("parent_header", {}).get("msg_id") == msg_id:
                replied_at = time.monotonic()
                content = shell.get("content", {})
                if content.get("status") == "error" and error is None:
                    error = (content.get("ename"), content.get("evalue"))
        if replied_at is not None and idle:
            return collected.text(), error, False
        drained = replied_at is not None and time.monotonic() - replied_at > _IOPUB_DRAIN_SECONDS
        late += drained
        if late > _LATE_MESSAGES:
            return collected.text(), error, False
        try:
            message = client.get_iopub_msg(timeout=0 if drained else 0.05)
        except queue.Empty:
            if drained:  # nothing more has come
                return collected.text(), error, False
            if not manager.is_alive():
                raise _KernelStopped() from None
            if watch is not None and replied_at is None and watch.dropped():
                raise _ConnectionDropped() from None
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


def _run(manager, client, code, limits, result, label, nonce=None, watch=None):
    """Run one cell or graded call; interrupt it at the cell limit. None if the kernel stopped answering."""
    text, error, timed_out = _execute(manager, client, code, limits.cell_seconds, nonce, watch)
    if timed_out:
        result.problems.append(f"{label} ran past the {limits.cell_seconds:.0f} s cell limit and was interrupted")
        manager.interrupt_kernel()
        _, _, still_running = _execute(manager, client, "pass", limits.cell_seconds, watch=watch)
        if still_running:
            result.stopped = f"{label} ran past the {limits.cell_seconds:.0f} s cell limit and ignored the interrupt"
            return None
    return text, error, timed_out


def _kernel_socket_paths(manager: KernelManager) -> list[str]:
    """The five ``ipc`` socket files of a kernel, as the grader reaches them."""
    return [
        f"{manager.ip}-{port}"
        for port in (manager.shell_port, manager.iopub_port, manager.stdin_port, manager.control_port, manager.hb_port)
    ]


def _wait_for_sockets(manager: KernelManager, seconds: float) -> None:
    """Wait until the kernel has bound its five sockets: each path a socket file itself, never a link.

    Raises:
        _KernelStopped: the kernel's process ended first (the watchdog stopped it, or it crashed as it
            started): no socket will come, and the cell limit is not waited out.
        RuntimeError: the sockets were not all there within ``seconds``.
    """
    process, deadline = manager.provisioner.process, time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise _KernelStopped("the kernel ended before it opened its sockets")
        try:
            if all(stat.S_ISSOCK(os.lstat(path).st_mode) for path in _kernel_socket_paths(manager)):
                return
        except OSError:
            pass
        time.sleep(0.01)
    raise RuntimeError(f"the kernel did not open its sockets within {seconds:.0f} s")


def _connect_once(manager: KernelManager) -> None:
    """Connect the manager's control socket now, with ZeroMQ's reconnection off for it and every channel.

    The sockets' paths lie in a folder the kernel can write. Once the submission's code runs it
    can unlink a socket and leave a link to any socket of the host in its place; a path resolved
    then would be resolved by the grader, with the grader's rights. So every connection is made
    before the first cell runs, and a connection the kernel drops stays dropped (the kernel then
    stops answering, and its notebook is stopped) instead of being made again by path.

    A send on a dropped connection (a kernel gone) finds no peer and would wait for ever: on the
    control socket it gives up after SEND_SECONDS (``zmq.Again``), as on the client's channels.
    """
    manager.context.setsockopt(zmq.RECONNECT_IVL, -1)  # the manager's own context: its sockets from now on
    manager._close_control_socket()  # start_kernel connected it to the path the kernel sees
    manager._connect_control_socket()
    manager._control_socket.setsockopt(zmq.SNDTIMEO, SEND_SECONDS * 1000)


def _control_round_trip(manager: KernelManager, seconds: float) -> None:
    """One request and reply on the control socket, so its connection is made before any cell runs.

    Raises:
        RuntimeError: no reply within ``seconds``.
    """
    socket = manager._control_socket
    manager.session.send(socket, manager.session.msg("kernel_info_request"))
    if not socket.poll(seconds * 1000):
        raise RuntimeError(f"the kernel's control channel did not answer within {seconds:.0f} s")
    manager.session.recv(socket, mode=zmq.NOBLOCK)


def _sandbox_root(manager: KernelManager, seconds: float) -> str:
    """``/proc/PID/root``: the sandbox's root as the grader reaches it (its sockets, its tmpfs folders).

    PID is a process inside the sandbox once bubblewrap has made the sandbox's root (a tmpfs of
    its own, on another device than the host's root): bubblewrap's own process there, which
    lives as long as the sandbox, and otherwise the kernel.

    Raises:
        RuntimeError: the sandbox did not start within ``seconds``.
    """
    process, host_root = manager.provisioner.process, os.stat("/").st_dev
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        parents = process_tree(process.pid)[2]
        for pid in sorted(parents, key=lambda pid: parents[pid] != process.pid):  # bubblewrap's child first
            root = f"/proc/{pid}/root"
            try:
                if os.stat(f"{root}/").st_dev != host_root and os.path.isdir(f"{root}{SOCKETS}"):
                    return root
            except OSError:
                continue
        time.sleep(0.01)
    raise RuntimeError(f"the sandbox did not start within {seconds:.0f} s")


@contextmanager
def _working_folder():
    """A fresh folder for one kernel, removed afterwards whatever the kernel left in it.

    ``shutil.rmtree`` recurses in Python and gives up on folders nested thousands deep; ``rm -rf``
    does not. A folder that cannot be removed is left behind rather than stopping the batch.
    """
    workdir = tempfile.mkdtemp(prefix="submission-", dir=kernels_folder())
    try:
        yield workdir
    finally:
        try:
            shutil.rmtree(workdir)
        except (OSError, RecursionError):
            subprocess.run(["rm", "-rf", "--one-file-system", workdir], capture_output=True, timeout=300, check=False)


def run_submission(
    notebook,
    requests: dict,
    limits: Limits,
    environment: dict | None = None,
    sandbox: bool = True,
    package: Path | None = None,
    deadline: float | None = None,
    programs: bool = True,
) -> SandboxResult:
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
        package: the copy of the course package the kernel imports: :func:`package_snapshot`
            (the default) for a student's notebook, :func:`graded_snapshot` for graded calls.
            Unconfined, it comes first on the kernel's ``PYTHONPATH`` (the installed package is
            still on disk there: only the sandbox makes it unreachable).
        deadline: optional ``time.monotonic()`` value by which the notebook must be done, when
            its limit (``limits.notebook_seconds``) began before this kernel, as for the second
            kernel of one submission; by default the limit starts now.
        programs: bool, whether the kernel may start programs; False (the graded calls' kernel) refuses
            ``execve`` and ``execveat`` in its seccomp filter, sandboxed or not: a child interpreter would
            run code that no audit hook sees.

    Returns:
        :class:`SandboxResult`; never raises for anything the submission does.
    """
    result = SandboxResult(isolated=sandbox)
    with _working_folder() as workdir:
        env = kernel_environment(HOME if sandbox else workdir, environment)
        manager = _SandboxedKernelManager(transport="ipc", ip=f"{SOCKETS}/kernel" if sandbox else f"{workdir}/kernel")
        manager.connection_file = str(Path(workdir, "connection.json"))
        group = cgroups.create(limits.memory_mb, limits.processes + 2) if sandbox else None  # + bubblewrap's two
        if sandbox:
            user = sandbox_user()
            manager.launch_prefix = prelude(group, user, workdir) + sandbox_command(
                workdir, env, kernel_mounts(package), limits, programs
            )
            result.accounting = group.kind if group else "watchdog"
        else:  # unconfined: the same allow-listed environment, the private folder as home and /tmp
            env["TMPDIR"], env["MPLCONFIGDIR"] = workdir, workdir
            env["PYTHONPATH"] = kernel_python_path(package)
            manager.launch_prefix = launcher(limits, programs)
        watchdog, client, watch = Watchdog(manager, limits, deadline, group), None, None
        try:
            # The kernel's own stdout and stderr (its start-up banner, crash output) are not the
            # grader's: replies come through the kernel protocol.
            manager.start_kernel(env=env, cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            watchdog.start()
            if sandbox:  # the kernel binds its sockets in SOCKETS; the grader reaches them from outside
                watchdog.sandbox_root = _sandbox_root(manager, limits.cell_seconds)
                manager.ip = f"{watchdog.sandbox_root}{SOCKETS}/kernel"
            _wait_for_sockets(manager, limits.cell_seconds)  # a connection never retried must find them there
            # Every connection is made now, before any of the submission's code runs, and never again:
            # a path in the sandbox is resolved only while nothing there has run (see _connect_once).
            _connect_once(manager)
            context = _bounded_context()
            client = manager.client(context=context)
            context.setsockopt(zmq.RCVHWM, IOPUB_QUEUE_MESSAGES)
            client.iopub_channel  # noqa: B018 - made now, so that only its queue is this short
            context.setsockopt(zmq.RCVHWM, 1000)  # ZeroMQ's default for the request channels
            client.start_channels(hb=False)  # the heartbeat channel reconnects by path; the watchdog sees a death
            watch = _DropWatch(client.shell_channel.socket)
            client.wait_for_ready(timeout=limits.cell_seconds)
            _control_round_trip(manager, limits.cell_seconds)
            _run_all(manager, client, notebook, requests, limits, result, watch)
        except (_KernelStopped, _ConnectionDropped, zmq.Again) as stop:
            # A kernel that dies also drops its connections: a drop is a death if the kernel is gone soon after.
            if isinstance(stop, _KernelStopped) or _exits_within(manager, seconds=1.0):
                result.stopped = watchdog.reason or (
                    out_of_memory_reason(limits, group)
                    if group is not None and group.out_of_memory()
                    else "the kernel died (it crashed or was killed)"
                )
            else:
                result.stopped = watchdog.reason or (
                    f"the kernel stopped answering: it sent a message larger than "
                    f"{MAX_MESSAGE_MB} MiB, which the grader never receives"
                )
        except Exception as error:  # noqa: BLE001 - a submission must never crash the batch
            result.stopped = (
                watchdog.reason or f"the kernel could not run the notebook ({type(error).__name__}: {error})"
            )
        finally:
            watchdog.done.set()
            if watchdog.ident is not None:
                watchdog.join(timeout=5)  # its last poll ends before the group is read below
            if watchdog.reason and not result.stopped:
                result.stopped = watchdog.reason
            if not result.stopped and group is not None and group.out_of_memory():
                # The out-of-memory killer stopped a process of the sandbox (a child: the kernel went on)
                # after the watchdog's last poll: the limit was broken all the same, and the report says so.
                result.stopped = out_of_memory_reason(limits, group)
            if watch is not None:
                watch.close()
            if client is not None:
                client.stop_channels()
            try:
                manager.shutdown_kernel(now=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            if group is not None:
                group.remove()
    return result


def _exits_within(manager, seconds: float) -> bool:
    """Whether the kernel is gone within ``seconds`` (one that is exiting drops its connections first)."""
    deadline = time.monotonic() + seconds
    while manager.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not manager.is_alive()


def _run_all(manager, client, notebook, requests, limits, result, watch=None) -> None:
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        outcome = _run(manager, client, cell.source, limits, result, f"cell {index + 1}", watch=watch)
        if outcome is None:
            return
        if outcome[1] is not None and not outcome[2]:
            result.problems.append(f"cell {index + 1} raised {str(outcome[1][0])[:100]}: {str(outcome[1][1])[:120]}")
    skipped = set()
    for key, (code, nonce) in requests.items():
        exercise = key.split("#")[0]
        if exercise in skipped:  # one endless call is enough: skip that exercise's other cases
            continue
        outcome = _run(manager, client, code, limits, result, f"the graded call {key}", nonce, watch)
        if outcome is None:
            return
        if outcome[2]:
            skipped.add(exercise)
            result.timed_out.add(key)
        elif outcome[1] is not None and nonce is None:  # the grader's own step failed: say so
            result.problems.append(
                f"the grader's step {key} raised {str(outcome[1][0])[:100]}: {str(outcome[1][1])[:200]}"
            )
        result.replies[key] = outcome[0]
