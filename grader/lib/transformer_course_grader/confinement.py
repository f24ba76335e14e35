"""The sandbox's confinement: bubblewrap's command line, the seccomp filter, the launcher's caps, and
the user a kernel runs as. :mod:`.sandbox` starts kernels with it; its docstring says what a kernel
sees and may do.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import struct
import subprocess
import sys
from dataclasses import dataclass, fields
from functools import lru_cache
from pathlib import Path

__all__ = ["Limits", "SandboxUnavailable", "sandbox_available", "sandbox_command", "KERNEL_ENVIRONMENT"]

# The only variables a kernel gets from the grader's environment (when set there).
KERNEL_ENVIRONMENT = (
    "COURSE_PROFILE",
    "COURSE_DATA_DIR",
    "KERAS_BACKEND",
    "TF_CPP_MIN_LOG_LEVEL",
    "MPLBACKEND",
    "LANG",
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or the host refuses it the namespaces it needs."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one submission.

    Attributes:
        cell_seconds: float, wall-clock seconds a cell (or one graded call) may take.
        notebook_seconds: float, wall-clock seconds for the whole notebook and all graded calls.
        memory_mb: int, MiB: the memory of the kernel and its child processes, each page once
            (:func:`.watchdog._memory_bytes`), plus what they stored in the sandbox's tmpfs folders
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


@lru_cache(maxsize=1)
def sandbox_available() -> bool:
    """True when bubblewrap is installed and can make the namespaces the sandbox uses here."""
    if shutil.which("bwrap") is None:
        return False
    try:
        probe = [
            "bwrap",
            "--unshare-all",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--",
            "true",
        ]
        return subprocess.run(probe, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@lru_cache(maxsize=1)
def _can_disable_userns() -> bool:
    """Whether this bubblewrap has ``--disable-userns`` (0.8.0 and later): no namespace of the kernel's own."""
    try:
        return (
            "--disable-userns" in subprocess.run(["bwrap", "--help"], capture_output=True, text=True, timeout=20).stdout
        )
    except (OSError, subprocess.SubprocessError):
        return False


# What a kernel sees of /etc: what the dynamic linker, the C library's name lookups, time zones,
# MIME types, fonts and Debian's Python read. Never the rest (shadow, gshadow, ssl/private, ...).
_ETC_ALLOWED = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "passwd",
    "group",
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "alternatives",
    "mime.types",
    "fonts",
    "matplotlibrc",
    f"python3.{sys.version_info.minor}",
    "python3",
    "os-release",
)

SANDBOX_USER_ID = 65534  # nobody: the user id inside the sandbox
HOME = "/home/student"  # the kernel's home and working folder inside the sandbox (a tmpfs)


def _readonly_paths() -> list[str]:
    """What a kernel may read: Python, its packages, the data (the course package comes as a snapshot)."""
    paths = [str(Path(sys.base_prefix).resolve()), str(Path(sys.prefix).resolve())]
    paths += [
        str(Path(entry).resolve())
        for entry in sys.path
        if entry and Path(entry).is_dir() and Path(entry).name in ("site-packages", "dist-packages")
    ]
    data = os.environ.get("COURSE_DATA_DIR")
    if data and Path(data).is_dir():
        paths.append(str(Path(data).resolve()))
    kept = []
    for path in sorted(set(paths), key=len):  # a folder inside one already kept adds nothing
        if not any(path == other or path.startswith(other.rstrip("/") + "/") for other in kept):
            kept.append(path)
    return kept


# System calls that make kernel objects whose memory neither a process's size nor a tmpfs folder
# shows: System V shared memory (a segment stays after every process detaches from it) and
# message queues, and memfd files; and the kernel's key management (add_key, request_key,
# keyctl), through which a process reads the keyrings of its session and of its user outside the
# sandbox. In the sandbox they fail with ENOSYS, as on a Linux built without them; every other
# system call is allowed. Per machine: its audit architecture and the calls' numbers (x86-64;
# the generic table of arm64 and riscv64).
_GENERIC_DENIED = {"shmget": 194, "msgget": 186, "memfd_create": 279, "add_key": 217, "request_key": 218, "keyctl": 219}
# Starting a program: refused in the kernel of the graded calls, whose functions need none. A child interpreter
# would run code no audit hook sees; ``fork`` stays (libraries' worker processes run this same, hooked
# interpreter). Per machine, as above.
_EXECUTE = {
    "x86_64": {"execve": 59, "execveat": 322},
    "aarch64": {"execve": 221, "execveat": 281},
    "arm64": {"execve": 221, "execveat": 281},
    "riscv64": {"execve": 221, "execveat": 281},
}
_SECCOMP_DENIED = {
    "x86_64": (
        0xC000003E,
        {"shmget": 29, "msgget": 68, "memfd_create": 319, "add_key": 248, "request_key": 249, "keyctl": 250},
    ),
    "aarch64": (0xC00000B7, _GENERIC_DENIED),
    "arm64": (0xC00000B7, _GENERIC_DENIED),
    "riscv64": (0xC00000F3, _GENERIC_DENIED),
}


