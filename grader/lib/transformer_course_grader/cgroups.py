"""A memory and process control group for one sandbox, where the host lets the grader make one.

The watchdog of :mod:`.sandbox` polls what it can see (resident memory, the sandbox's tmpfs files,
the number of tasks). A control group is the Linux kernel's own account: every page the sandbox's
processes are charged for counts against ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1):
anonymous memory, tmpfs files and, as the kernel charges them, kernel objects and socket buffers;
past the limit the kernel's out-of-memory killer stops a process of the group, never the grader.
``pids.max`` caps its tasks the same way.

:func:`create` makes one under the grader's own group: cgroup v2 where the unified hierarchy is
mounted and its memory controller can be enabled there (a delegated subtree: a systemd service
with ``Delegate=yes``, GitHub's runners as root), cgroup v1's ``memory`` and ``pids`` hierarchies
where those are what the host mounts (as root). Anywhere else it returns None, and the watchdog
alone keeps the limits; :attr:`ControlGroup.kind` says which ran, and the report says so too.

Example:
    >>> group = create(memory_mb=1500, processes=128)  # doctest: +SKIP
    >>> group.procs_files()  # doctest: +SKIP
    ['/sys/fs/cgroup/memory/transformer-course-1f2e3d4c5b6a/cgroup.procs', ...]
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

__all__ = ["ControlGroup", "create", "ROOT"]

ROOT = Path("/sys/fs/cgroup")


def _own_path(controller: str) -> str | None:
    """This process's group in ``controller``'s v1 hierarchy ("" for v2's unified one), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers.split(",") == [controller] or (controller == "" and controllers == ""):
            return path
    return None


class ControlGroup:
    """The group of one sandbox: its folders (one per hierarchy), its limits, and how to leave no trace.

    Attributes:
        kind: ``"cgroup v2"`` or ``"cgroup v1"``.
        folders: the group's folders, one per hierarchy (v1: memory, then pids if mounted).
    """

    def __init__(self, kind: str, folders: list[Path]):
        self.kind, self.folders = kind, folders

    def procs_files(self) -> list[str]:
        """The files a process writes its pid to, to join the group (one per hierarchy)."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def out_of_memory(self) -> bool:
        """Did the kernel's out-of-memory killer stop a process of the group?"""
        memory = self.folders[0]
        try:
            if self.kind == "cgroup v2":
                events = (memory / "memory.events").read_text()
            else:
                events = (memory / "memory.oom_control").read_text()
                if int((memory / "memory.failcnt").read_text() or 0) and "oom_kill " not in events:
                    return True  # an older kernel without the count: the limit was hit
        except (OSError, ValueError):
            return False
        counts = dict(line.split() for line in events.splitlines() if len(line.split()) == 2)
        return int(counts.get("oom_kill", "0")) > 0

    def remove(self) -> None:
        """Kill what is left in the group and remove its folders (a few tries: the kernel reaps asynchronously)."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    pids = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


def _write(path: Path, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


def _create_v2(memory_bytes: int, processes: int) -> ControlGroup | None:
    own = _own_path("")
    if own is None or not (ROOT / "cgroup.controllers").exists():
        return None
    parent = ROOT / own.lstrip("/")
    try:
        if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            _write(parent / "cgroup.subtree_control", "+memory +pids")  # refused where the parent holds processes
        folder = parent / f"transformer-course-{uuid.uuid4().hex[:12]}"
        folder.mkdir()
    except OSError:
        return None
    group = ControlGroup("cgroup v2", [folder])
    try:
        _write(folder / "memory.max", str(memory_bytes))
        if (folder / "memory.swap.max").exists():
            _write(folder / "memory.swap.max", "0")
        if (folder / "pids.max").exists():
            _write(folder / "pids.max", str(processes))
    except OSError:
        group.remove()
        return None
    return group


def _create_v1(memory_bytes: int, processes: int) -> ControlGroup | None:
    own = _own_path("memory")
    if own is None or not (ROOT / "memory" / "memory.limit_in_bytes").exists():
        return None
    name = f"transformer-course-{uuid.uuid4().hex[:12]}"
    folders = []
    try:
        memory = ROOT / "memory" / own.lstrip("/") / name
        memory.mkdir()
        folders.append(memory)
        _write(memory / "memory.limit_in_bytes", str(memory_bytes))
        if (memory / "memory.memsw.limit_in_bytes").exists():  # no swap past the limit either
            _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes))
        pids_own = _own_path("pids")
        if pids_own is not None and (ROOT / "pids").is_dir():
            pids = ROOT / "pids" / pids_own.lstrip("/") / name
            pids.mkdir()
            folders.append(pids)
            _write(pids / "pids.max", str(processes))
    except OSError:
        ControlGroup("cgroup v1", folders).remove()
        return None
    return ControlGroup("cgroup v1", folders)


def create(memory_mb: float, processes: int) -> ControlGroup | None:
    """A fresh group with these limits, or None where the host gives the grader no control group.

    Args:
        memory_mb: float, the sandbox's memory limit in MiB (everything its processes are charged for).
        processes: int, its most tasks (processes and threads).
    """
    memory_bytes = int(memory_mb * 2**20)
    return _create_v2(memory_bytes, processes) or _create_v1(memory_bytes, processes)
