"""Cross-core pipes of the numeric reference: a Group's AIC and AIV kernels run as separate programs.

A call of a Group function (ExpandMixedKernel's launch of a split kernel) runs each member call in its own
thread, sharing the global memory and one `GroupRun`. Exactly one member runs at a time; a member runs
until it must wait for the other, then hands over:

- `tpush` puts a copy of the tile into its direction's ring (cube -> vector: `tpush_to_aiv`, popped by
  `tpop_from_aic`; vector -> cube: `tpush_to_aic` / `tpop_from_aiv`). The ring has `slot_num` slots (the
  pipe initialisation's, default 8); a slot is taken until the consumer frees it, so a push into a full
  ring waits.
- `tpop` takes the oldest pushed tile of its direction, waiting while the ring is empty.
- `tfree` releases the oldest popped slot of its direction; the tile popped from it is then overwritten
  with garbage (NaN, or the 0xA5 byte pattern), as the producer may reuse the slot at once: a read after
  the free gives wrong numbers.
- The members start in reverse call order (the vector kernel of a split pair first), so a read of global
  memory that no pop orders after the other kernel's write sees the memory before that write.
- A wait nobody can end (both members waiting, or one waiting on a member that has finished: a pop with no
  matching push, a push into a full ring nobody frees) is a fault naming the kernels, never a hang; so is a
  member ending with popped slots not freed, or pushed tiles nobody popped.
"""

from __future__ import annotations

import threading
from collections import deque

import numpy as np

DIRECTIONS = {"tile.tpush_to_aiv": "c2v", "tile.tpop_from_aic": "c2v", "system.tfree_to_aic": "c2v",
              "tile.tpush_to_aic": "v2c", "tile.tpop_from_aiv": "v2c", "system.tfree_to_aiv": "v2c"}
DEFAULT_SLOTS = 8
_local = threading.local()


class PipeFault(Exception):
    """A hand-off that cannot complete (deadlock) or leaves the pipe inconsistent."""


def current():
    """(GroupRun, member name) of the running thread, or None outside a Group launch."""
    return getattr(_local, "member", None)


class GroupRun:
    def __init__(self, members: list[str]):
        self.members = members
        self.cv = threading.Condition()
        self.turn: str | None = None
        self.done: set[str] = set()
        self.waiting: dict[str, str] = {}  # member -> what it waits for
        self.fault: str | None = None
        self.slots: dict[str, int] = {}
        self.rings: dict[str, deque] = {"c2v": deque(), "v2c": deque()}
        self.taken: dict[str, int] = {"c2v": 0, "v2c": 0}  # slots pushed and not yet freed
        self.popped: dict[str, deque] = {"c2v": deque(), "v2c": deque()}
        self.consumer: dict[str, str] = {}  # direction -> the member that pops it

    # ------------------------------------------------------------------ scheduling
    def run(self, calls: list) -> list:
        """Run the member `calls` (functions of no argument, in the Group's order) and return their values."""
        results: list = [None] * len(calls)
        errors: list = [None] * len(calls)
        order = list(reversed(range(len(calls))))
        self.turn = self.members[order[0]]

        def body(i: int) -> None:
            name = self.members[i]
            _local.member = (self, name)
            try:
                with self.cv:
                    while self.turn != name and self.fault is None:
                        self.cv.wait()
                if self.fault is None:
                    results[i] = calls[i]()
                    self._check_balanced(name)
            except BaseException as e:  # noqa: BLE001 - handed to the caller below
                errors[i] = e
                with self.cv:
                    if self.fault is None:
                        self.fault = f"{name} stopped: {e}"
            finally:
                _local.member = None
                with self.cv:
                    self.done.add(name)
                    self._hand_over(name)
                    self.cv.notify_all()

        threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(len(calls))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        first = next((e for e in errors if e is not None and not isinstance(e, PipeFault)), None)
        first = first or next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
        if self.fault is not None:
            raise PipeFault(self.fault)
        left = {d: len(r) for d, r in self.rings.items() if r}
        if left:
            raise PipeFault("tiles pushed and never popped: " + ", ".join(f"{n} {d}" for d, n in left.items()))
        return results

    def _hand_over(self, me: str) -> None:
        """Give the turn to the next member that is not finished (called holding the lock)."""
        others = [m for m in self.members if m != me and m not in self.done]
        self.turn = others[0] if others else None

    def _wait(self, me: str, what: str, ready) -> None:
        with self.cv:
            while not ready() and self.fault is None:
                self.waiting[me] = what
                others = [m for m in self.members if m != me and m not in self.done]
                runnable = [m for m in others if m not in self.waiting]
                if not runnable:
                    blocked = "; ".join(f"{m} waits for {w}" for m, w in sorted(self.waiting.items()))
                    done = ", ".join(sorted(self.done))
                    self.fault = f"cross-core deadlock: {blocked}" + (f" (finished: {done})" if done else "")
                    self.cv.notify_all()
                    break
                self.turn = runnable[0]
                self.cv.notify_all()
                while self.turn != me and self.fault is None:
                    self.cv.wait()
                self.waiting.pop(me, None)
            self.waiting.pop(me, None)
            if self.fault is not None:
                raise PipeFault(self.fault)

    def _wake(self) -> None:
        """Another member may be able to go on: let it be picked next time this one waits."""
        with self.cv:
            for m in list(self.waiting):
                self.waiting.pop(m)
            self.cv.notify_all()

    def _check_balanced(self, me: str) -> None:
        with self.cv:
            for d, who in self.consumer.items():
                if who == me and self.popped[d]:
                    raise PipeFault(f"{me} ended with {len(self.popped[d])} popped {d} slot(s) never freed")

    # ------------------------------------------------------------------ the pipe ops
    def init(self, slot_num: int | None) -> None:
        n = slot_num if slot_num and slot_num > 0 else DEFAULT_SLOTS
        for d in ("c2v", "v2c"):
            self.slots.setdefault(d, n)

    def push(self, me: str, op: str, value) -> None:
        d = DIRECTIONS[op]
        cap = self.slots.get(d, DEFAULT_SLOTS)
        self._wait(me, f"a free {d} slot ({op})", lambda: self.taken[d] < cap)
        with self.cv:
            self.taken[d] += 1
            self.rings[d].append(value)
        self._wake()

    def pop(self, me: str, op: str):
        d = DIRECTIONS[op]
        self._wait(me, f"a pushed {d} tile ({op})", lambda: bool(self.rings[d]))
        with self.cv:
            v = self.rings[d].popleft()
            self.popped[d].append(v)
            self.consumer[d] = me
        return v

    def free(self, me: str, op: str) -> None:
        d = DIRECTIONS[op]
        with self.cv:
            if not self.popped[d]:
                self.fault = f"{me}: {op} frees a {d} slot it has not popped"
                self.cv.notify_all()
                raise PipeFault(self.fault)
            v = self.popped[d].popleft()
            self.taken[d] -= 1
        poison(v)
        self._wake()


def poison(v) -> None:
    """Overwrite a freed slot's tile in place (its storage is the producer's again)."""
    data = getattr(v, "arr", None)
    if not isinstance(data, np.ndarray):
        data = getattr(v, "data", None)
    if isinstance(data, np.ndarray):
        if data.dtype.kind == "f":
            data.fill(np.nan)
        elif data.dtype.kind == "b":
            data.fill(False)
        else:
            data.view(np.uint8).fill(0xA5)


__all__ = ["DIRECTIONS", "GroupRun", "PipeFault", "current", "poison"]