def _seccomp_program(machine: str | None = None, programs: bool = True) -> bytes | None:
    """The sandbox's seccomp filter, as classic BPF (``struct sock_filter`` entries); None for an unknown machine.

    It kills a process that makes a system call of another architecture (a 32-bit program),
    fails the calls of :data:`_SECCOMP_DENIED` (and, on x86-64, every x32 call) with ENOSYS and
    allows the rest; with ``programs`` False, also ``execve`` and ``execveat`` (:data:`_EXECUTE`):
    no process of the kernel can start a program, not even the interpreter again.
    """
    machine = machine or platform.machine()
    if machine not in _SECCOMP_DENIED:
        return None
    architecture, numbers = _SECCOMP_DENIED[machine]
    if not programs:
        numbers = {**numbers, **_EXECUTE[machine]}
    load, equal, at_least, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    kill, allow, no_such_call = 0x80000000, 0x7FFF0000, 0x00050000 | 38  # SECCOMP_RET_*, ERRNO(ENOSYS)
    denied = sorted(numbers.values())
    checks = len(denied) + 1  # the x32 range, then one comparison per denied call
    program = [
        (load, 0, 0, 4),
        (equal, 1, 0, architecture),
        (ret, 0, 0, kill),
        (load, 0, 0, 0),
        (at_least, checks, 0, 0x40000000 if machine == "x86_64" else 0xFFFFFFFF),
    ]
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
# every key call after it; then ipykernel, with no debugger: nothing in grading asks for one, and a
# debugger is one more way into a running kernel (ipykernel turns it off when debugpy cannot be
# imported; its import was a tenth of a kernel's start).
_LAUNCH = """\
import resource, runpy, sys
sys.modules["debugpy"] = None
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


def launcher(limits: Limits, programs: bool = True) -> list[str]:
    """Python, with the process and file-size caps and the seccomp filter set, starting ``ipykernel``.

    A filter that cannot be installed stops the launch: the kernel never runs without it. With
    ``programs`` False the filter also refuses ``execve`` and ``execveat``: the kernel of the graded
    calls starts no program (``os.system``, ``subprocess``, ``posix_spawn`` fail; a forked child can
    only go on running this interpreter).
    """
    program = _seccomp_program(programs=programs) or b""
    keyctl = _SECCOMP_DENIED.get(platform.machine(), (0, {"keyctl": -1}))[1]["keyctl"]
    code = _LAUNCH.format(
        processes=int(limits.processes),
        files=int(limits.file_mb * 2**20),
        open_files=OPEN_FILES,
        program=program.hex(),
        size=len(program),
        keyctl=keyctl,
    )
    return [sys.executable, "-c", code]


# The folder of the kernel's sockets inside the sandbox: a tmpfs of SOCKETS_BYTES, room for the
# socket files and nothing more. The grader connects through /proc/PID/root (see
# _sandbox_root), so no folder on the host's disk needs to be writable by a kernel.
SOCKETS = "/run/kernel"
SOCKETS_BYTES = 64 * 2**10


def sandbox_command(
    workdir: str,
    environment: dict,
    mounts: list[tuple[Path, Path]],
    limits: Limits | None = None,
    programs: bool = True,
) -> list[str]:
    """The ``bwrap`` command line that starts a kernel in the sandbox (see the module docstring).

    Args:
        workdir: str, the folder of the kernel's connection file, mounted read-only.
        environment: the kernel's whole environment.
        mounts: ``(copy, installed folder)`` pairs: each copy mounted read-only over the folder it
            stands in for (the package snapshots of :mod:`.snapshot`).
        limits: :class:`Limits` (the default limits when None): the tmpfs sizes and the caps
            set before the kernel starts.
        programs: bool, whether the kernel may start programs (``execve``); False for the graded calls'.

    Returns:
        list of str, ending with the Python command that starts ``ipykernel``.
    """
    limits = limits or Limits()
    size = str(int(limits.tmp_mb * 2**20))
    command = [
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--clearenv",
        "--unshare-user",
        *(["--disable-userns"] if _can_disable_userns() else []),
        "--uid",
        str(SANDBOX_USER_ID),
        "--gid",
        str(SANDBOX_USER_ID),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        size,
        "--tmpfs",
        "/dev/shm",
        "--size",
        size,
        "--tmpfs",
        "/tmp",
        "--size",
        size,
        "--tmpfs",
        HOME,
        "--size",
        str(SOCKETS_BYTES),
        "--tmpfs",
        SOCKETS,
    ]
    for path in (*("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32"), *(f"/etc/{name}" for name in _ETC_ALLOWED)):
        if os.path.islink(path):  # a link stays a link (merged /usr: /bin -> usr/bin)
            command += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            command += ["--ro-bind", path, path]
    for path in _readonly_paths():
        command += ["--ro-bind", path, path]
    for copy, installed in mounts:
        command += ["--ro-bind", str(copy), str(installed)]
    command += ["--ro-bind", workdir, workdir, "--chdir", HOME]
    # The tree built, its root and /dev become read-only: only the home, /tmp, /dev/shm and the socket
    # folder (their own capped tmpfs mounts) stay writable, so nothing uncounted can be written.
    command += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in environment.items():
        command += ["--setenv", key, value]
    return [*command, "--", *launcher(limits, programs)]


def kernel_environment(home: str, extra: dict | None) -> dict:
    """The allow-listed environment of a kernel: nothing else of the grader's reaches it."""
    environment = {key: os.environ[key] for key in KERNEL_ENVIRONMENT if key in os.environ}
    environment.update({key: str(value) for key, value in (extra or {}).items() if key in KERNEL_ENVIRONMENT})
    environment.update(
        {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
            "HOME": home,
            "TMPDIR": "/tmp",
            "MPLCONFIGDIR": "/tmp/matplotlib",
            "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "LANG": environment.get("LANG", "C.UTF-8"),
        }
    )
    return environment


