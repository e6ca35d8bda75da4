"""Upcasts, told: where the code turned narrow floats wide, why, and what it costs on the run's
backend and on the TPU target (a ``decisions.upcast.PrecisionReport``), and the float32 arrays a
compiler made on its own; and the upcasts of a check's row on the run's page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import defaults
from ..decisions.upcast import COMPILERS_OWN
from ..units import format_size
from .markup import Block, dict_of, table_block
from .words import plural

if TYPE_CHECKING:
    from ..decisions.upcast import Cost, PrecisionReport, Upcast

HEAD = "  upcasts in the programs this test ran (narrow floats the code turned wide, and what that costs):"


def what(u: Upcast) -> str:
    """``src/norm.py:19: float32 constant EPS_F32 (src/norm.py:9) promoted the add of bf16 to f32, and with it
    the div (f32[8,128])``"""
    w = u.root
    where = f"{w.line}" if w.line else "a line jax did not record"
    if u.times > 1:
        where += f" ({u.times} times)"
    if w.how == "promotion":
        text = f"{where}: {w.cause or 'a wider operand'} promoted the {w.op} of {w.narrow} to {w.wide}"
    elif w.how == "astype":
        text = f"{where}: {w.op} casts {w.narrow} to {w.shape}"
    elif w.how == "preferred":
        text = f"{where}: {w.op} of {w.narrow} asks for {w.wide} results, {w.shape} (preferred_element_type)"
    else:
        text = f"{where}: {w.op} of {w.narrow} returns {w.shape}" + (
            "" if w.kept else " (converted back: its accumulator)"
        )
    promoted = [m for m in u.also if m.how == "promotion"]
    if promoted:
        said = ", ".join(
            f"the {m.op} at {m.line} ({m.shape})" if m.line != w.line else f"the {m.op} ({m.shape})"
            for m in promoted[:3]
        )
        more = f" and {plural(len(promoted) - 3, 'more')}" if len(promoted) > 3 else ""
        text += f", and with it {said}{more}"
    return text


def cost_text(c: Cost, narrow: str) -> str:
    if not c.wide:
        return f"no wider array on {c.where} (its compiler fused the conversion away)"
    return f"{format_size(c.wide)} of {c.wide_type} arrays on {c.where}, {format_size(c.beyond)} more than in {narrow}"


def upcast_line(u: Upcast) -> str:
    costs = "; ".join(cost_text(c, u.root.narrow) for c in u.costs)
    return f"{what(u)}: {costs}" if costs else what(u)


def compilers_own_line(report: PrecisionReport, temps: int) -> str:
    """Where the run's compiler made float32 temporaries for operations the program keeps narrow:
    up to how much of the figure on ``report.run`` they are (no more than ``temps``, the most
    temporary memory a program of the test needs: XLA may reuse one temporary's memory for
    another), and what that means (on the CPU backend, a figure over the chip's); "" where that is
    under defaults.UPCAST_MIN."""
    where = report.run
    own = [b for b in report.of_kind(where, COMPILERS_OWN) if b.kind == "temporary"]
    total = min(sum(b.size for b in own), temps)
    if total < defaults.UPCAST_MIN:
        return ""
    largest = own[0]
    at = f"{largest.op} at {largest.source}" if largest.op else f"{largest.instruction}, a conversion XLA inserted"
    line = (
        f"  up to {format_size(total)} of the figure on {where} is float32 temporaries its compiler made for "
        f"operations the program keeps narrow (the largest {largest.shape} from {at})"
    )
    if where == "cpu":
        line += (
            ": XLA's CPU backend computes bf16 and f16 through float32 temporaries that a TPU or GPU does not make, "
            "so this CPU figure overstates the chip's; judge the chip's own figure with max_hbm(..., target=\"v5e\") "
            "or --tpumem-target"
        )
    return line


def upcast_record(u: Upcast) -> dict[str, Any]:
    w = u.root
    return {
        "line": w.line or None,
        "how": w.how,
        "op": w.op,
        "shape": w.shape,
        "narrow": w.narrow,
        "wide": w.wide,
        "cause": w.cause or None,
        "promoted": [{"line": m.line or None, "op": m.op, "shape": m.shape} for m in u.also if m.how == "promotion"],
        "times": u.times,
        "costs": {c.where: {"bytes": c.wide, "beyond_narrow": c.beyond} for c in u.costs},
        "text": upcast_line(u),
    }


def upcasts_html(records: list[Any]) -> list[Block]:
    """A budget's or a target's upcasts on the run's page: the line, the wide value, and what it is and costs."""
    return table_block(
        ("line", "wide value", "what it is, what it costs"),
        [(r.get("line") or "", r.get("shape", ""), r.get("text", "")) for r in map(dict_of, records)],
        title="upcasts (narrow floats the code turned wide)",
    )
