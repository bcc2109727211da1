"""The `.pto` executor's cross-core family: the pipe set-up and tpush / tpop / tfree.

They run only inside a Group launch (`ptoc.reference.pipes`), where the AIC and AIV functions of a split
kernel run as two programs sharing the pipes: a push puts a copy of the tile's valid region into its
direction's ring (with two vector lanes, each lane's half for split 1 / 2), a pop binds the oldest pushed
tile (the slot itself, typed by the op's result type), a free releases the slot and overwrites what was
popped from it.
"""

from __future__ import annotations

import re

import numpy as np

from ptoc.reference.pto_exec.text import Op, PtoExecError, Tile, _np_type, parse_tile_type

# PTO op -> the IR op naming the same direction (ptoc.reference.pipes.DIRECTIONS)
_IR = {"pto.tpush_to_aiv": "tile.tpush_to_aiv", "pto.tpush_to_aic": "tile.tpush_to_aic",
       "pto.tpop_from_aic": "tile.tpop_from_aic", "pto.tpop_from_aiv": "tile.tpop_from_aiv",
       "pto.tfree_from_aic": "system.tfree_to_aic", "pto.tfree_from_aiv": "system.tfree_to_aiv"}


def _run(op: Op):
    from ptoc.reference import pipes

    run = pipes.current()
    if run is None:
        raise PtoExecError(f"{op.name} outside a Group launch: the peer kernel is not running (run the pair "
                           "through the function that launches both)", op.line)
    return run


def _call(op: Op, fn):
    from ptoc.reference import pipes

    try:
        return fn()
    except pipes.PipeFault as e:
        raise PtoExecError(str(e), op.line) from None


def _split(op: Op) -> int:
    m = re.search(r"\{\s*split\s*=\s*(\d+)\s*\}", op.rest)
    if m is None:
        raise PtoExecError(f"{op.name} without {{split = N}}", op.line)
    if int(m.group(1)) not in (0, 1, 2):
        raise PtoExecError(f"{op.name} with split = {m.group(1)}: the split is 0, 1 or 2", op.line)
    return int(m.group(1))


def _part(t: Tile, split: int, lane: int) -> Tile:
    """Lane `lane`'s part of a pushed tile: its half along the split axis (1 rows, 2 columns), else a copy."""
    if split == 0:
        return Tile(t.name, t.loc, t.dtype, t.rows, t.cols, t.vr, t.vc, t.pad, np.array(t.arr, copy=True))
    if split == 1:
        h = t.rows // 2
        return Tile(t.name, t.loc, t.dtype, h, t.cols, max(0, min(h, t.vr - lane * h)), t.vc, t.pad,
                    np.array(t.arr[lane * h:(lane + 1) * h], copy=True))
    h = t.cols // 2
    return Tile(t.name, t.loc, t.dtype, t.rows, h, t.vr, max(0, min(h, t.vc - lane * h)), t.pad,
                np.array(t.arr[:, lane * h:(lane + 1) * h], copy=True))


def _join(parts: list, split: int) -> Tile:
    """The tile a cube pop receives from both lanes: the halves side by side, or lane 0's for split 0."""
    a, b = parts[0], parts[1]
    if split == 0:
        return a
    if split == 1:
        vr = a.vr + (b.vr if a.vr == a.rows else 0)
        return Tile(a.name, a.loc, a.dtype, a.rows * 2, a.cols, vr, a.vc, a.pad, np.concatenate([a.arr, b.arr]))
    vc = a.vc + (b.vc if a.vc == a.cols else 0)
    return Tile(a.name, a.loc, a.dtype, a.rows, a.cols * 2, a.vr, vc, a.pad,
                np.concatenate([a.arr, b.arr], axis=1))


class CrossCoreOps:
    """pto.reserve_buffer, pto.import_reserved_buffer, pto.aic/aiv_initialize_pipe, tpush, tpop, tfree."""

    def pipe_buffer(self, op: Op) -> None:
        if op.results:
            self.env[op.results[0]] = 0

    def init_pipe(self, op: Op) -> None:
        run = _run(op)
        m = re.search(r"slot_num\s*=\s*(\d+)", op.rest)
        run[0].init(int(m.group(1)) if m else None)

    def tpush(self, op: Op) -> None:
        m = re.fullmatch(r"\s*\(\s*(%\S+?)\s*:\s*(!pto\.tile_buf<.*>)\s*\)\s*\{.*\}\s*", op.rest)
        if not m:
            raise PtoExecError(f"malformed {op.name}", op.line)
        split = _split(op)
        t = self.tile(m.group(1), op.line)
        copy = Tile(t.name, t.loc, t.dtype, t.rows, t.cols, t.vr, t.vc, t.pad, np.array(t.arr, copy=True))
        run = _run(op)
        _call(op, lambda: run[0].push(run[1], _IR[op.name], copy, part=lambda v, i: _part(v, split, i)))

    def tpop(self, op: Op) -> None:
        m = re.fullmatch(r"\s*(?:\(\s*(%\S+?)\s*,\s*(%\S+?)\s*\)\s*)?\{.*\}\s*->\s*(!pto\.tile_buf<.*>)\s*",
                         op.rest)
        if not m or len(op.results) != 1:
            raise PtoExecError(f"malformed {op.name}", op.line)
        split = _split(op)
        ty = parse_tile_type(m.group(3), op.line)
        if (m.group(1) is not None) != (ty["v_row"] == "?" and ty["v_col"] == "?"):
            raise PtoExecError(f"{op.name}: valid row / column operands go with v_row=?, v_col=? and only then",
                               op.line)
        dt = _np_type(ty["dtype"], op.line)
        rows, cols = int(ty["rows"]), int(ty["cols"])
        run = _run(op)
        got = _call(op, lambda: run[0].pop(run[1], _IR[op.name], join=lambda ps: _join(ps, split)))
        if (got.rows, got.cols) != (rows, cols) or got.dtype != dt:
            raise PtoExecError(f"{op.name}: the slot holds a {got.rows} x {got.cols} {got.dtype} tile, the pop "
                               f"reads a {rows} x {cols} {dt} one", op.line)
        if m.group(1) is not None:  # the pop's own valid extents (a lane-1 replay's empty pop: zeros)
            vr, vc = self.int_of(m.group(1), op.line), self.int_of(m.group(2), op.line)
            self._check_valid(vr, vc, rows, cols, op.line)
        else:
            vr = got.vr if ty["v_row"] == "?" else int(ty["v_row"])
            vc = got.vc if ty["v_col"] == "?" else int(ty["v_col"])
        self.env[op.results[0]] = Tile(op.results[0], ty["loc"], dt, rows, cols, vr, vc, int(ty["pad"]), got.arr)

    def tfree(self, op: Op) -> None:
        _split(op)
        run = _run(op)
        _call(op, lambda: run[0].free(run[1], _IR[op.name]))


HANDLERS = {"pto.reserve_buffer": "pipe_buffer", "pto.import_reserved_buffer": "pipe_buffer",
            "pto.aic_initialize_pipe": "init_pipe", "pto.aiv_initialize_pipe": "init_pipe",
            "pto.tpush_to_aiv": "tpush", "pto.tpush_to_aic": "tpush",
            "pto.tpop_from_aic": "tpop", "pto.tpop_from_aiv": "tpop",
            "pto.tfree_from_aic": "tfree", "pto.tfree_from_aiv": "tfree"}
