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
- A vector kernel with two lanes (SplitVectorKernel's `dual_aiv_dispatch`) runs as two members, lane 0
  and lane 1 (`get_subblock_idx`), each with its own rings: a cube push gives each lane its part (the half
  of the split axis for `split` 1/2, a copy for 0), a cube pop waits for both lanes' pushes and joins them
  (the halves, or lane 0's tile for `split=0`), a cube free releases both lanes' slots.
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
AIV_SIDE = ("tile.tpop_from_aic", "tile.tpush_to_aic", "system.tfree_to_aic")
_local = threading.local()


class PipeFault(Exception):
    """A hand-off that cannot complete (deadlock) or leaves the pipe inconsistent."""


def current():
    """(GroupRun, member name) of the running thread, or None outside a Group launch."""
    return getattr(_local, "member", None)


class GroupRun:
    def __init__(self, members: list[str], lanes: dict[str, int] | None = None):
        self.members = members
        self.lanes = dict(lanes or {})  # vector member -> its lane (sub-block index)
        self.nlanes = max(self.lanes.values(), default=0) + 1
        self.cv = threading.Condition()
        self.turn: str | None = None
        self.done: set[str] = set()
        self.waiting: dict[str, str] = {}  # member -> what it waits for
        self.fault: str | None = None
        self.slots: dict[str, int] = {}
        keys = [(d, lane) for d in ("c2v", "v2c") for lane in range(self.nlanes)]
        self.rings: dict[tuple, deque] = {k: deque() for k in keys}
        self.taken: dict[tuple, int] = {k: 0 for k in keys}  # slots pushed and not yet freed
        self.popped: dict[tuple, deque] = {k: deque() for k in keys}
        self.consumer: dict[tuple, str] = {}  # (direction, lane) -> the member that pops it
        self.joined: dict[str, deque] = {"c2v": deque(), "v2c": deque()}  # cube pops joined from the lanes

    def lane(self, member: str) -> int:
        """The sub-block index `member` runs as (0 for the cube kernel and a one-lane vector kernel)."""
        return self.lanes.get(member, 0)

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
        left = {_key(k): len(r) for k, r in self.rings.items() if r}
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
            for k, who in self.consumer.items():
                if who == me and self.popped[k]:
                    raise PipeFault(f"{me} ended with {len(self.popped[k])} popped {_key(k)} slot(s) never freed")

    # ------------------------------------------------------------------ the pipe ops
    def init(self, slot_num: int | None) -> None:
        n = slot_num if slot_num and slot_num > 0 else DEFAULT_SLOTS
        for d in ("c2v", "v2c"):
            self.slots.setdefault(d, n)

    def _lanes_of(self, me: str, op: str) -> list[int]:
        """The lanes an op of `me` works on: its own lane on the vector side, every lane on the cube side."""
        return [self.lane(me)] if op in AIV_SIDE else list(range(self.nlanes))

    def push(self, me: str, op: str, value, part=None) -> None:
        """Push `value`; on the cube side with two lanes, lane i receives `part(value, i)`."""
        d = DIRECTIONS[op]
        cap = self.slots.get(d, DEFAULT_SLOTS)
        lanes = self._lanes_of(me, op)
        self._wait(me, f"a free {d} slot ({op})", lambda: all(self.taken[(d, x)] < cap for x in lanes))
        with self.cv:
            for x in lanes:
                self.taken[(d, x)] += 1
                self.rings[(d, x)].append(value if part is None or len(lanes) == 1 else part(value, x))
        self._wake()

    def pop(self, me: str, op: str, join=None):
        """Pop the oldest pushed tile; on the cube side with two lanes, `join(tiles)` of both lanes' tiles."""
        d = DIRECTIONS[op]
        lanes = self._lanes_of(me, op)
        self._wait(me, f"a pushed {d} tile ({op})", lambda: all(self.rings[(d, x)] for x in lanes))
        got = []
        with self.cv:
            for x in lanes:
                v = self.rings[(d, x)].popleft()
                self.popped[(d, x)].append(v)
                self.consumer[(d, x)] = me
                got.append(v)
        if len(got) == 1:
            return got[0]
        v = join(got) if join is not None else got[0]
        with self.cv:
            self.joined[d].append(v)
        return v

    def free(self, me: str, op: str) -> None:
        d = DIRECTIONS[op]
        freed = []
        with self.cv:
            for x in self._lanes_of(me, op):
                if not self.popped[(d, x)]:
                    self.fault = f"{me}: {op} frees a {d} slot it has not popped"
                    self.cv.notify_all()
                    raise PipeFault(self.fault)
                freed.append(self.popped[(d, x)].popleft())
                self.taken[(d, x)] -= 1
            if op not in AIV_SIDE and self.joined[d]:
                freed.append(self.joined[d].popleft())
        for v in freed:
            poison(v)
        self._wake()


def _key(k: tuple) -> str:
    d, lane = k
    return d if lane == 0 else f"{d} (lane {lane})"


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
