"""The latency modules' parameters as their C sources define them, for the twin's insmod.

The twin must accept and refuse exactly what the modules do, and a hand-written copy of the
rules drifts (it once accepted `bufsize` on the RTAI modules, which do not declare it, and
`fifo_size=100`, `irq=0` and `base=0`, which they refuse). So the rules are read from the sources
in target_modules/: each module's `module_param*()` declarations (its parameter names), its
`#define` constants, and the range checks in its `if (...)` conditions, of the forms the modules
use (`x < A || x > B`, `x < A || x >= B`, `!x || x > B`). A bound that depends on the running
kernel (`nr_irqs`, `nr_cpu_ids`, RTAI's `RTAI_NR_IRQS`) stays open: the twin cannot know it.
"""

from __future__ import annotations

import ast
import operator
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# each module: its own source, then the shared files its checks live in (in include order)
MODULE_FILES = {
    "rtai_lpt_latency": ("rtai/rtai_lpt_latency.c", "rtai/rtai_common.h", "include/irqs_params.h",
                         "include/lpt_regs.h", "include/irqs_record.h"),
    "rtai_pcie_latency": ("rtai/rtai_pcie_latency.c", "rtai/rtai_common.h", "include/irqs_params.h",
                          "include/irqs_record.h"),
    "lpt_latency": ("linux/lpt_main.c", "linux/irqs_params.c", "include/irqs_params.h",
                    "include/lpt_regs.h",
                    "include/irqs_record.h"),
    "pcie_latency": ("linux/pcie_main.c", "linux/irqs_params.c", "include/irqs_params.h",
                     "include/irqs_record.h"),
}

_PARAM_TYPED = re.compile(r"\bmodule_param\(\s*(\w+)\s*,\s*(\w+)\s*,")
_PARAM_NAMED = re.compile(r"\bmodule_param_named\(\s*(\w+)\s*,\s*\w+\s*,\s*(\w+)\s*,")
_PARAM_CB = re.compile(r"\bmodule_param_cb\(\s*(\w+)\s*,")
_DEFINE = re.compile(r"^#define\s+([A-Z_][A-Z0-9_]*)\s+(.+?)\s*(?:/\*.*)?$", re.M)
_IF = re.compile(r"\bif\s*\(")
_RANGE = re.compile(
    r"^\s*(?:!(?P<nz>\w+)|(?P<x>\w+)\s*<\s*(?P<lo>[^|]+?))\s*\|\|\s*(?P<y>\w+)\s*(?P<op>>=?)\s*"
    r"(?P<hi>[^|]+?)\s*(?:\|\||$)",
    re.S,
)
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.LShift: operator.lshift,
        ast.RShift: operator.rshift, ast.FloorDiv: operator.floordiv, ast.USub: operator.neg}


@dataclass(frozen=True)
class ParamRule:
    kind: str  # the module_param type: uint, int, ulong, bool, charp, "" for a callback parameter
    low: int | None = None  # accepted range, from the checks; None: open
    high: int | None = None
    power_of_two: bool = False  # the check also asks is_power_of_2()


@dataclass
class ModuleRules:
    params: dict[str, ParamRule] = field(default_factory=dict)

    def check(self, values: dict[str, str]) -> str | None:
        """The module's refusal of these parameters (as dmesg would word it), or None."""
        for key, value in values.items():
            rule = self.params.get(key)
            if rule is None:
                return f"unknown parameter '{key}' ignored"
            if rule.kind == "":  # a module_param_cb counter: its set operation refuses (-EPERM)
                return f"{key} is a read-only counter"
            if rule.kind in ("uint", "int", "ulong", "long", "ushort", "short", "byte"):
                try:
                    v = kernel_int(value)
                except ValueError:
                    return f"{key}={value!r} is not a number"
                if rule.kind.startswith("u") and v < 0:
                    return f"{key}={v} is not an unsigned number"
                if (rule.low is not None and v < rule.low) or (
                    rule.high is not None and v > rule.high
                ):
                    return f"{key}={v} invalid: accepted {_bound(rule.low)}..{_bound(rule.high)}"
                if rule.power_of_two and (v <= 0 or v & (v - 1)):
                    return f"{key}={v} invalid: a power of two"
            elif rule.kind == "bool" and value not in ("0", "1", "Y", "N", "y", "n"):
                return f"{key}={value!r} is not a bool"
        return None


