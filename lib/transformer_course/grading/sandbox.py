"""A kernel for one submission, in an allow-list sandbox, with limits on time, memory and output.

The sandbox is bubblewrap (``bwrap``, Debian/Ubuntu package ``bubblewrap``), which needs
unprivileged user namespaces from the host. Inside it the kernel has:

* no capabilities, and its own user, PID, IPC, UTS, cgroup and network namespaces: no network
  (not even loopback to the host), and every process it starts dies with it;
* a file system built from an allow-list: the system's programs and libraries, the few ``/etc``
  files Python and its libraries read (never ``/etc/shadow`` or the rest of ``/etc``), the Python
  installation and virtual environment, a snapshot of the course package (without the grader's
  references and case generators, :mod:`.references`, which are an empty module there, and
  compiled from its own sources, never from the checkout's ``__pycache__``, so nothing written
  into the checkout later reaches a kernel; the kernel that runs the graded calls gets a copy
  holding only the grading protocol, :func:`graded_snapshot`) and the data cache, all read-only; a private, empty
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
  made again (a dropped one stays dropped), so no path the kernel could have replaced by a link
  is ever resolved by the grader;
* an environment built from an allow-list (nothing of the grader's own environment, so no
  secret in it reaches student code).

Limits (:class:`Limits`, each a flag of ``transformer-course grade``): a wall-clock limit per
cell and per notebook; a memory limit on the whole sandbox, counting the memory of all its
processes, each page once (:func:`_memory_bytes`), **and** what they stored in its tmpfs folders
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

import atexit
import compileall
import ctypes
import os
import platform
import queue
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path

import zmq
from jupyter_client.manager import KernelManager

from . import cgroups, protocol

__all__ = ["Limits", "SandboxResult", "run_submission", "sandbox_available", "sandbox_command", "SandboxUnavailable",
           "KERNEL_ENVIRONMENT", "package_snapshot", "graded_snapshot", "GRADED_MODULES"]

# The only variables a kernel gets from the grader's environment (when set there).
KERNEL_ENVIRONMENT = ("COURSE_PROFILE", "COURSE_DATA_DIR", "KERAS_BACKEND", "TF_CPP_MIN_LOG_LEVEL", "MPLBACKEND",
                      "LANG")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or the host refuses it the namespaces it needs."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission.

    Attributes:
        cell_seconds: float, wall-clock seconds a cell (or one graded call) may take.
        notebook_seconds: float, wall-clock seconds for the whole notebook and all graded calls.
        memory_mb: int, MiB: the memory of the kernel and its child processes, each page once
            (:func:`_memory_bytes`), plus what they stored in the sandbox's tmpfs folders
            (``/tmp``, ``/dev/shm``, the home).
        tmp_mb: int, MiB: the size of each tmpfs folder; writing past it fails with
            ``OSError: No space left on device``.
        processes: int, processes and threads the sandbox may run at once.
        file_mb: int, MiB: the largest file a kernel may write.
    """

    cell_seconds: float = 60.0
    notebook_seconds: float = 300.0
    memory_mb: int = 4096
    tmp_mb: int = 1024
    processes: int = 512
    file_mb: int = 256

    def __post_init__(self):
        for name in (limit.name for limit in fields(self)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"`{name}` must be a positive number; received {value!r}.")


@dataclass
class SandboxResult:
    """What happened in the kernel: the text each graded call printed, and any stop reason."""

    replies: dict = field(default_factory=dict)  # request key -> printed text
    problems: list = field(default_factory=list)  # human-readable notes (cell errors, timeouts)
    stopped: str | None = None  # why the kernel was stopped early, if it was
    timed_out: set = field(default_factory=set)  # request keys that ran past the cell limit
    isolated: bool = False
    accounting: str = "watchdog"  # what kept the memory limit: "cgroup v2" or "cgroup v1" (and the watchdog)


@lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """True when bubblewrap is installed and can make the namespaces the sandbox uses here."""
    if shutil.which("bwrap") is None:
        return False
    try:
        probe = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--ro-bind", "/", "/",
                 "--", "true"]
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=1)
def _can_disable_userns() -> bool:
    """Whether this bubblewrap has ``--disable-userns`` (0.8.0 and later): no namespace of the kernel's own."""
    try:
        return "--disable-userns" in subprocess.run(["bwrap", "--help"], capture_output=True, text=True,
                                                    timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False


def _package_folder() -> Path:
    """The folder of the installed ``transformer_course`` package (a checkout's ``lib/`` when editable)."""
    return Path(__file__).resolve().parents[1]


# What a kernel sees of /etc: what the dynamic linker, the C library's name lookups, time zones,
# MIME types, fonts and Debian's Python read. Never the rest (shadow, gshadow, ssl/private, ...).
_ETC_ALLOWED = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone", "passwd", "group",
                "nsswitch.conf", "host.conf", "hosts", "alternatives", "mime.types", "fonts", "matplotlibrc",
                f"python3.{sys.version_info.minor}", "python3", "os-release")

SANDBOX_USER_ID = 65534  # nobody: the user id inside the sandbox
HOME = "/home/student"  # the kernel's home and working folder inside the sandbox (a tmpfs)


def _readonly_paths() -> list[str]:
    """What a kernel may read: Python, its packages, the data (the course package comes as a snapshot)."""
    paths = [str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve())]
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


