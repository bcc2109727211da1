"""Malformed IR text: every mistake is one diagnostic with a stable code at the exact place.

Each case is a small program; the test asserts the code, line and column of the first diagnostic (and
how many there are where one mistake could plausibly produce echoes). Line and column numbers are
written out by hand from the program text, never taken from ptoc.

Most cases share one program (`prog`): a helper `g` and a function `f` whose body starts at line 9,
column 9, with a scalar `x`, a tensor `t` and a Vec tile `v` in scope.
"""

from __future__ import annotations

import textwrap

import pytest

from ptoc.context import CompileContext
from ptoc.diagnostics import CompileError, Diagnostic
from ptoc.driver import check_source
from ptoc.frontend.parser import parse_program
from ptoc.ir.nodes import IfStmt, Var

HEADER = """\
import pypto.language as pl
@pl.program
class p:
    @pl.function
    def g(self, a: pl.Scalar[pl.INDEX]) -> pl.Scalar[pl.INDEX]:
        return a
    @pl.function
    def f(self, x: pl.Scalar[pl.INDEX], t: pl.Tensor[[64, 128], pl.FP32], v: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec]) -> pl.Scalar[pl.INDEX]:
"""
BODY = 9  # line of the first body statement of `f`; body statements start at column 9


def prog(*body: str) -> str:
    """The shared program with `body` (lines relative to the body's indentation) as f's body."""
    return HEADER + "".join(f"        {line}\n" if line else "\n" for line in body)


def errors(src: str) -> list[Diagnostic]:
    """What `ptoc check` reports: the program as written, then its single-assignment form."""
    try:
        check_source(src, "t.ir", CompileContext())
    except CompileError as e:
        assert e.diagnostics, "CompileError without diagnostics"
        return e.diagnostics
    pytest.fail("the program was accepted; expected a diagnostic")


def first(src: str) -> tuple[str, int, int]:
    d = errors(src)[0]
    assert d.span is not None and d.span.file == "t.ir"
    return d.code, d.span.line, d.span.col


def test_shared_program_is_valid():
    # Every case below breaks exactly one thing of this program.
    p = parse_program(prog("y = x + 1", "return y"), "t.ir")
    assert [f.name for f in p.functions] == ["g", "f"] and len(p.functions[1].body) == 2
    assert str(p.functions[1].body[0].span) == f"t.ir:{BODY}:9"


