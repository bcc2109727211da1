"""Writing the output files of one command: all of them or none.

A command collects every file it produces (`OutputSet.add`) and commits them once at the end
(`OutputSet.commit`). Before anything is written the set is checked: no output may be the same file as an
input or as another output (symlinks and hard links included). Then:

- regular files and missing ones are written to a temp file in the target's folder and renamed over the
  target once every temp file is complete (a symlink is followed: its target is replaced, the link stays);
- FIFOs and character devices (`/dev/null`, a terminal) are written *through*, never replaced;
- `-` is standard output where the command allows it;
- directories, block devices and sockets are refused.

On a failure the temp files are removed, the renames already made are undone from hard-link backups (best
effort) and folders the commit created are removed again, so a failed command leaves the file system as it
found it (bytes already written into a FIFO or a device cannot be taken back).
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile

STDOUT = "-"


class OutputError(ValueError):
    """An output cannot be written. `collision`: it is the same file as an input or another output."""

    def __init__(self, message: str, path: str, collision: bool = False):
        super().__init__(message)
        self.path = path
        self.collision = collision


def _describe(path: str) -> str:
    return "standard output" if path == STDOUT else path


def _identity(path: str):
    """What `path` names: a (device, inode) pair for an existing file, else its resolved path."""
    if path == STDOUT:
        try:
            st = os.fstat(sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            return ("stdout",)
        return ("inode", st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else ("stdout",)
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    return ("inode", st.st_dev, st.st_ino)


def _kind(path: str) -> str:
    """"new" (missing), "regular", "stream" (FIFO / character device) or "stdout"; raises for the rest."""
    if path == STDOUT:
        return "stdout"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "new"
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}", path) from None
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return "regular"
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return "stream"
    what = "a directory" if stat.S_ISDIR(mode) else "a block device" if stat.S_ISBLK(mode) else "not a regular file"
    raise OutputError(f"cannot write {path}: it is {what}", path)


def is_stream(path: str) -> bool:
    """`path` is standard output or an existing FIFO / character device (written through, not replaced)."""
    if path == STDOUT:
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class OutputSet:
    """The files one command writes. `inputs`: files the command read (never overwritten); `stdout_ok`:
    `-` means standard output (otherwise it is refused)."""

    def __init__(self, inputs=(), stdout_ok: bool = False):
        self.inputs = [os.fspath(p) for p in inputs if p is not None and os.fspath(p) != STDOUT]
        self.stdout_ok = stdout_ok
        self.entries: list[tuple[str, bytes]] = []
        self.dirs: list[str] = []

    def add(self, path, data: str | bytes) -> None:
        self.entries.append((os.fspath(path), data.encode("utf-8") if isinstance(data, str) else bytes(data)))

    def add_dir(self, path) -> None:
        """A folder the outputs go into: created at commit time if missing."""
        self.dirs.append(os.fspath(path))

    def check(self) -> None:
        """Refuse an output that is an input or another output, and `-` where stdout is not allowed."""
        seen_in = {_identity(p): p for p in self.inputs}
        seen_out: dict = {}
        for path, _ in self.entries:
            if path == STDOUT and not self.stdout_ok:
                raise OutputError("cannot write to standard output (-) here; give a file name", path)
            ident = _identity(path)
            if ident in seen_in:
                src = seen_in[ident]
                same = "" if os.path.abspath(src) == os.path.abspath(path) else " (the same file by another name)"
                raise OutputError(f"refusing to write {_describe(path)}: it is the input file {src}{same}", path,
                                  collision=True)
            if ident in seen_out:
                other = seen_out[ident]
                raise OutputError(f"refusing to write {_describe(path)}: it is also the output "
                                  f"{_describe(other)}; give the outputs different names", path, collision=True)
            seen_out[ident] = path

    def commit(self) -> None:
        """Check, then write every output or none (see the module docstring). Raises OutputError."""
        self.check()
        created: list[str] = []
        staged: list[tuple[str, str]] = []  # (temp file, real target)
        replaced: list[tuple[str, str | None, bool]] = []  # (real target, hard-link backup, it existed)
        current = self.entries[0][0] if self.entries else ""
        try:
            for d in self.dirs:
                self._ensure_dir(d, created)
            kinds = [(path, data, _kind(path)) for path, data in self.entries]
            mask = _umask()
            for path, data, kind in kinds:
                current = path
                if kind in ("new", "regular"):
                    staged.append((self._stage(path, data, kind, mask), os.path.realpath(path)))
            for path, data, kind in kinds:
                current = path
                if kind == "stdout":
                    sys.stdout.flush()
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()
                elif kind == "stream":
                    self._write_through(path, data)
            for (tmp, real), path in zip(staged, [p for p, _, k in kinds if k in ("new", "regular")]):
                current = path
                existed = os.path.lexists(real)
                backup = self._backup(real) if existed else None
                try:
                    os.replace(tmp, real)
                except BaseException:
                    if backup:
                        os.unlink(backup)
                    raise
                replaced.append((real, backup, existed))
        except BaseException as e:
            self._rollback(staged, replaced, created)
            if isinstance(e, OSError) and not isinstance(e, BrokenPipeError):
                raise OutputError(f"cannot write {_describe(current)}: {e.strerror or e}", current) from None
            raise
        for _, backup, _ in replaced:
            if backup:
                try:
                    os.unlink(backup)
                except OSError:
                    pass

    # -- steps ------------------------------------------------------------------------------------------

    @staticmethod
    def _ensure_dir(d: str, created: list[str]) -> None:
        if os.path.isdir(d):
            return
        if os.path.lexists(d):
            raise OutputError(f"cannot write into {d}: it is not a directory", d)
        missing = []
        p = os.path.abspath(d)
        while not os.path.lexists(p):
            missing.append(p)
            parent = os.path.dirname(p)
            if parent == p:
                break
            p = parent
        if os.path.lexists(p) and not os.path.isdir(p):
            raise OutputError(f"cannot create {d}: {p} is not a directory", d)
        for q in reversed(missing):
            try:
                os.mkdir(q)
            except OSError as e:
                raise OutputError(f"cannot create {d}: {e.strerror or e}", d) from None
            created.append(q)

    @staticmethod
    def _stage(path: str, data: bytes, kind: str, mask: int) -> str:
        real = os.path.realpath(path)
        fd, tmp = tempfile.mkstemp(prefix=".ptoc-", suffix=".tmp", dir=os.path.dirname(real) or ".")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            mode = (os.stat(real).st_mode & 0o7777) if kind == "regular" else (0o666 & ~mask)
            os.chmod(tmp, mode)
        except BaseException:
            os.unlink(tmp)
            raise
        return tmp

    @staticmethod
    def _write_through(path: str, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)

    @staticmethod
    def _backup(real: str) -> str | None:
        """A hard link to the file about to be replaced, or None where links are not possible."""
        for i in range(100):
            b = os.path.join(os.path.dirname(real), f".ptoc-{os.getpid()}-{i}.bak")
            try:
                os.link(real, b)
                return b
            except FileExistsError:
                continue
            except OSError:
                return None
        return None

    @staticmethod
    def _rollback(staged, replaced, created) -> None:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        for real, backup, existed in reversed(replaced):
            try:
                if not existed:
                    os.unlink(real)
                elif backup:
                    os.replace(backup, real)
            except OSError:
                pass
        for d in reversed(created):
            try:
                os.rmdir(d)
            except OSError:
                pass
