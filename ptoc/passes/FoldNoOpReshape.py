"""FoldNoOpReshape: a tile reshape that changes nothing becomes a plain alias of its source.

In a kernel, `b = pl.tile.reshape(a, shape)` whose result has exactly the type of `a` (shape, dtype,
memory space, tile view) and lives in the same buffer (both at the same MemRef base and offset, or
neither placed yet) becomes `b = a`: no `pto.treshape` is emitted for it, the later stages see one
buffer under two names. Any other reshape stays.

Where ptoc differs from PyPTO: PyPTO folds only after memory planning, when both sides carry MemRefs with
one root. ptoc also folds a reshape whose sides carry no MemRef yet, since equal types without placement
describe the same value; placed and unplaced sides never fold together.
"""

from __future__ import annotations

from dataclasses import replace

from ptoc.ir.nodes import AssignStmt, Call, Program, TileType, Var
from ptoc.ir.visitor import Mutator
from ptoc.passes.manager import Pass
from ptoc.ir.nodes import KERNEL_TYPES as KERNELS

RESHAPE_OPS = ("tile.reshape",)


class FoldNoOpReshape(Pass):
    name = "FoldNoOpReshape"
    stage = "memory"
    summary = "a tile reshape to the same type in the same buffer becomes an alias of its source"

    def applies(self, program: Program, ctx) -> bool:
        return any(f.func_type in KERNELS and self.index(f).has_op(*RESHAPE_OPS) for f in program.functions)

    def run(self, program: Program, ctx) -> Program:
        todo = [f for f in program.functions if f.func_type in KERNELS
                and self.index(f).has_op(*RESHAPE_OPS)]
        if not todo:
            return program
        types = self.types(program, ctx)
        new = {}
        for f in todo:
            env = types.get(f.name, {})

            class _Fold(Mutator):
                def mutate_AssignStmt(self, s: AssignStmt, env=env):
                    v = s.value
                    if not (isinstance(v, Call) and v.kind == "op" and v.op in RESHAPE_OPS and len(v.args) == 2
                            and not v.kwargs and isinstance(v.args[0], Var)):
                        return s
                    if _same_buffer(env.get(s.target.name), env.get(v.args[0].name)):
                        return replace(s, value=v.args[0])
                    return s

            body = _Fold().mutate(f.body)
            if body is not f.body:
                new[f.name] = replace(f, body=body)
        if not new:
            return program
        return replace(program, functions=tuple(new.get(f.name, f) for f in program.functions))


def _same_buffer(a, b) -> bool:
    if not (isinstance(a, TileType) and isinstance(b, TileType)):
        return False
    if (a.memref is None) != (b.memref is None):
        return False
    if a.memref is not None and (a.memref.base != b.memref.base or a.memref.offset != b.memref.offset):
        return False
    return replace(a, memref=None) == replace(b, memref=None)
