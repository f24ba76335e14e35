"""The watchdog of a sandboxed kernel: it polls the sandbox's processes, memory (each page once),
tmpfs files, threads and deadline every 0.1 s, and stops the kernel with the reason when a limit
is broken.
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import time
from functools import lru_cache
from pathlib import Path

from jupyter_client.manager import KernelManager

from .confinement import HOME, Limits


def process_tree(pid: int) -> tuple[int, int, dict[int, int]]:
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
        parents: dict, descendant pid -> its parent's pid, as :func:`process_tree` returns.

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
    answer = _libc().syscall(
        ctypes.c_long(number),
        ctypes.c_long(first),
        ctypes.c_long(second),
        ctypes.c_long(_KCMP_VM),
        ctypes.c_long(0),
        ctypes.c_long(0),
    )
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


class Watchdog(threading.Thread):
    """A thread that watches one kernel and kills it at its first breach of the limits.

    Every 0.1 s it reads the kernel's process tree: past the notebook's deadline, a control group
    that killed a process for memory, resident memory plus the sandbox's tmpfs files over
    ``limits.memory_mb``, or more than ``limits.processes`` processes and threads, it sets
    ``reason`` (a sentence for the report) and kills the kernel. A watchdog that fails to look kills
    the kernel too (fail closed). Stop it with ``done.set()``.

    Args:
        manager: the kernel's ``KernelManager`` (its provisioner's process is watched).
        limits: :class:`.confinement.Limits`.
        deadline: ``time.monotonic()`` value the notebook must finish by (default: now plus
            ``limits.notebook_seconds``).
        group: the kernel's control group (:mod:`.cgroups`), or None unconfined.
    """

    def __init__(self, manager: KernelManager, limits: Limits, deadline: float | None = None, group=None):
        super().__init__(daemon=True)
        self.manager, self.limits, self.group = manager, limits, group
        self.reason, self.done = None, threading.Event()
        self.deadline = time.monotonic() + limits.notebook_seconds if deadline is None else deadline
        self.sandbox_root = None  # set once the sandbox is built (:func:`_sandbox_root`); None unconfined

    def run(self):
        try:
            self._poll_until_done()
        except Exception as error:  # noqa: BLE001 - a watchdog that cannot look stops the kernel (fail closed)
            self.reason = f"the grader's watchdog failed ({type(error).__name__}), so the kernel was stopped"
            process = getattr(self.manager.provisioner, "process", None)
            if process is not None:
                process.kill()

    def _poll_until_done(self):
        while not self.done.wait(0.1):
            process = getattr(self.manager.provisioner, "process", None)
            if process is None or process.poll() is not None:
                continue
            resident, tasks, parents = process_tree(process.pid)
            stored = _tmpfs_bytes(self.sandbox_root) if self.sandbox_root else 0
            most = self.limits.memory_mb * 2**20
            if time.monotonic() > self.deadline:
                self.reason = f"the notebook ran past its {self.limits.notebook_seconds:.0f} s limit"
            elif self.group is not None and self.group.out_of_memory():  # a process of the sandbox was killed
                self.reason = out_of_memory_reason(self.limits, self.group)
            elif resident + stored > most and _memory_bytes(process.pid, parents) + stored > most:
                self.reason = (
                    f"the kernel used more than {self.limits.memory_mb} MiB of memory "
                    "(its processes and its files in /tmp, /dev/shm and its home)"
                )
            elif tasks > self.limits.processes + 2:  # bubblewrap's own two processes besides the kernel's
                self.reason = f"the kernel ran more than {self.limits.processes} processes and threads"
            if self.reason:
                process.kill()  # the client notices a dead kernel and the grader records why
                return


def out_of_memory_reason(limits: Limits, group) -> str:
    """The report's sentence for a sandbox whose control group ``group`` killed a process for memory."""
    return (
        f"the sandbox used more than {limits.memory_mb} MiB of memory (its {group.kind} counts every page its "
        "processes are charged for: their memory, their files, kernel objects)"
    )