def _make_snapshot(prefix: str, stubbed: Callable[[Path], str | None]) -> Path:
    """A private, read-only-to-kernels copy of the package, compiled from its own sources.

    ``stubbed(relative_path)`` gives the text that replaces a module (None keeps it). Made in a
    temporary folder removed at exit; the checkout's ``__pycache__`` folders are left out.
    """
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=_kernels_folder()))
    atexit.register(shutil.rmtree, root, True)
    snapshot = root / "transformer_course"
    shutil.copytree(_package_folder(), snapshot, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"), symlinks=False)
    for path in snapshot.rglob("*.py"):
        text = stubbed(path.relative_to(snapshot))
        if text is not None:
            path.write_text(text, encoding="utf-8")
    compileall.compile_dir(snapshot, quiet=2)  # compiled here, from the snapshot's own sources: imports stay fast
    for path in (root, *snapshot.rglob("*")):  # readable inside whatever the grader's umask
        path.chmod(0o755 if path.is_dir() else 0o644)
    return snapshot


@lru_cache(maxsize=1)
def package_snapshot() -> Path:
    """The copy of the course package a student's notebook runs with: an empty :mod:`.references`.

    Made once per grading process and mounted read-only over the package in every sandbox, so
    that a compiled file or a changed module written into the checkout during grading never
    reaches a kernel.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-package-", lambda path: "" if path == Path("grading", "references.py") else None)


# What graded calls can import of the package: the protocol and its audit hook, the value format and the table the
# decoding exercises' cases are made of. Every other module raises ImportError there.
GRADED_MODULES = {Path("__init__.py"), Path("_next_token_table.py"), Path("exercises", "values.py"),
                  Path("grading", "guard.py"), Path("grading", "protocol.py")}
_EMPTY_PACKAGES = {Path("exercises", "__init__.py"), Path("grading", "__init__.py")}


def _graded_stub(path: Path) -> str | None:
    if path in GRADED_MODULES:
        return None
    if path in _EMPTY_PACKAGES:
        return ""
    module = ".".join(("transformer_course", *path.with_suffix("").parts)).removesuffix(".__init__")
    message = (f"{module} is out of reach of graded code: graded functions run where the course package "
               "holds only the grading protocol (write the exercise with NumPy).")
    return f"raise ImportError({message!r}, name={module!r})\n"


@lru_cache(maxsize=1)
def graded_snapshot() -> Path:
    """The copy of the course package the graded calls run with: the protocol and nothing to copy.

    Only :data:`GRADED_MODULES` are kept; every other module of the package, the exercise
    implementations among them, is replaced by one line that raises ``ImportError``. A graded
    function that reaches the package's code in any way (an import, a name resolved at run time,
    a pickle, a decorator from another cell) fails like a missing import.

    Returns:
        Path of the snapshot's ``transformer_course`` folder.
    """
    return _make_snapshot("course-graded-", _graded_stub)


# System calls that make kernel objects whose memory neither a process's size nor a tmpfs folder
# shows: System V shared memory (a segment stays after every process detaches from it) and
# message queues, and memfd files; and the kernel's key management (add_key, request_key,
# keyctl), through which a process reads the keyrings of its session and of its user outside the
# sandbox. In the sandbox they fail with ENOSYS, as on a Linux built without them; every other
# system call is allowed. Per machine: its audit architecture and the calls' numbers (x86-64;
# the generic table of arm64 and riscv64).
_GENERIC_DENIED = {"shmget": 194, "msgget": 186, "memfd_create": 279, "add_key": 217, "request_key": 218,
                   "keyctl": 219}
_SECCOMP_DENIED = {
    "x86_64": (0xC000003E, {"shmget": 29, "msgget": 68, "memfd_create": 319, "add_key": 248, "request_key": 249,
                            "keyctl": 250}),
    "aarch64": (0xC00000B7, _GENERIC_DENIED),
    "arm64": (0xC00000B7, _GENERIC_DENIED),
    "riscv64": (0xC00000F3, _GENERIC_DENIED),
}


def _seccomp_program(machine: str | None = None) -> bytes | None:
    """The sandbox's seccomp filter, as classic BPF (``struct sock_filter`` entries); None for an unknown machine.

    It kills a process that makes a system call of another architecture (a 32-bit program),
    fails the calls of :data:`_SECCOMP_DENIED` (and, on x86-64, every x32 call) with ENOSYS and
    allows the rest.
    """
    machine = machine or platform.machine()
    if machine not in _SECCOMP_DENIED:
        return None
    architecture, numbers = _SECCOMP_DENIED[machine]
    load, equal, at_least, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    kill, allow, no_such_call = 0x80000000, 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_*, ERRNO(ENOSYS)
    denied = sorted(numbers.values())
    checks = len(denied) + 1  # the x32 range, then one comparison per denied call
    program = [(load, 0, 0, 4), (equal, 1, 0, architecture), (ret, 0, 0, kill), (load, 0, 0, 0),
               (at_least, checks, 0, 0x40000000 if machine == "x86_64" else 0xFFFFFFFF)]
    program += [(equal, checks - 1 - index, 0, number) for index, number in enumerate(denied)]
    program += [(ret, 0, 0, allow), (ret, 0, 0, no_such_call)]
    return b"".join(struct.pack("=HBBI", *entry) for entry in program)


# Files, sockets and pipes a kernel may hold open at once: each socket can hold kernel memory that
# no process's size shows (its buffers), so their number is what bounds it.
OPEN_FILES = 1024

# What the kernel's Python runs first: the caps (processes, file size, open files); a new, empty
# session keyring in place of the grader's (keyctl KEYCTL_JOIN_SESSION_KEYRING = 1 with no name;
# where keyrings are unavailable there is none to leave); then the filter (prctl
# PR_SET_NO_NEW_PRIVS = 38, then PR_SET_SECCOMP = 22 with SECCOMP_MODE_FILTER = 2), which refuses
# every key call after it; then ipykernel.
_LAUNCH = """\
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_NPROC, ({processes}, {processes}))
resource.setrlimit(resource.RLIMIT_FSIZE, ({files}, {files}))
resource.setrlimit(resource.RLIMIT_NOFILE, ({open_files}, {open_files}))
if {program!r}:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall(ctypes.c_long({keyctl}), ctypes.c_long(1), ctypes.c_void_p(None))
    code = ctypes.create_string_buffer(bytes.fromhex({program!r}), {size})
    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    program = Program({size} // 8, ctypes.addressof(code))
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    if (libc.prctl(38, one, zero, zero, zero) != 0
            or libc.prctl(22, ctypes.c_ulong(2), ctypes.byref(program), zero, zero) != 0):
        sys.exit(f"the sandbox could not install its seccomp filter (errno {{ctypes.get_errno()}})")
sys.argv[0] = "ipykernel_launcher"
runpy.run_module("ipykernel_launcher", run_name="__main__")
"""


def _launcher(limits: Limits) -> list[str]:
    """Python, with the process and file-size caps and the seccomp filter set, starting ``ipykernel``.

    A filter that cannot be installed stops the launch: the kernel never runs without it.
    """
    program = _seccomp_program() or b""
    keyctl = _SECCOMP_DENIED.get(platform.machine(), (0, {"keyctl": -1}))[1]["keyctl"]
    code = _LAUNCH.format(processes=int(limits.processes), files=int(limits.file_mb * 2**20),
                          open_files=OPEN_FILES, program=program.hex(), size=len(program), keyctl=keyctl)
    return [sys.executable, "-c", code]


# The folder of the kernel's sockets inside the sandbox: a tmpfs of SOCKETS_BYTES, room for the
# socket files and nothing more. The grader connects through /proc/PID/root (see
# _sandbox_root), so no folder on the host's disk needs to be writable by a kernel.
SOCKETS = "/run/kernel"
SOCKETS_BYTES = 64 * 2**10


def sandbox_command(workdir: str, environment: dict, limits: Limits | None = None,
                    package: Path | None = None) -> list[str]:
    """The ``bwrap`` command line that starts a kernel in the sandbox (see the module docstring).

    Args:
        workdir: str, the folder of the kernel's connection file, mounted read-only.
        environment: the kernel's whole environment.
        limits: :class:`Limits` (the default limits when None): the tmpfs sizes and the caps
            set before the kernel starts.
        package: the copy of the package mounted over it (default :func:`package_snapshot`).

    Returns:
        list of str, ending with the Python command that starts ``ipykernel``.
    """
    limits = limits or Limits()
    size = str(int(limits.tmp_mb * 2**20))
    command = ["bwrap", "--unshare-all", "--die-with-parent", "--cap-drop", "ALL", "--clearenv",
               "--unshare-user", *(["--disable-userns"] if _can_disable_userns() else []),
               "--uid", str(SANDBOX_USER_ID), "--gid", str(SANDBOX_USER_ID),
               "--proc", "/proc", "--dev", "/dev",
               "--size", size, "--tmpfs", "/dev/shm", "--size", size, "--tmpfs", "/tmp",
               "--size", size, "--tmpfs", HOME, "--size", str(SOCKETS_BYTES), "--tmpfs", SOCKETS]
    for path in (*("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"), *(f"/etc/{name}" for name in _ETC_ALLOWED)):
        if os.path.islink(path):  # a link stays a link (merged /usr: /bin -> usr/bin)
            command += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            command += ["--ro-bind", path, path]
    for path in _readonly_paths():
        command += ["--ro-bind", path, path]
    command += ["--ro-bind", str(package or package_snapshot()), str(_package_folder())]
    command += ["--ro-bind", workdir, workdir, "--chdir", HOME]
    # The tree built, its root and /dev become read-only: only the home, /tmp, /dev/shm and the socket
    # folder (their own capped tmpfs mounts) stay writable, so nothing uncounted can be written.
    command += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in environment.items():
        command += ["--setenv", key, value]
    return [*command, "--", *_launcher(limits)]


def _kernel_environment(home: str, extra: dict | None) -> dict:
    """The allow-listed environment of a kernel: nothing else of the grader's reaches it."""
    environment = {key: os.environ[key] for key in KERNEL_ENVIRONMENT if key in os.environ}
    environment.update({key: str(value) for key, value in (extra or {}).items() if key in KERNEL_ENVIRONMENT})
    environment.update({
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin", "HOME": home,
        "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1", "LANG": environment.get("LANG", "C.UTF-8"),
    })
    return environment


# Outside the sandbox, each kernel runs as a user of its own from this range (never a user of the host),
# so the per-user budgets of the Linux kernel (epoll watches, inotify, keys, pipe pages, RLIMIT_NPROC)
# are the sandbox's own, never the grader's. Inside, it is nobody (SANDBOX_USER_ID) as before.
SANDBOX_USERS = range(1_500_000_000, 1_600_000_000)


@lru_cache(maxsize=1)
def _own_users_available() -> bool:
    """True where the grader is root with ``setpriv``, and bubblewrap and Python run as another user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not sandbox_available():
        return False
    user = str(SANDBOX_USERS[0])
    probe = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "bwrap", "--unshare-all",
             "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--",
             sys.executable, "-c", "import numpy, ipykernel"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _kernels_folder() -> str | None:
    """Where the kernels' folders and the package snapshots are made: the usual temporary folder, or, where
    each sandbox runs as a user of its own, a folder those users can pass through (not list) on a path
    they can pass through: ``/tmp/transformer-course-kernels`` (mode 0711, the grader's)."""
    if not _own_users_available():
        return None
    folder = Path("/tmp/transformer-course-kernels")
    folder.mkdir(mode=0o711, exist_ok=True)
    status = folder.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():  # never one someone else planted
        raise SandboxUnavailable(f"{folder} is not a folder of the grader's own")
    folder.chmod(0o711)
    return str(folder)


def _sandbox_user() -> int | None:
    """A fresh user id outside the sandbox for one kernel, or None where each sandbox cannot have its own."""
    if not _own_users_available():
        return None
    import secrets

    return SANDBOX_USERS[secrets.randbelow(len(SANDBOX_USERS))]


def _prelude(group, user: int | None, workdir: str) -> list[str]:
    """What runs as the grader before bubblewrap: join the control group, hand the kernel's folder (its
    connection file) to the sandbox's user, and become that user. [] where there is nothing to do."""
    if group is None and user is None:
        return []
    steps = ['for file in "$@"; do [ "$file" = -- ] && break; echo $$ > "$file" || exit 125; shift; done; shift']
    arguments = [*(group.procs_files() if group else []), "--"]
    if user is not None:
        steps.append(f'chown {user}:{user} "$1" "$1/connection.json" || exit 125; shift')
        steps.append(f"exec setpriv --reuid={user} --regid={user} --clear-groups \"$@\"")
        arguments.append(workdir)
    else:
        steps.append('exec "$@"')
    return ["/bin/sh", "-c", "; ".join(steps), "sh", *arguments]


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


def _process_tree(pid: int) -> tuple[int, int, dict[int, int]]:
    """``(resident bytes, processes and threads, {descendant pid: its parent pid})`` of ``pid`` and all its descendants.

    The resident bytes are the sum of each process's resident size (``/proc/PID/statm``), which
    counts a page once in every process that maps it: an upper bound of :func:`_memory_bytes`,
    cheap enough to read on every poll.
    """
    children: dict[int, list[int]] = {}
    threads: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:  # /proc/PID/stat after the command's ")": state, parent, ... num_threads (the 18th)
                fields_after_name = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                parent, threads[int(entry.name)] = int(fields_after_name[1]), int(fields_after_name[17])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    resident, tasks, parents, stack, page = 0, 0, {}, [pid], os.sysconf("SC_PAGE_SIZE")
    while stack:
        current = stack.pop()
        resident += _resident_bytes(current, page)
        tasks += threads.get(current, 0)
        for child in children.get(current, []):
            parents[child] = current
            stack.append(child)
    return resident, tasks, parents


def _resident_bytes(pid: int, page: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
    except (OSError, IndexError, ValueError):
        return 0


def _memory_bytes(pid: int, parents: dict[int, int]) -> int:
    """The memory that ``pid`` and its descendants hold, each page counted once.

    A page shared by several processes counts in each process's resident size: a child that
    was forked and has not yet called ``exec`` shares its parent's memory copy-on-write, and a
    child of ``vfork`` (how ``subprocess`` starts a program) or ``clone(CLONE_VM)`` shares its
    parent's whole address space until its ``exec``. Summed, resident sizes count the parent's
    memory again for each such child (a kernel of 590 MiB starting ``fc-list`` once measured
    1,171 MiB). So each process counts its proportional set size (``Pss`` in
    ``/proc/PID/smaps_rollup``: a page mapped by *n* processes counts 1/*n* in each), and a
    process that shares its parent's address space (``kcmp(2)``, ``KCMP_VM``) does not count,
    its parent having counted it. Where ``smaps_rollup`` cannot be read, the resident size
    counts; where ``kcmp`` is not available, the process counts: never less than the truth.

    Args:
        pid: int, the root of the process tree.
        parents: dict, descendant pid -> its parent's pid, as :func:`_process_tree` returns.

    Returns:
        int, bytes.
    """
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for process in (pid, *parents):
        if process in parents and _share_address_space(process, parents[process]):
            continue
        try:
            rollup = Path(f"/proc/{process}/smaps_rollup").read_text()
            total += next(int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss:")) * 1024
        except (OSError, StopIteration, IndexError, ValueError):
            total += _resident_bytes(process, page)
    return total


# kcmp(2)'s system call number on the machines that have one in common (x86-64; the generic
# table of arm64 and riscv64), and its comparison of address spaces.
_KCMP_SYSCALL = {"x86_64": 312, "aarch64": 272, "arm64": 272, "riscv64": 272}
_KCMP_VM = 1


@lru_cache(maxsize=1)
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _share_address_space(first: int, second: int) -> bool:
    """True when processes ``first`` and ``second`` share one address space (False when that cannot be told)."""
    number = _KCMP_SYSCALL.get(platform.machine())
    if number is None:
        return False
    answer = _libc().syscall(ctypes.c_long(number), ctypes.c_long(first), ctypes.c_long(second),
                             ctypes.c_long(_KCMP_VM), ctypes.c_long(0), ctypes.c_long(0))
    return answer == 0


def _tmpfs_bytes(root: str) -> int:
    """Bytes stored in the sandbox's tmpfs folders (``/tmp``, ``/dev/shm``, the home), seen through ``root``.

    ``root`` is the sandbox's root as :func:`_sandbox_root` finds it.
    """
    total = 0
    for folder in ("/tmp", "/dev/shm", HOME):
        try:
            stats = os.statvfs(f"{root}{folder}")
        except OSError:
            continue
        total += (stats.f_blocks - stats.f_bfree) * stats.f_frsize
    return total


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


class _Watchdog(threading.Thread):
    def __init__(self, manager: KernelManager, limits: Limits, deadline: float | None = None, group=None):
        super().__init__(daemon=True)
        self.manager, self.limits, self.group = manager, limits, group
        self.reason, self.done = None, threading.Event()
        self.deadline = time.monotonic() + limits.notebook_seconds if deadline is None else deadline
        self.sandbox_root = None  # set once the sandbox is built (:func:`_sandbox_root`); None unconfined

    def run(self):
        while not self.done.wait(0.1):
            process = getattr(self.manager.provisioner, "process", None)
            if process is None or process.poll() is not None:
                continue
            resident, tasks, parents = _process_tree(process.pid)
            stored = _tmpfs_bytes(self.sandbox_root) if self.sandbox_root else 0
            most = self.limits.memory_mb * 2**20
            if time.monotonic() > self.deadline:
                self.reason = f"the notebook ran past its {self.limits.notebook_seconds:.0f} s limit"
            elif self.group is not None and self.group.out_of_memory():  # a process of the sandbox was killed
                self.reason = _out_of_memory(self.limits, self.group)
            elif resident + stored > most and _memory_bytes(process.pid, parents) + stored > most:
                self.reason = (f"the kernel used more than {self.limits.memory_mb} MiB of memory "
                               "(its processes and its files in /tmp, /dev/shm and its home)")
            elif tasks > self.limits.processes + 2:  # bubblewrap's own two processes besides the kernel's
                self.reason = f"the kernel ran more than {self.limits.processes} processes and threads"
            if self.reason:
                process.kill()  # the client notices a dead kernel and the grader records why
                return


def _out_of_memory(limits: Limits, group) -> str:
    return (f"the sandbox used more than {limits.memory_mb} MiB of memory (its {group.kind} counts every page its "
            "processes are charged for: their memory, their files, kernel objects)")


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


def _kernel_socket_paths(manager: KernelManager) -> list[str]:
    """The five ``ipc`` socket files of a kernel, as the grader reaches them."""
    return [f"{manager.ip}-{port}" for port in (manager.shell_port, manager.iopub_port, manager.stdin_port,
                                                 manager.control_port, manager.hb_port)]


def _wait_for_sockets(manager: KernelManager, seconds: float) -> None:
    """Wait until the kernel has bound its five sockets: each path a socket file itself, never a link.

    Raises:
        RuntimeError: the sockets were not all there within ``seconds``.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
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
    """
    manager.context.setsockopt(zmq.RECONNECT_IVL, -1)  # the manager's own context: its sockets from now on
    manager._close_control_socket()  # start_kernel connected it to the path the kernel sees
    manager._connect_control_socket()


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
        parents = _process_tree(process.pid)[2]
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
    workdir = tempfile.mkdtemp(prefix="submission-", dir=_kernels_folder())
    try:
        yield workdir
    finally:
        try:
            shutil.rmtree(workdir)
        except (OSError, RecursionError):
            subprocess.run(["rm", "-rf", "--one-file-system", workdir], capture_output=True, timeout=300, check=False)


def run_submission(notebook, requests: dict, limits: Limits, environment: dict | None = None,
                   sandbox: bool = True, package: Path | None = None, deadline: float | None = None) -> SandboxResult:
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

    Returns:
        :class:`SandboxResult`; never raises for anything the submission does.
    """
    result = SandboxResult(isolated=sandbox)
    with _working_folder() as workdir:
        env = _kernel_environment(HOME if sandbox else workdir, environment)
        manager = _SandboxedKernelManager(transport="ipc", ip=f"{SOCKETS}/kernel" if sandbox else f"{workdir}/kernel")
        manager.connection_file = str(Path(workdir, "connection.json"))
        group = cgroups.create(limits.memory_mb, limits.processes + 2) if sandbox else None  # + bubblewrap's two
        if sandbox:
            user = _sandbox_user()
            manager.launch_prefix = _prelude(group, user, workdir) + sandbox_command(workdir, env, limits, package)
            result.accounting = group.kind if group else "watchdog"
        else:  # unconfined: the same allow-listed environment, the private folder as home and /tmp
            env["TMPDIR"], env["MPLCONFIGDIR"] = workdir, workdir
            env["PYTHONPATH"] = str((package or package_snapshot()).parent)
            manager.launch_prefix = _launcher(limits)
        watchdog, client = _Watchdog(manager, limits, deadline, group), None
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
            client.wait_for_ready(timeout=limits.cell_seconds)
            _control_round_trip(manager, limits.cell_seconds)
            _run_all(manager, client, notebook, requests, limits, result)
        except _KernelStopped:
            result.stopped = watchdog.reason or (
                _out_of_memory(limits, group) if group is not None and group.out_of_memory()
                else "the kernel died (it crashed or was killed)")
        except zmq.Again:
            result.stopped = watchdog.reason or (f"the kernel stopped answering: it sent a message larger than "
                                                 f"{MAX_MESSAGE_MB} MiB, which the grader never receives")
        except Exception as error:  # noqa: BLE001 - a submission must never crash the batch
            result.stopped = (watchdog.reason
                              or f"the kernel could not run the notebook ({type(error).__name__}: {error})")
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
            if group is not None:
                group.remove()
    return result


def _run_all(manager, client, notebook, requests, limits, result) -> None:
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        outcome = _run(manager, client, cell.source, limits, result, f"cell {index + 1}")
        if outcome is None:
            return
        if outcome[1] is not None and not outcome[2]:
            result.problems.append(f"cell {index + 1} raised {str(outcome[1][0])[:100]}: {str(outcome[1][1])[:120]}")
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
        elif outcome[1] is not None and nonce is None:  # the grader's own step failed: say so
            result.problems.append(f"the grader's step {key} raised {str(outcome[1][0])[:100]}: "
                                   f"{str(outcome[1][1])[:200]}")
        result.replies[key] = outcome[0]