# (behaviour, source, code, line, column, number of diagnostics or None when not asserted)
CASES = [
    # ---- syntax: tokens, brackets, indentation, characters, end of file
    ("missing_comma_between_arguments", prog("y = self.g(x x)", "return y"),
     "PTOC-E0001", BODY, 22, 1),
    ("dangling_operator_at_end_of_line", prog("y = x +", "return y"),
     "PTOC-E0001", BODY, 16, 1),
    ("unclosed_paren_reported_where_it_opens", prog("y = self.g(x", "return y"),
     "PTOC-E0001", BODY, 19, 1),
    ("unclosed_bracket_at_end_of_file", prog("y = pl.tensor.create([64, 128", ),
     "PTOC-E0001", BODY, 30, 1),
    ("unmatched_closing_paren", prog("y = self.g(x))", "return y"),
     "PTOC-E0001", BODY, 22, 1),
    ("closing_bracket_of_the_wrong_kind", prog("y = self.g(x]", "return y"),
     "PTOC-E0001", BODY, 21, 1),
    ("dedent_to_no_enclosing_level", prog("y = x + 1") + "      return y\n",
     "PTOC-E0003", BODY + 1, 1, 1),
    ("unexpected_indentation", prog("y = x + 1", "    return y"),
     "PTOC-E0003", BODY + 1, 1, 1),
    ("tab_in_indentation", prog("y = x + 1") + "\treturn y\n",
     "PTOC-E0003", BODY + 1, 1, 1),
    ("tab_after_spaces_in_indentation", prog("y = x + 1") + "    \treturn y\n",
     "PTOC-E0003", BODY + 1, 5, 1),
    ("stray_dollar_character", prog("y = x + 1 $", "return y"),
     "PTOC-E0002", BODY, 19, 1),
    ("semicolon_between_statements", prog("y = x + 1; z = y", "return y"),
     "PTOC-E0002", BODY, 18, 1),
    ("unterminated_string", prog('y = self.g(x, attrs={"k: 1})', "return y"),
     "PTOC-E0002", BODY, 30, 1),
    ("function_header_without_body_at_end_of_file", HEADER,
     "PTOC-E0003", 8, 142, 1),
    ("loop_header_without_body", prog("for i in pl.range(4):  # the body is missing", "return x"),
     "PTOC-E0003", BODY + 1, 9, 1),
    ("def_header_cut_off_at_end_of_file", "import pypto.language as pl\n@pl.function\ndef f(x: pl.Scalar[pl.INDEX]",
     "PTOC-E0001", 3, 6, 1),
    ("chained_assignment", prog("a = b = x", "return a"),
     "PTOC-E0001", BODY, 15, 1),
    # ---- Python constructs that are not IR
    # slicing is PyPTO's sugar for pl.slice; a window must name every axis of the [64, 128] tensor
    ("slice_subscript_missing_an_axis", prog("w = t[0:4]", "return x"),
     "PTOC-E0202", BODY, 13, 1),
    ("slice_subscript_dropping_an_axis", prog("w = t[0:4, 2]", "return x"),
     "PTOC-E0142", BODY, 20, 1),
    ("docstring", prog('"""A docstring."""', "return x"),
     "PTOC-E0005", BODY, 9, 1),
    # (g returns one scalar: the unpacking's first element is not there; one error, not one per name)
    ("tuple_unpacking_of_a_single_value", prog("a, b = self.g(x)", "return a"),
     "PTOC-E0114", BODY, 9, 1),
    ("tuple_unpacking_into_a_subscript", prog("a, x[0] = self.g(x)", "return a"),
     "PTOC-E0005", BODY, 12, 1),
    ("nested_def", prog("def h(self):", "    pass", "return x"),
     "PTOC-E0005", BODY, 13, 1),
    ("attribute_assignment", prog("x.shape = 4", "return x"),
     "PTOC-E0005", BODY, 9, 1),
    ("bare_name_statement", prog("x", "return x"),
     "PTOC-E0005", BODY, 9, 1),
    ("module_level_constant", "import pypto.language as pl\nK = 4\n" + HEADER.split("\n", 1)[1] + "        return x\n",
     "PTOC-E0005", 2, 1, 1),
    ("import_of_another_module", "import numpy as np\n" + HEADER + "        return x\n",
     "PTOC-E0005", 1, 1, 1),
    # ---- names and single assignment
    ("undefined_name", prog("y = x + qq", "return y"),
     "PTOC-E0101", BODY, 17, 1),
    ("break_outside_a_loop", prog("if x > 0:", "    break", "return x"),
     "PTOC-E0111", BODY + 1, 13, 1),
    ("continue_outside_a_loop", prog("continue", "return x"),
     "PTOC-E0111", BODY, 9, 1),
    ("break_in_a_parallel_loop", prog("for i in pl.parallel(4):", "    if i > 2:", "        break", "return x"),
     "PTOC-E0291", BODY, 9, 1),
    ("loop_variable_used_after_the_loop", prog("for i in pl.range(4):", "    pass", "return i"),
     "PTOC-E0101", BODY + 2, 16, 1),
    # ---- yields
    ("yield_not_last_in_loop_body",
     prog("for i, (a,) in pl.range(4, init_values=(x,)):", "    b = pl.yield_(a)", "    c = a + 1", "return b"),
     "PTOC-E0111", BODY + 1, 13, 1),
    ("yield_outside_any_loop", prog("b = pl.yield_(x)", "return b"),
     "PTOC-E0111", BODY, 9, 1),
    ("yield_count_differs_from_iter_args",
     prog("for i, (a,) in pl.range(4, init_values=(x,)):", "    b, c = pl.yield_(a, a)", "return b"),
     "PTOC-E0103", BODY + 1, 13, 1),
    ("loop_with_iter_args_but_no_yield",
     prog("for i, (a,) in pl.range(4, init_values=(x,)):", "    b = a + 1", "return x"),
     "PTOC-E0103", BODY + 1, 13, 1),
    ("if_yields_without_else", prog("if x > 1:", "    b = pl.yield_(x)", "return b"),
     "PTOC-E0103", BODY, 9, 1),
    ("branches_yield_different_names",
     prog("if x > 1:", "    b = pl.yield_(x)", "else:", "    c = pl.yield_(x)", "return b"),
     "PTOC-E0103", BODY, 9, 1),
    ("elif_and_else_yield_different_names",
     prog("if x > 1:", "    b = pl.yield_(x)", "elif x > 2:", "    b = pl.yield_(x)", "else:",
          "    c = pl.yield_(x)", "return b"),
     "PTOC-E0103", BODY + 2, 9, 1),
    ("only_the_else_branch_yields",
     prog("if x > 1:", "    pass", "else:", "    b = pl.yield_(x)", "return b"),
     "PTOC-E0103", BODY, 9, 1),
    # ---- iter_args and init_values
    ("more_iter_args_than_init_values",
     prog("for i, (a, b) in pl.range(4, init_values=(x,)):", "    c, d = pl.yield_(a, b)", "return c"),
     "PTOC-E0104", BODY, 26, 1),
    ("more_init_values_than_iter_args",
     prog("for i, (a,) in pl.range(4, init_values=(x, x)):", "    c = pl.yield_(a)", "return c"),
     "PTOC-E0104", BODY, 24, 1),
    ("iter_args_without_init_values",
     prog("for i, (a,) in pl.range(4):", "    c = pl.yield_(a)", "return c"),
     "PTOC-E0104", BODY, 24, 1),
    ("init_values_without_iter_args", prog("for i in pl.range(4, init_values=(x,)):", "    pass", "return x"),
     "PTOC-E0104", BODY, 18, 1),
    # ---- annotations that contradict the value
    ("annotation_dtype_contradicts_value", prog("y: pl.Tensor[[64, 128], pl.FP16] = t", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    ("annotation_rank_contradicts_value", prog("y: pl.Tensor[[64, 128, 1], pl.FP32] = t", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    ("annotation_dim_contradicts_value", prog("y: pl.Tensor[[64, 64], pl.FP32] = t", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    ("annotation_tile_for_a_tensor_value", prog("y: pl.Tile[[64, 128], pl.FP32] = t", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    ("annotation_memory_space_contradicts_value", prog("w: pl.Tile[[32, 128], pl.FP32, pl.Mem.Mat] = v", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    ("annotation_scalar_dtype_contradicts_value", prog("y: pl.Scalar[pl.FP32] = x", "return x"),
     "PTOC-E0105", BODY, 12, 1),
    # ---- calls of program functions
    ("call_of_unknown_function", prog("y = self.foo(x)", "return y"),
     "PTOC-E0106", BODY, 13, 1),
    ("too_many_arguments_to_a_program_function", prog("y = self.g(x, x)", "return y"),
     "PTOC-E0113", BODY, 13, 1),
    ("too_few_arguments_to_a_program_function", prog("y = self.g()", "return y"),
     "PTOC-E0113", BODY, 13, 1),
    ("unknown_keyword_of_a_program_function", prog("y = self.g(b=x)", "return y"),
     "PTOC-E0113", BODY, 13, 1),
    ("return_count_differs_from_signature", prog("return x, x"),
     "PTOC-E0113", BODY, 9, 1),
    # ---- types, dtypes and enums
    ("unknown_dtype", prog("y: pl.Scalar[pl.FP33] = x", "return x"),
     "PTOC-E0107", BODY, 22, 1),
    ("removed_fp4_dtype", prog("y: pl.Tensor[[64], pl.FP4] = t", "return x"),
     "PTOC-E0108", BODY, 28, 1),
    ("unknown_enum_member", prog("w: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vex] = v", "return x"),
     "PTOC-E0110", BODY, 40, 1),
    ("tensor_type_without_dtype", prog("y: pl.Tensor[[64, 128]] = t", "return x"),
     "PTOC-E0109", BODY, 12, 1),
    ("unknown_tileview_field",
     prog("w: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vec, pl.TileView(valid_shap=[32, 128])] = v", "return x"),
     "PTOC-E0109", BODY, 64, 1),
    ("unknown_type_constructor", prog("y: pl.Tensr[[64, 128], pl.FP32] = t", "return x"),
     "PTOC-E0109", BODY, 12, 1),
    ("unknown_function_type",
     HEADER.replace("    @pl.function\n    def f", "    @pl.function(type=pl.FunctionType.Incore)\n    def f")
     + "        return x\n",
     "PTOC-E0110", 7, 23, 1),
    # ---- decorators, duplicates, while loops
    ("misspelled_function_decorator", HEADER.replace("    @pl.function\n    def f", "    @pl.func\n    def f")
     + "        return x\n",
     "PTOC-E0115", 7, 6, 1),
    ("class_without_program_decorator", HEADER.replace("@pl.program\n", "") + "        return x\n",
     "PTOC-E0115", 2, 1, 1),
    ("function_defined_twice", HEADER.replace("def f", "def g") + "        return x\n",
     "PTOC-E0112", 8, 9, 1),
    ("parameter_declared_twice", HEADER.replace("t: pl.Tensor", "x: pl.Tensor") + "        return x\n",
     "PTOC-E0112", 8, 41, 1),
    ("while_loop_without_cond_first",
     prog("for (a,) in pl.while_(init_values=(x,)):", "    b = a + 1", "    c = pl.yield_(b)", "return c"),
     "PTOC-E0111", BODY + 1, 13, 1),
    ("while_loop_with_empty_body", prog("for (a,) in pl.while_(init_values=(x,)):", "    pl.cond(a < 4)", "return x"),
     "PTOC-E0103", BODY, 9, 1),
    ("file_without_program", "import pypto.language as pl\n# nothing here\n",
     "PTOC-E0100", 1, 1, 1),
    # ---- expressions
    ("chained_comparison", prog("y = 1 < x < 3", "return x"),
     "PTOC-E0114", BODY, 13, 1),
    ("subscript_of_a_scalar", prog("y = x[0]", "return x"),
     "PTOC-E0114", BODY, 13, 1),
    ("loop_over_a_list", prog("for i in [1, 2]:", "    pass", "return x"),
     "PTOC-E0005", BODY, 18, 1),
]


@pytest.mark.parametrize("src,code,line,col,count", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_malformed_input_reports_code_line_and_column(src, code, line, col, count):
    diags = errors(src)
    d = diags[0]
    assert (d.code, d.span.line, d.span.col) == (code, line, col), [
        (x.code, x.span.line, x.span.col, x.message) for x in diags]
    if count is not None:
        assert len(diags) == count, [(x.code, x.span.line, x.span.col, x.message) for x in diags]
    assert d.message and d.severity == "error"


def test_at_least_36_malformed_cases():
    assert len(CASES) >= 36
    assert len({c[0] for c in CASES}) == len(CASES)


# ------------------------------------------------------------------ messages and hints


def test_undefined_name_suggests_the_closest_visible_name():
    d = errors(prog("acc = x + 1", "y = acc + ac0", "return y"))[0]
    assert (d.code, d.span.line, d.span.col, d.span.end_col) == ("PTOC-E0101", BODY + 1, 19, 22)
    assert "ac0" in d.message
    assert d.hint == "did you mean 'acc'?"


def test_undefined_name_suggests_a_name_the_loop_body_leaves_visible():
    # as written, a name the loop body assigns is visible after the loop (ConvertToSSA carries it out)
    d = errors(prog("for i in pl.range(4):", "    total = x + i", "y = totl + 1", "return y"))[0]
    assert d.code == "PTOC-E0101" and "'totl'" in d.message
    assert "total" in (d.hint or "")


def test_name_used_after_its_loop_in_ssa_form_says_where_it_lives():
    # single assignment required (a dump after ConvertToSSA): a value leaves a loop only through its yield
    with pytest.raises(CompileError) as e:
        parse_program(prog("for i in pl.range(4):", "    s = x + i", "return s"), "t.ir", ssa=True)
    d = e.value.diagnostics[0]
    assert f"the body of the loop at line {BODY}" in d.message
    assert "pl.yield_" in d.hint


def test_assigned_twice_is_accepted_as_written_and_rejected_where_ssa_is_required():
    src = prog("y = x + 1", "y = y + 2", "return y")
    checked = check_source(src, "t.ir", CompileContext())  # ConvertToSSA gives the second value a name
    assert [s.target.name for s in checked.function("f").body[:2]] == ["y", "y_1"]
    with pytest.raises(CompileError) as e:
        parse_program(src, "t.ir", ssa=True)
    d = e.value.diagnostics[0]
    assert (d.code, d.span.line, d.span.col) == ("PTOC-E0102", BODY + 1, 9)
    assert f"first at line {BODY}" in d.message
    assert "y_1" in d.hint


def test_break_in_a_loop_that_runs_every_iteration_says_which_loop_to_use():
    d = errors(prog("for i in pl.unroll(4):", "    if i > 2:", "        break", "return x"))[0]
    assert d.message == "`break` in a pl.unroll loop is not supported: it runs every iteration"
    assert "pl.range" in d.hint


def test_fp4_is_rejected_with_the_packed_names_and_rule_fp4_1():
    d = errors(prog("y: pl.Tensor[[64], pl.FP4] = t", "return x"))[0]
    assert d.code == "PTOC-E0108"
    assert d.rule == "FP4-1"
    assert "pl.FP4E2M1X2" in d.hint
    assert (d.span.col, d.span.end_col) == (28, 34)  # exactly `pl.FP4`


def test_unknown_dtype_suggests_the_closest_dtype():
    d = errors(prog("y: pl.Scalar[pl.FP33] = x", "return x"))[0]
    assert d.hint == "did you mean pl.FP32?"


def test_unknown_enum_member_suggests_the_closest_member():
    d = errors(prog("w: pl.Tile[[32, 128], pl.FP32, pl.Mem.Vex] = v", "return x"))[0]
    assert "Vex" in d.message
    assert d.hint == "did you mean pl.Mem.Vec?"


def test_unknown_function_suggests_a_close_program_function():
    d = errors(prog("y = self.gg(x)", "return y"))[0]
    assert d.code == "PTOC-E0106"
    assert d.hint == "did you mean self.g?"


def test_wrong_argument_count_shows_the_signature():
    d = errors(prog("y = self.g(x, x)", "return y"))[0]
    assert "takes 1 argument(s), the call passes 2" in d.message
    assert d.hint == "the function is g(a)"


def test_missing_comma_hint():
    d = errors(prog("y = self.g(x x)", "return y"))[0]
    assert d.hint == "is a ',' missing before it?"
    assert "')'" in d.message and "','" in d.message
    assert "']'" not in d.message  # only the closer of the bracket that is open


def test_unclosed_bracket_message_names_the_bracket():
    d = errors(prog("y = self.g(x", "return y"))[0]
    assert d.message == "'(' was never closed"
    assert d.hint == "add the matching ')'"


def test_mismatched_closer_names_the_open_bracket():
    d = errors(prog("y = self.g(x]", "return y"))[0]
    assert d.message == f"closing ']' does not match '(' opened at line {BODY}, column 19"


def test_missing_block_names_the_header_line():
    d = errors(prog("if x > 1:", "", "# nothing indented", "return x"))[0]
    assert (d.code, d.span.line, d.span.col) == ("PTOC-E0003", BODY + 3, 9)
    assert d.message == f"expected an indented block after line {BODY}"
    assert "pass" in d.hint


def test_tab_indentation_hint_says_use_spaces():
    d = errors(prog("y = x + 1") + "\treturn y\n")[0]
    assert "tab" in d.message and "spaces" in d.hint


def test_annotation_contradiction_is_reported_once():
    # the later return of `y` does not repeat the contradiction
    diags = errors(prog("y: pl.Scalar[pl.FP32] = x", "return y"))
    assert [d.code for d in diags] == ["PTOC-E0105"]
    assert "FP32" in diags[0].message and "INDEX" in diags[0].message
    assert diags[0].hint == "the value's type is pl.Scalar[pl.INDEX]"


def test_misplaced_yield_does_not_make_its_names_undefined_too():
    diags = errors(prog("b = pl.yield_(x)", "c = b + 1", "return c"))
    assert [d.code for d in diags] == ["PTOC-E0111"]


def test_while_without_cond_hint():
    d = errors(prog("for (a,) in pl.while_(init_values=(x,)):", "    b = a + 1", "    c = pl.yield_(b)",
                    "return c"))[0]
    assert "pl.cond" in d.message and "pl.cond" in d.hint


def test_slice_hints_say_how_to_write_the_window():
    d = errors(prog("w = t[0:4]", "return x"))[0]
    assert "one extent and one offset per axis" in d.hint
    d = errors(prog("w = t[0:4, 2]", "return x"))[0]
    assert "i:i+1" in d.hint


# ------------------------------------------------------------------ several errors in one file


def test_several_errors_are_all_reported_in_order():
    src = prog(
        "y = x + qq",                 # BODY:     undefined name
        "z = x + 1",
        "z = x + 2",                  # BODY + 2: assigned again (valid)
        "w = self.nope(x)",           # BODY + 3: unknown function
        "u: pl.Scalar[pl.FP16] = x",  # BODY + 4: annotation contradicts the value
        "return x",
    )
    got = [(d.code, d.span.line, d.span.col) for d in errors(src)]
    assert got == [
        ("PTOC-E0101", BODY, 17),
        ("PTOC-E0106", BODY + 3, 13),  # (z assigned twice is valid: ConvertToSSA renames)
        ("PTOC-E0105", BODY + 4, 12),
    ]


def test_several_construct_errors_are_all_reported_in_order():
    src = prog("w = t[0:4, 2]", '"""doc"""', "y: pl.Scalar[pl.FP4] = x", "return x")
    got = [(d.code, d.span.line, d.span.col) for d in errors(src)]
    assert got == [("PTOC-E0142", BODY, 20), ("PTOC-E0005", BODY + 1, 9), ("PTOC-E0108", BODY + 2, 22)]


def test_several_syntax_errors_are_all_reported_in_order():
    src = prog("y = x + 1 $", "z = y + 1", "w = z ? 1", "return w")
    got = [(d.code, d.span.line, d.span.col) for d in errors(src)]
    assert got == [("PTOC-E0002", BODY, 19), ("PTOC-E0002", BODY + 2, 15)]


def test_errors_in_two_functions_are_both_reported():
    src = HEADER.replace("        return a\n", "        return aa\n") + "        return xx\n"
    got = [(d.code, d.span.line, d.span.col) for d in errors(src)]
    assert got == [("PTOC-E0101", 6, 16), ("PTOC-E0101", BODY, 16)]


# ------------------------------------------------------------------ things that are NOT errors


def test_undefined_name_inside_a_type_is_a_dynamic_dimension():
    p = parse_program(prog("y: pl.Tensor[[ROWS, 128], pl.FP32] = t", "return x"), "t.ir")
    assert p.functions[1].body[0].annotation.shape[0] == Var("ROWS")  # kept as a symbolic dimension


def test_undefined_name_in_a_parameter_type_is_a_dynamic_dimension():
    src = HEADER.replace("pl.Tensor[[64, 128], pl.FP32]", "pl.Tensor[[BATCH, 128], pl.FP32]") + "        return x\n"
    assert parse_program(src, "t.ir").functions[1].params[1].type.shape[0] == Var("BATCH")


def test_attrs_on_a_program_call_is_not_an_argument():
    p = parse_program(prog('y = self.g(x, attrs={"arg_directions": [pl.adir.scalar]})', "return y"), "t.ir")
    call = p.functions[1].body[0].value
    assert call.args == (Var("x"),) and [k for k, _ in call.kwargs] == ["attrs"]


def test_elif_chain_that_yields_the_same_names_is_valid():
    p = parse_program(prog("if x > 1:", "    b = pl.yield_(x)", "elif x > 2:", "    b = pl.yield_(x + 1)", "else:",
                           "    b = pl.yield_(x + 2)", "return b"), "t.ir")
    outer = p.functions[1].body[0]  # elif is else: + a nested if that yields, re-yielded by the else
    assert isinstance(outer, IfStmt) and outer.results == (Var("b"),)
    assert [type(s).__name__ for s in outer.else_body] == ["IfStmt", "YieldStmt"]


def test_crlf_and_lone_cr_line_ends_parse():
    src = prog("y = x + 1", "return y")
    lf = parse_program(src, "t.ir")
    for ends in ("\r\n", "\r"):
        p = parse_program(src.replace("\n", ends), "t.ir")
        assert p == lf and str(p.functions[1].body[1].span) == f"t.ir:{BODY + 1}:9"


def test_byte_order_mark_is_not_a_character_of_the_program():
    p = parse_program("\ufeff" + prog("y = x + 1", "return y"), "t.ir")
    plain = parse_program(prog("y = x + 1", "return y"), "t.ir")
    assert p == plain and p.functions[0].span == plain.functions[0].span  # spans unshifted by the mark
    assert str(p.functions[1].body[0].span) == f"t.ir:{BODY}:9"


def test_lone_cr_line_ends_keep_line_numbers():
    assert first(prog("y = x + qq", "return y").replace("\n", "\r")) == ("PTOC-E0101", BODY, 17)


# ------------------------------------------------------------------ literals and limits never crash


@pytest.mark.parametrize("body,code,col", [
    ("y = x + " + "9" * 5000, "PTOC-E0001", 17),
    ("y = 1e999", "PTOC-E0001", 13),
    ("y = self.g(x, attrs={'k': '\\N'})", "PTOC-E0001", 35),
    ('y = self.g(x, attrs={"k": "\\x4"})', "PTOC-E0001", 35),
], ids=["integer_with_5000_digits", "float_overflowing_to_inf", "bad_named_escape", "truncated_hex_escape"])
def test_unrepresentable_literal_is_a_diagnostic(body, code, col):
    assert first(prog(body, "return x")) == (code, BODY, col)


@pytest.mark.parametrize("expr", ["(" * 3000 + "x" + ")" * 3000, "-" * 5000 + "x", "x" + " + x" * 5000],
                         ids=["parentheses", "unary_minus", "left_assoc_sum"])
def test_absurdly_deep_expression_is_a_diagnostic_not_a_crash(expr):
    code, line, col = first(prog("y = " + expr, "return y"))
    assert (code, line) == ("PTOC-E0114", BODY)


def test_dedented_source_matches_shared_program():
    # the cases are written against HEADER; guard the body line number they all rely on
    assert HEADER.count("\n") == BODY - 1
    assert textwrap.dedent(HEADER) == HEADER