# Outside the sandbox, each kernel runs as a user of its own from this range (never a user of the host),
# so the per-user budgets of the Linux kernel (epoll watches, inotify, keys, pipe pages, RLIMIT_NPROC)
# are the sandbox's own, never the grader's. Inside, it is nobody (SANDBOX_USER_ID) as before.
SANDBOX_USERS = range(1_500_000_000, 1_600_000_000)


@lru_cache(maxsize=1)
def own_users_available() -> bool:
    """True where the grader is root with ``setpriv``, and bubblewrap and Python run as another user."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not sandbox_available():
        return False
    user = str(SANDBOX_USERS[0])
    probe = [
        "setpriv",
        f"--reuid={user}",
        f"--regid={user}",
        "--clear-groups",
        "bwrap",
        "--unshare-all",
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        sys.executable,
        "-c",
        "import numpy, ipykernel",
    ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def kernels_folder() -> str | None:
    """Where the kernels' folders and the package snapshots are made: the usual temporary folder, or, where
    each sandbox runs as a user of its own, a folder those users can pass through (not list) on a path
    they can pass through: ``/tmp/transformer-course-kernels`` (mode 0711, the grader's)."""
    if not own_users_available():
        return None
    folder = Path("/tmp/transformer-course-kernels")
    folder.mkdir(mode=0o711, exist_ok=True)
    status = folder.lstat()
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid():  # never one someone else planted
        raise SandboxUnavailable(f"{folder} is not a folder of the grader's own")
    folder.chmod(0o711)
    return str(folder)


def sandbox_user() -> int | None:
    """A fresh user id outside the sandbox for one kernel, or None where each sandbox cannot have its own."""
    if not own_users_available():
        return None
    import secrets

    return SANDBOX_USERS[secrets.randbelow(len(SANDBOX_USERS))]


def prelude(group, user: int | None, workdir: str) -> list[str]:
    """What runs as the grader before bubblewrap: join the control group, hand the kernel's folder (its
    connection file) to the sandbox's user, and become that user. [] where there is nothing to do."""
    if group is None and user is None:
        return []
    steps = ['for file in "$@"; do [ "$file" = -- ] && break; echo $$ > "$file" || exit 125; shift; done; shift']
    arguments = [*(group.procs_files() if group else []), "--"]
    if user is not None:
        steps.append(f'chown {user}:{user} "$1" "$1/connection.json" || exit 125; shift')
        steps.append(f'exec setpriv --reuid={user} --regid={user} --clear-groups "$@"')
        arguments.append(workdir)
    else:
        steps.append('exec "$@"')
    return ["/bin/sh", "-c", "; ".join(steps), "sh", *arguments]
