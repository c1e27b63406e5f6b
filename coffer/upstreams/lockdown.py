"""Landlock: the kernel's own unprivileged sandbox, applied to a stdio upstream just before it runs.

Run by path, never imported by the gateway, with the standard library only (like the supervisor,
coffer.upstreams.reaper): `python -I -S lockdown.py RULES_JSON -- PROGRAM ARGS...`. It restricts
itself, then becomes the server (exec keeps the restriction, and every child inherits it):

- files: only what RULES names, read (and execute) or read-write; everything else is EACCES. Given
  where bubblewrap is missing (`"files": true`); under bubblewrap its mounts decide and files are left
  to it;
- TCP (ABI 4 and later): connect only to the ports RULES names, bind none;
- scopes (ABI 6 and later): no signal to a process outside the server's own tree, no connection to an
  abstract unix socket outside it (the host's D-Bus, X11, debuggers);
- /proc: only the server's own process (`own_proc`) and the system-wide files: Landlock's ptrace scoping
  alone leaves another process's environ and maps readable.

A rule the kernel's ABI does not know is left out: `coffer doctor` says which ABI this is and what it
covers. With no Landlock at all it refuses to run the server (exit 126) when RULES says `"required"`.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any, NoReturn

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

# Filesystem rights, by the ABI that brought them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
WRITE_DIR = sum(1 << i for i in range(4, 13))  # remove and make files, dirs, sockets, fifos, devices, links
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV  # what a rule on a file (not a dir) may hold
# /proc beyond the server's own process (its children see no /proc/self: the price of not reading others').
PROC_SHARED = tuple(
    f"/proc/{n}"
    for n in ("cpuinfo", "meminfo", "stat", "loadavg", "uptime", "version", "sys", "filesystems", "cgroups", "mounts")
)
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1


class RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class NetPort(ctypes.Structure):
    _fields_ = [("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64)]


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def abi(libc: Any = None) -> int:
    """The kernel's Landlock ABI version; 0 where there is none (old kernel, or not enabled at boot)."""
    libc = libc or _libc()
    version = int(libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION)))
    return max(version, 0)


def fs_rights(version: int) -> int:
    rights = EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | WRITE_DIR
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


def _fail(what: str) -> NoReturn:
    err = ctypes.get_errno()
    raise OSError(err, f"landlock: {what}: {os.strerror(err)}")


def restrict(rules: dict[str, Any]) -> int:
    """Restrict this process (and what it will exec) as `rules` say; the ABI used, 0 when none exists.

    rules: {"files": bool, "read": [paths], "write": [paths], "list": [folders], "own_proc": bool,
    "ports": [int] | null (any), "scoped": bool}
    """
    libc = _libc()
    version = abi(libc)
    if version == 0:
        return 0
    attr = RulesetAttr(0, 0, 0)
    size = 8  # ABI 1-3 know handled_access_fs only
    if rules.get("files"):
        attr.fs = fs_rights(version)
    if version >= 4:
        size = 16
        if rules.get("ports") is not None:
            attr.net = NET_BIND_TCP | NET_CONNECT_TCP
    if version >= 6:
        size = 24
        if rules.get("scoped", True):
            attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    if not (attr.fs or attr.net or attr.scoped):
        return version  # nothing this ABI could add (bubblewrap's namespaces already scope processes)
    fd = int(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)))
    if fd < 0:
        _fail("create_ruleset")
    try:
        if attr.fs:
            read = attr.fs & (EXECUTE | READ_FILE | READ_DIR)
            if rules.get("own_proc"):  # /proc: its own process and the system-wide files, no other process
                for path in (f"/proc/{os.getpid()}", *PROC_SHARED):
                    _add_path(libc, fd, path, read)
            for path in rules.get("read", ()):
                _add_path(libc, fd, path, read)
            for path in rules.get("write", ()):
                _add_path(libc, fd, path, attr.fs)
            for path in rules.get("list", ()):  # a folder that holds a hidden place: listed, never read
                _add_path(libc, fd, path, attr.fs & READ_DIR)
        if attr.net:
            for port in rules.get("ports") or ():
                rule = NetPort(NET_CONNECT_TCP, int(port))
                if libc.syscall(SYS_ADD_RULE, fd, RULE_NET_PORT, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                    _fail(f"port {port}")
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            _fail("no_new_privs")
        if libc.syscall(SYS_RESTRICT_SELF, fd, ctypes.c_uint32(0)) != 0:
            _fail("restrict_self")
    finally:
        os.close(fd)
    return version


def _add_path(libc: Any, ruleset: int, path: str, rights: int) -> None:
    """Allow `rights` beneath `path` (a file gets only the rights a file can have); a missing path is skipped."""
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_ONLY
        rule = PathBeneath(rights, fd)
        if libc.syscall(SYS_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
            _fail(f"rule for {path}")
    finally:
        os.close(fd)


def confine(rules: dict[str, Any]) -> str | None:
    """Apply `rules` to this process; why it could not be confined, or None."""
    try:
        version = restrict(rules)
    except OSError as exc:
        return f"cannot confine: {exc.strerror}"
    if version == 0 and rules.get("required"):
        return "cannot confine: this kernel has no Landlock"
    return None


def split(argv: list[str]) -> tuple[dict[str, Any], list[str]] | None:
    """(rules, the program's argv) where `argv` runs a program through this launcher, else None: the
    supervisor (coffer.upstreams.reaper) applies the rules itself, saving an interpreter's start."""
    if len(argv) > 6 and argv[1:4] == ["-I", "-S", os.path.abspath(__file__)] and argv[5] == "--":
        return json.loads(argv[4]), argv[6:]
    return None


def become(rules: dict[str, Any], argv: list[str]) -> NoReturn:
    """Confine this process by `rules`, then become `argv`: exit 126 when it cannot be confined, 127
    when the program cannot run (this launcher's and the supervisor's one way in)."""
    problem = confine(rules)
    if problem is not None:
        os.write(2, f"coffer: {problem} ({argv[0]})\n".encode())
        os._exit(126)
    try:
        os.execv(argv[0], argv)
    except OSError as exc:
        os.write(2, f"coffer: cannot run {argv[0]}: {exc.strerror}\n".encode())
    os._exit(127)


def main(args: list[str]) -> NoReturn:
    argv = args[2:] if len(args) > 2 and args[1] == "--" else args[1:]
    become(json.loads(args[0]), argv)


if __name__ == "__main__":
    main(sys.argv[1:])