def kernel_int(text: str) -> int:
    """A number as the kernel's kstrto*() with base 0 reads it: 0x… hex, 0… octal, else decimal."""
    t = text.strip()
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if t[:2].lower() == "0x":
        return sign * int(t[2:], 16)
    if len(t) > 1 and t.startswith("0"):
        return sign * int(t[1:], 8)
    return sign * int(t, 10)


def _bound(v: int | None) -> str:
    return "?" if v is None else str(v)


def _strip_comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/|//[^\n]*", " ", text, flags=re.S)


def _evaluate(expr: str, defines: dict[str, str], depth: int = 0) -> int | None:
    """A constant C expression of integers, shifts and arithmetic over the #defines; None when it
    names something else (a kernel variable)."""
    text = re.sub(r"\b(0x[0-9a-fA-F]+|\d+)[uUlL]*\b", r"\1", expr.strip())
    text = re.sub(r"\(\s*(?:unsigned\s+)?(?:int|long|u32|u64)\s*\)", "", text)  # casts
    try:
        tree = ast.parse(text.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in defines and depth < 8:
                return _evaluate(defines[node.id], defines, depth + 1)
            return None
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = walk(node.left), walk(node.right)
            return None if a is None or b is None else _OPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            a = walk(node.operand)
            return None if a is None else _OPS[type(node.op)](a)
        return None

    return walk(tree)


def _conditions(text: str) -> list[str]:
    """Every `if (...)` condition, its parentheses balanced."""
    out = []
    for m in _IF.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end():i - 1])
    return out


def parse_rules(texts: list[str]) -> ModuleRules:
    """The rules of one module from its source (first) and the shared files its checks use."""
    texts = [_strip_comments(t) for t in texts]
    defines: dict[str, str] = {}
    for t in texts:
        for name, value in _DEFINE.findall(t):
            defines.setdefault(name, value)
    own = texts[0]
    kinds: dict[str, str] = {}
    for name, kind in _PARAM_TYPED.findall(own):
        kinds[name] = kind
    for name, kind in _PARAM_NAMED.findall(own):
        kinds[name] = kind
    for name in _PARAM_CB.findall(own):
        kinds.setdefault(name, "")
    ranges: dict[str, tuple[int | None, int | None]] = {}
    pow2: set[str] = set()
    for t in texts:
        for cond in _conditions(t):
            m = _RANGE.match(" ".join(cond.split()))
            if not m or (m["nz"] or m["x"]) != m["y"]:
                continue
            name = m["y"]
            low = 1 if m["nz"] else _evaluate(m["lo"], defines)
            high = _evaluate(m["hi"], defines)
            if high is not None and m["op"] == ">=":
                high -= 1
            ranges.setdefault(name, (low, high))
        pow2.update(re.findall(r"!\s*is_power_of_2\(\s*(\w+)\s*\)", t))
    return ModuleRules({name: ParamRule(kind, *ranges.get(name, (None, None)),
                                        power_of_two=name in pow2)
                        for name, kind in kinds.items()})


def sources() -> Path:
    """The module sources the station ships (installed: its package's copy; else the checkout's)."""
    from station.vm.latency_modules import module_sources

    return module_sources()


@cache
def module_rules(stem: str, root: Path | None = None) -> ModuleRules:
    """The parameter rules of module `stem`, read from the sources under `root` (the shipped
    ones)."""
    root = root or sources()
    return parse_rules([(root / rel).read_text() for rel in MODULE_FILES[stem]])
