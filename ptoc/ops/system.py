"""Synchronisation, barriers and cross-core transfer (AIC <-> AIV pipes).

ptoc carries these ops through: each is declared with its positional arity and accepts its
keyword attributes (`split=`, `id=`, `set_pipe=`, `event_id=`, ...) unchecked (`open_kwargs`). They
return nothing, except the pops, whose tile type comes from the statement's annotation (the IR text
always annotates them).

Names follow PyPTO: `system.bar_v/bar_m/bar_all/fence/sync_src/sync_dst/sync_set/sync_wait/set_ffts/
cacheinvalid/syncall`, the pipe set-up `system.aic_initialize_pipe/aiv_initialize_pipe/reserve_buffer/
import_peer_buffer`, the transfers `tile.tpush_to_aiv/tpush_to_aic/tpop_from_aic/tpop_from_aiv` and the
slot releases `system.tfree_to_aic/tfree_to_aiv`, reachable as `pl.tpush_to_aic(...)` etc.
`pl.split(mode)` is the descriptor that `with pl.at(..., optimizations=[pl.split(...)])` carries.
"""

from __future__ import annotations

from ptoc.ir.nodes import Type
from ptoc.ops.registry import Args, register, short_name


def _nothing(doc: str):
    def rule(args: Args) -> Type | None:
        return None

    rule.__doc__ = doc
    return rule


def _takes_tile(doc: str, name: str = "tile"):
    def rule(args: Args) -> Type | None:
        args.tile(name)  # a tile, or unknown
        return None

    rule.__doc__ = doc
    return rule


def _takes_tensor(doc: str, name: str):
    def rule(args: Args) -> Type | None:
        args.tensor(name)
        return None

    rule.__doc__ = doc
    return rule


_SYNC = {
    "system.bar_v": "barrier on the vector pipe",
    "system.bar_m": "barrier on the matrix (cube) pipe",
    "system.bar_all": "barrier on all pipes",
    "system.fence": "memory fence",
    "system.sync_src": "set flag (set_pipe=, wait_pipe=, event_id=)",
    "system.sync_dst": "wait flag (set_pipe=, wait_pipe=, event_id=)",
    "system.syncall": "cross-core all-participant barrier (core_type=, mode=, ...)",
    "system.aic_initialize_pipe": "set up the cube side of a cross-core pipe (dir_mask=, slot_size=, ...)",
    "system.aiv_initialize_pipe": "set up the vector side of a cross-core pipe (dir_mask=, slot_size=, ...)",
    "system.reserve_buffer": "reserve a named cross-core buffer (name=, size=, base=)",
    "system.import_peer_buffer": "import a peer core's reserved buffer (name=, ...)",
    "tile.tpop_from_aic": "pop a tile pushed by the cube core (split=, id=); typed by its annotation",
    "tile.tpop_from_aiv": "pop a tile pushed by a vector core (split=, id=); typed by its annotation",
}
for _name, _doc in _SYNC.items():
    register(_name, (), unit="sync", family="system", open_kwargs=True)(_nothing(_doc))

register("system.sync_set", ("event_id",), unit="sync", family="system", open_kwargs=True)(
    _nothing("raise a cross-core event (pipe=, ffts_mode=, core_type=)"))
register("system.sync_wait", ("event_id",), unit="sync", family="system", open_kwargs=True)(
    _nothing("wait for a cross-core event (pipe=, core_type=)"))
register("system.set_ffts", ("workspace",), unit="sync", family="system", open_kwargs=True)(
    _takes_tensor("declare the A3 FFTS set-up workspace tensor", "workspace"))
register("system.cacheinvalid", (), optional=(("tensor", None), ("shapes", None), ("offsets", None)),
         unit="sync", family="system", open_kwargs=True)(
    _takes_tensor("invalidate the whole GM cache, or the line at a tensor window's base", "tensor"))

for _name, _doc in {
    "tile.tpush_to_aiv": "push a tile from the cube core to the vector cores (split=, id=, lane_stride=)",
    "tile.tpush_to_aic": "push a tile from a vector core to the cube core (split=, id=)",
    "system.tfree_to_aic": "release a popped slot back to the cube producer",
    "system.tfree_to_aiv": "release a popped slot back to the vector producer",
}.items():
    register(_name, ("tile",), unit="sync", family="system", open_kwargs=True)(_takes_tile(_doc))

register("split", ("mode",), unit="any", family="system", open_kwargs=True)(
    _nothing("split-mode descriptor of `with pl.at(..., optimizations=[pl.split(mode)])`"))

for _short in ("tpush_to_aiv", "tpush_to_aic", "tpop_from_aic", "tpop_from_aiv"):
    short_name(_short, tile=f"tile.{_short}")
for _short in ("tfree_to_aic", "tfree_to_aiv"):
    short_name(_short, tile=f"system.{_short}")
for _short in ("aic_initialize_pipe", "aiv_initialize_pipe", "reserve_buffer", "import_peer_buffer"):
    short_name(_short, tile=f"system.{_short}")

__all__: list[str] = []
