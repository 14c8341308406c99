"""Write ``docs/porting.md``, the porting guide, from its template below and live data.

The page is generated so that it cannot go stale: the table of awaitable
calls and their blocking twins is read from the ``__all__`` lists of agrad's
public modules (every ``X`` with an ``X_sync`` beside it) and from
``agrad.Tensor``; the coverage counts, the missing names and the names
deliberately left out, with their reasons, come from
``tests/api/torch_surface.py``, which compares agrad with the installed
torch's own name lists; the "what differs" list follows the sections of
``docs/differences.md``.  torch is needed to *generate* the page (its name
lists are the denominators), not to build the docs: the page is committed.

Run from the repository root, with torch 2.13 installed::

    python docs/_tools/gen_porting.py           # rewrite docs/porting.md
    python docs/_tools/gen_porting.py --check   # exit 1 if the committed page is stale

``tests/docs/test_porting_page.py`` runs the check and the page's examples.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
import textwrap
import unicodedata
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "porting.md"
DIFFERENCES = ROOT / "docs" / "differences.md"
COMMAND = "python docs/_tools/gen_porting.py"

if str(ROOT) not in sys.path:  # run as a script: the repository's packages (agrad, tests) come first
    sys.path.insert(0, str(ROOT))

import agrad  # noqa: E402  (after the path above)
from tests.api import torch_surface  # noqa: E402

__all__ = ["AGRAD_AWAITED", "AGRAD_BLOCKING", "COMMAND", "PAGE", "TORCH_LOOP", "awaitable_pairs", "render",
           "slugify", "main"]


# -- the examples (run by tests/docs/test_porting_page.py) ---------------------------------------------

TORCH_LOOP = '''\
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 2)
y = (3 * x[:, :1]).sin() * x[:, 1:]
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

for step in range(200):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print(f"loss {loss.item():.4f}")
'''

AGRAD_AWAITED = '''\
import asyncio

import agrad
from agrad import nn


async def main() -> None:
    agrad.manual_seed(0)
    x = agrad.randn(256, 2)
    y = (3 * x[:, :1]).sin() * x[:, 1:]
    model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
    optimizer = agrad.optim.Adam(model.parameters(), lr=0.01)

    for step in range(200):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        await loss.backward()              # the one changed line
        optimizer.step()
    print(f"loss {loss.item():.4f}")


asyncio.run(main())
'''

AGRAD_BLOCKING = '''\
import agrad
from agrad import nn

agrad.manual_seed(0)
x = agrad.randn(256, 2)
y = (3 * x[:, :1]).sin() * x[:, 1:]
model = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
optimizer = agrad.optim.Adam(model.parameters(), lr=0.01)

for step in range(200):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward_sync()                   # the one changed line
    optimizer.step()
print(f"loss {loss.item():.4f}")
'''


# -- where await goes: read from agrad -----------------------------------------------------------------

def _public_modules() -> list[Any]:
    """agrad and its public submodules (no path component starting with ``_``), shallowest first."""
    names = ["agrad"] + [m.name for m in pkgutil.walk_packages(agrad.__path__, "agrad.")
                         if not any(part.startswith("_") for part in m.name.split("."))]
    return [importlib.import_module(n) for n in sorted(names, key=lambda n: (n.count("."), n))]


def awaitable_pairs() -> list[tuple[str, str]]:
    """Every awaitable call with a blocking twin, as ``(name, twin)`` relative to ``agrad``:
    ``Tensor``'s methods, then each public module's ``X`` whose ``__all__`` also has ``X_sync``
    (a name re-exported by several modules is listed once, under the shallowest)."""
    pairs = [(f"Tensor.{n[:-5]}", f"Tensor.{n}") for n in sorted(dir(agrad.Tensor))
             if n.endswith("_sync") and hasattr(agrad.Tensor, n[:-5])]
    seen: set[int] = set()
    for module in _public_modules():
        exported = set(getattr(module, "__all__", ()))
        prefix = module.__name__.removeprefix("agrad").lstrip(".")
        for name in sorted(exported):
            obj = getattr(module, name)
            if f"{name}_sync" not in exported or id(obj) in seen:
                continue
            seen.add(id(obj))
            pairs.append((f"{prefix}.{name}".lstrip("."), f"{prefix}.{name}_sync".lstrip(".")))
    return pairs


# How each pair is called in PyTorch, awaited in agrad, and blocking in agrad.
_CALLS: dict[str, tuple[str, str, str]] = {
    "Tensor.backward": ("loss.backward()", "await loss.backward()", "loss.backward_sync()"),
    "autograd.backward": ("torch.autograd.backward(tensors, grads)", "await agrad.autograd.backward(tensors, grads)",
                          "agrad.autograd.backward_sync(tensors, grads)"),
    "autograd.grad": ("torch.autograd.grad(out, x)", "await agrad.autograd.grad(out, x)",
                      "agrad.autograd.grad_sync(out, x)"),
    "autograd.functional.vjp": ("torch.autograd.functional.vjp(f, x, v)",
                                "await agrad.autograd.functional.vjp(f, x, v)",
                                "agrad.autograd.functional.vjp_sync(f, x, v)"),
    "autograd.functional.jacobian": ("torch.autograd.functional.jacobian(f, x)",
                                     "await agrad.autograd.functional.jacobian(f, x)",
                                     "agrad.autograd.functional.jacobian_sync(f, x)"),
    "autograd.functional.hessian": ("torch.autograd.functional.hessian(f, x)",
                                    "await agrad.autograd.functional.hessian(f, x)",
                                    "agrad.autograd.functional.hessian_sync(f, x)"),
    "func.grad": ("torch.func.grad(f)(x)", "await agrad.func.grad(f)(x)", "agrad.func.grad_sync(f)(x)"),
    "func.grad_and_value": ("torch.func.grad_and_value(f)(x)", "await agrad.func.grad_and_value(f)(x)",
                            "agrad.func.grad_and_value_sync(f)(x)"),
    "func.vjp": ("out, vjp_fn = torch.func.vjp(f, x)<br>vjp_fn(v)", "out, vjp_fn = agrad.func.vjp(f, x)<br>"
                 "await vjp_fn(v)", "out, vjp_fn = agrad.func.vjp_sync(f, x)<br>vjp_fn(v)"),
}


def _call_cells(name: str, twin: str) -> tuple[str, str, str]:
    """The three call cells of one pair; a pair without a hand-written entry gets a generic one."""
    if name in _CALLS:
        return _CALLS[name]
    return f"torch.{name}(...)", f"await agrad.{name}(...)", f"agrad.{twin}(...)"


def _await_table(pairs: list[tuple[str, str]]) -> str:
    stale = sorted(set(_CALLS) - {name for name, _ in pairs})
    if stale:
        raise SystemExit(f"{__file__}: _CALLS names calls agrad no longer has: {stale}")
    rows = ["| PyTorch | agrad, in async code | agrad, in sync code (blocking twin) |", "| --- | --- | --- |"]
    for name, twin in pairs:
        cells = _call_cells(name, twin)
        rows.append("| " + " | ".join("<br>".join(f"`{part}`" for part in cell.split("<br>")) for cell in cells)
                    + " |")
    return "\n".join(rows)


# -- what differs: the sections of differences.md ----------------------------------------------------

def slugify(heading: str) -> str:
    """The anchor Python-Markdown's ``toc`` extension (mkdocs' default) gives a heading."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)  # rendered text: code spans lose their backticks
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def headings(markdown: str, level: int = 2) -> list[str]:
    """The text of the headings of ``level`` in ``markdown`` (outside fenced code)."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#" * level + " "):
            out.append(line[level + 1:].strip())
    return out


# One line per section of differences.md: what a porter should know from it.
_DIFFERENCES: dict[str, str] = {
    "`.grad` is transactional":
        "a backward that raises or is cancelled leaves every `.grad` as it was; gradients are committed all at "
        "once, at the end, so a hook reading another leaf's `.grad` mid-backward sees the old value.",
    "Awaiting a backward":
        "`loss.backward()` returns an awaitable (or use `backward_sync()`); a forgotten `await` is reported at its "
        "line (`agrad.NotAwaitedWarning`), a blocking twin on a running loop's thread warns "
        "(`agrad.BlockingCallWarning`).",
    "Autograd semantics":
        "a few corner cases where PyTorch crashes or returns a wrong gradient (`mark_dirty` on a view, hooks on "
        "stale views), hooks checked at registration, `no_grad` decorating an `async def` holds for its body.",
    "Inference mode":
        "a refused in-place write leaves the tensor unchanged; `enable_grad()` inside `inference_mode()` records.",
    "Values":
        "a handful of numerical corner cases (`pow`'s second derivative at 0, out-of-range `scatter_add_`, "
        "writes into read-only numpy memory raise).",
    "The everyday surface":
        "ties in `topk`/`kthvalue`/`mode` take the stable order, composites of `nn.functional` record their last "
        "primitive's node, `agrad.save`/`agrad.load` write safetensors, never pickle.",
    "Models and training":
        "`load_state_dict` is all or nothing, `forward` may be `async def` (then `await model(x)`), `agrad.func` "
        "has `functional_call`, `grad`, `grad_and_value`, `vjp`; what `agrad.nn` leaves out.",
    "Errors":
        "`einsum` does not broadcast a subscript of size 1 against another size.",
}


def _differences_list() -> str:
    sections = headings(DIFFERENCES.read_text(encoding="utf-8"))
    unknown = [s for s in sections if s not in _DIFFERENCES]
    stale = [s for s in _DIFFERENCES if s not in sections]
    if unknown or stale:
        raise SystemExit(f"{__file__}: the sections of docs/differences.md changed; update _DIFFERENCES "
                         f"(new: {unknown}, gone: {stale})")
    return "\n".join(_bullet(f"[{s}](differences.md#{slugify(s)}): {_DIFFERENCES[s]}") for s in sections)


# -- what is missing: torch_surface's coverage ---------------------------------------------------------

class _Family(NamedTuple):
    """A kind of name agrad lacks: its label, a pattern its names match, and the
    coverage groups it applies to (None: all)."""

    label: str
    pattern: str
    groups: frozenset[str] | None = None


# What the names agrad lacks are: the first family whose pattern matches a
# name (in its group) takes it; the rest are "not there yet".
_FAMILIES: list[_Family] = [
    _Family("Deprecated aliases (use the form with a trailing underscore)", r"[^_]$", frozenset({"torch.nn.init"})),
    _Family("Quantization-aware and intrinsic module packages, and `torch.nn`'s internal modules",
            r"^(qat|quantizable|quantized|intrinsic|attention|common_types|factory_kwargs|grad)$",
            frozenset({"torch.nn"})),
    _Family("Complex numbers (see the deliberately absent names below)",
            r"complex|cfloat|cdouble|chalf|polar|view_as_real"),
    _Family("Quantized tensors", r"quant|^q_|qscheme|int_repr|qparams"),
    _Family("Sparse and nested layouts",
            r"sparse|coalesce|^(ccol_|col_|crow_|row_)?indices(_copy)?$|^values|dense|^s?spaddmm$|^[dhs]?smm$|"
            r"^hspmm$|^saddmm$|^spmm$|nested|padded_tensor"),
    _Family("Other backends' kernels and PyTorch internals (cuDNN, MIOpen, oneDNN, FBGEMM, `native_*`, "
            "SyncBatchNorm's statistics, the functional RNN cells)",
            r"^cudnn|^miopen|mkldnn|^fbgemm|^native_|^batch_norm_|vulkan|^conv_tbc$|^affine_grid_generator$|"
            r"^grid_sampler|^norm_except_dim$|^hash_tensor$|^init_num_threads$|^thread_safe_generator$|"
            r"^rnn_(relu|tanh)|^(lstm|gru)(_cell)?$"),
    _Family("Mixed precision (autocast)", r"autocast"),
    _Family("TorchScript, `torch.compile` and symbolic shapes",
            r"^compile$|^fork$|^wait$|ir_module|^parse_|type_comment|unify_type|^sym_|functionalize|debug_unwrap"),
    _Family("`*_copy` variants of view ops (use the view, then `.clone()`)", r"_copy$"),
    _Family("Other devices (IPU, XPU, MPS, XLA, MTIA, MAIA, meta) and distributed training",
            r"ipu|xpu|mps|xla|mtia|maia|is_meta|distributed|get_device_module|DataParallel|SyncBatchNorm|"
            r"^parallel$"),
    _Family("Storage, memory layout and resizing",
            r"storage|as_strided|resize|^set_$|is_set_to|share_memory|is_shared|pin_memory|is_pinned|"
            r"record_stream|const_data_ptr|^new$|module_load|^layout$|empty_permuted|new_empty_strided|"
            r"from_file|frombuffer|memory_format|slice_inverse"),
    _Family("Lazy modules and uninitialised parameters", r"^Lazy|^Uninitialized"),
]


def _family(group: str, name: str) -> str | None:
    for family in _FAMILIES:
        if (family.groups is None or group in family.groups) and re.search(family.pattern, name):
            return family.label
    return None


_NOT_YET = "Not there yet"


def _bullet(text: str) -> str:
    """``text`` as a Markdown list item, wrapped for a readable source (code spans hold no spaces,
    so they are never split)."""
    return textwrap.fill(text, width=110, initial_indent="- ", subsequent_indent="  ", break_long_words=False,
                         break_on_hyphens=False)


def _codes(names: Iterable[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _group_title(name: str) -> str:
    """A coverage group's name as the page shows it: module paths as code."""
    return f"`{name}`" if name.startswith("torch") else name[0].upper() + name[1:]


def _missing_section(torch: Any) -> str:
    order = [_NOT_YET] + [f.label for f in _FAMILIES]
    parts = []
    for g in torch_surface.GROUPS:
        theirs = g.torch_names(torch)
        ns = g.agrad_namespace()
        missing = sorted(n for n in theirs if not hasattr(ns, n))
        lines = [f"### {_group_title(g.name)}", ""]
        if not missing:
            lines.append(f"agrad has all {len(theirs)} of torch's names.")
            parts.append("\n".join(lines))
            continue
        lines += [f"agrad has {len(theirs) - len(missing)} of torch's {len(theirs)}. Missing ({len(missing)}):", ""]
        pending = torch_surface.PENDING.get(g.name, {})
        families: dict[str, list[str]] = {}
        for n in missing:
            if n not in pending:
                families.setdefault(_family(g.name, n) or _NOT_YET, []).append(n)
        for label in sorted(families, key=order.index):
            lines.append(_bullet(f"**{label}** ({len(families[label])}): {_codes(families[label])}"))
        if pending:
            by_reason: dict[str, list[str]] = {}
            for n in sorted(pending):
                by_reason.setdefault(pending[n], []).append(n)
            lines.append(_bullet(f"**Deliberately absent** ({len(pending)}; `PENDING` in "
                                 "`tests/api/torch_surface.py`, with the reason):"))
            lines += ["  " + _bullet(f"{_codes(names)}: {reason}.").replace("\n", "\n  ") for reason, names in
                      by_reason.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _coverage_table(torch: Any) -> str:
    rows = ["| group | agrad | torch | share |", "| --- | ---: | ---: | ---: |"]
    for name, have, total, _ in torch_surface.coverage(torch):
        rows.append(f"| {_group_title(name)} | {have} | {total} | {have / total:.0%} |")
    return "\n".join(rows)


# -- the page --------------------------------------------------------------------------------------------

_TEMPLATE = """\
<!-- Generated by `{command}` from its template and tests/api/torch_surface.py: do not edit by hand. -->

# Porting from PyTorch

agrad's API is PyTorch's: the same names, module paths, signatures, values
and error messages, with `torch` spelled `agrad`. What changes in a port is
the backward: it is a coroutine, awaited on an event loop so that other
coroutines keep running while gradients are computed, with a blocking twin
for scripts. This page says what to rename, where `await` goes, what a
forgotten `await` does, what differs and what is not there yet (that part
is generated from the coverage test, against torch {torch_version}).

![An awaited backward's time slices beside a 1 ms ticker; a blocking one starves it](images/time_slices.png)

Why `await`: above, an awaited backward (top, and up close in the middle)
runs on the event loop's CPU worker in half-millisecond slices, so other
coroutines (a 1 ms ticker, a second request) keep running; the same backward
called blocking inside a coroutine (bottom) holds the loop until it returns.
See [Scheduling](scheduling.md).

## Rename `torch` to `agrad`

Replace the module name everywhere: `import torch` becomes `import agrad`,
`from torch import nn` becomes `from agrad import nn`, `import
torch.nn.functional as F` becomes `import agrad.nn.functional as F`, and
`torch.float32`, `torch.no_grad()`, `torch.optim.Adam` become
`agrad.float32`, `agrad.no_grad()`, `agrad.optim.Adam`.

Do not write `import agrad as torch`. The backward lines change in any
case, so the file is not PyTorch code any more; a name that says `torch`
but is agrad misleads readers, type checkers and every tool that looks for
PyTorch, and it breaks as soon as the same program (a test that compares
with PyTorch, a conversion script) imports the real one.

## Where `await` goes

Every call that runs a backward returns an awaitable: `await` it inside
`async def` code. Each has a blocking twin, the same name with `_sync`, for
code that has no event loop. The full list, read from
agrad's public modules:

{await_table}

Also awaited:

- a `Module` whose `forward` is `async def`: `await model(x)`, with the
  forward hooks around the awaited forward (a plain `def forward` is called
  as in PyTorch, `model(x)`);
- a custom `agrad.autograd.Function` may define `async def backward`; the
  engine awaits it (see [Reentrant backward](reentrance.md));
- `await agrad.cooperative(fn, *args)`, agrad's own: runs a whole
  synchronous step (forward, loss, `backward_sync()`, optimizer step) in time
  slices on the event loop ([Serving](serving.md)).

Everything else is synchronous, as in PyTorch: forward ops, `no_grad`,
`optimizer.step()`, `zero_grad()`, schedulers, `state_dict`, `.item()`.
Inside a function that the `func` transforms differentiate, or inside a
`Function.backward` written with `def`, use the `_sync` forms.

## Scripts and threads: the blocking twins

A script, a notebook cell or a worker thread with no event loop calls the
twins: `loss.backward_sync()`, `agrad.autograd.grad_sync(out, x)`,
`agrad.autograd.functional.jacobian_sync(f, x)`, `agrad.func.grad_sync(f)(x)`,
`agrad.func.vjp_sync(f, x)`. They run the same engine, give the same
gradients and work from any thread.

Called on a thread whose event loop is running (inside an `async def`), a
blocking twin still works, but it holds that loop for the whole backward:
every other task waits. agrad warns about it with
`agrad.BlockingCallWarning`, once per call site, naming the alternatives
(`await` the awaitable form, or run the blocking code off the loop with
`anyio.to_thread.run_sync` or `agrad.cooperative`). A blocking backward that
a custom `Function`'s backward starts (reentrant checkpointing) and one
inside `agrad.cooperative` are not warned about: neither blocks anything
that was not already waiting.

## A forgotten `await`

A ported line that keeps PyTorch's `loss.backward()` in async code gets a
coroutine back and drops it: nothing runs and `.grad` stays `None`. agrad
reports it at that line, as it happens, with `agrad.NotAwaitedWarning`:

```text
loss.backward() was never awaited (at train.py:14), so it did nothing: no gradient was computed.
Write `await loss.backward()` in async code, or call `loss.backward_sync()` in synchronous code.
```

Using the result of a forgotten `await` as a value
(`gx, = agrad.autograd.grad(y, x)`) raises `TypeError` with the same advice
at once. Under pytest, agrad's plugin (installed with agrad; `-p no:agrad`
turns it off) fails the test in which an awaitable was dropped, with that
message, so a forgotten `await` cannot pass a test suite unnoticed.

## Before and after

A small regression trained with Adam, in PyTorch:

```python
{torch_loop}```

Ported, on an event loop (`asyncio.run`, or inside a server's handler):

```python
{agrad_awaited}```

Ported, as a plain script:

```python
{agrad_blocking}```

Only the imports, `torch` → `agrad` and the backward line changed. The
awaited and the blocking port print the same loss, to the bit; PyTorch
prints another (its random numbers differ, so the data does).

A longer worked example, with a data loader, schedulers and a loss curve, is
`examples/training.py`, described in [Models and training](models-and-training.md).
PyTorch's tutorials, ported by rename, are in `examples/tutorials/`.

## What differs

Everything not listed on [Where agrad differs from PyTorch](differences.md)
that differs from PyTorch is a bug. Its sections, in one line each:

{differences}

## What is missing

Coverage of torch {torch_version}'s names, group by group, as
`python -m tests.api.torch_surface` prints it (names are read from torch
itself: `torch.__all__`, `dir(torch.Tensor)`, `torch.nn.functional`, ...):

{coverage_table}

Each group's missing names follow, sorted into what they are. "Not there
yet" are the gaps a port may hit (some of `torch.nn`'s and `torch.optim`'s
are left out on purpose: [Models and training](differences.md#models-and-training)
on the differences page says which); the other families are parts of
PyTorch that agrad does not model (layouts, backends, compilers). A name
that arrives moves into `REQUIRED` in `tests/api/torch_surface.py`, and
this page is regenerated with `{command}`.

{missing}
"""


def render(torch: Any) -> str:
    """The page, for the installed ``torch``."""
    return _TEMPLATE.format(
        command=COMMAND,
        torch_version=torch.__version__.split("+")[0],
        await_table=_await_table(awaitable_pairs()),
        torch_loop=TORCH_LOOP,
        agrad_awaited=AGRAD_AWAITED,
        agrad_blocking=AGRAD_BLOCKING,
        differences=_differences_list(),
        coverage_table=_coverage_table(torch),
        missing=_missing_section(torch),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/porting.md differs from the output")
    args = parser.parse_args(argv)
    import torch

    text = render(torch)
    if args.check:
        if PAGE.read_text(encoding="utf-8") != text:
            print(f"docs/porting.md is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)} (torch {torch.__version__})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
