"""Codec speed: msgspec structs vs json+dataclasses vs pydantic v2, on pacs.008 and camt.029.

Then the builder in the loop: per message, what ``build_cancellation`` /
``build_credit_transfer`` with typical arguments cost (built and validated) plus the
client's ``encode_validated`` of the result (validated again and encoded), as a user's
submit loop pays them; beside it ``find_problems`` and ``encode_validated`` alone.

All three implementations have the same shape: the dataclasses and the pydantic models are
generated from our Structs (via ``msgspec.inspect``), with the same wire names and the
same optional fields, so the comparison is about the codec and not about the model.

    .venv/bin/python benchmarks/bench_codec.py            # full run
    .venv/bin/python benchmarks/bench_codec.py --quick    # smoke test (tiny counts)
    .venv/bin/python benchmarks/bench_codec.py --ab DIR --out /tmp/ab.json
        # the builder in the loop, this checkout against the one in DIR (e.g. a
        # ``git worktree`` of main), alternately in fresh processes, 64 in flight; and
        # the validation of reference data (find_problems, the IBAN, BIC and currency
        # rules, schwifty's IBAN() when installed), per call

Notes on fairness, printed with the results:
- stdlib ``json`` cannot write a ``Decimal`` as a JSON number, so that variant writes
  ``float(value)`` (inexact for some amounts); pydantic v2 writes ``Decimal`` as a string
  by default. Only the msgspec variant writes the exact digits as a number.
- Decoding validates types in msgspec and pydantic; the stdlib variant converts with a
  precompiled per-class plan (the fastest hand-written way we know) and checks nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import statistics
import subprocess
import sys
import time
import timeit
import uuid
from collections.abc import Callable
from decimal import Decimal
from importlib import metadata
from pathlib import Path
from typing import Any, Optional, Union

import msgspec.inspect as mi
import pydantic

ROOT = Path(__file__).resolve().parent.parent
# --root DIR: measure the payments_async of another checkout (see --ab); read before the
# imports below, which must find that one.
_ARGV_ROOT = sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv else None
sys.path.insert(0, _ARGV_ROOT or str(ROOT))

from payments_async.iso20022 import (  # noqa: E402
    Camt029,
    Pacs008,
    build_cancellation,
    build_credit_transfer,
    decode_camt029,
    decode_pacs008,
    encode,
    encode_validated,
    find_problems,
)

FIXTURES = ROOT / "tests" / "fixtures"
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "codec.json"


# --- models of the same shape, generated from the Structs ----------------------------------


class _Plan:
    """Per-class conversion plan for the stdlib variant: (attr, wire name, converter)."""

    def __init__(self) -> None:
        self.fields: list[tuple[str, str, Callable[[Any], Any] | None]] = []


def _unwrap(t: mi.Type) -> mi.Type:
    while isinstance(t, mi.Metadata):
        t = t.type
    return t


def _non_none(t: mi.UnionType) -> list[mi.Type]:
    return [_unwrap(m) for m in t.types if not isinstance(_unwrap(m), mi.NoneType)]


class DataclassFamily:
    """Dataclasses mirroring the Structs, plus dict <-> dataclass converters."""

    def __init__(self) -> None:
        self.classes: dict[type, type] = {}
        self.plans: dict[type, _Plan] = {}

    def model(self, struct: type) -> type:
        if struct in self.classes:
            return self.classes[struct]
        info = mi.type_info(struct)
        assert isinstance(info, mi.StructType)
        spec = []
        for f in info.fields:
            spec.append(
                (
                    f.name,
                    self._annotation(f.type),
                    dataclasses.field(default=None, metadata={"wire": f.encode_name}),
                )
            )
        cls = dataclasses.make_dataclass(f"DC{struct.__name__}", spec, kw_only=True, slots=True)
        self.classes[struct] = cls
        plan = _Plan()
        self.plans[cls] = plan
        plan.fields = [(f.name, f.encode_name, self._decoder(f.type)) for f in info.fields]
        return cls

    def _annotation(self, t: mi.Type) -> Any:
        t = _unwrap(t)
        if isinstance(t, mi.StructType):
            return self.model(t.cls)
        if isinstance(t, mi.ListType):
            return list[self._annotation(t.item_type)]  # type: ignore[misc]
        if isinstance(t, mi.UnionType):
            members = tuple(self._annotation(m) for m in _non_none(t))
            return Optional[Union[members]]  # noqa: UP007, UP045 -- built at runtime
        return {mi.StrType: str, mi.DecimalType: Decimal, mi.IntType: int}.get(type(t), Any)

    def _decoder(self, t: mi.Type) -> Callable[[Any], Any] | None:
        t = _unwrap(t)
        if isinstance(t, mi.UnionType):
            members = _non_none(t)
            t = members[0] if len(members) == 1 else t
        if isinstance(t, mi.StructType):
            cls = self.model(t.cls)
            return lambda d: self.from_dict(cls, d)
        if isinstance(t, mi.ListType):
            item = self._decoder(t.item_type)
            if item is None:
                return None
            return lambda xs: [item(x) if x is not None else None for x in xs]
        return None  # str, int and Decimal come out of json.loads ready to use

    def from_dict(self, cls: type, data: dict[str, Any]) -> Any:
        kwargs = {}
        for attr, wire, conv in self.plans[cls].fields:
            if wire in data:
                v = data[wire]
                kwargs[attr] = conv(v) if conv is not None and v is not None else v
        return cls(**kwargs)

    def to_dict(self, obj: Any) -> Any:
        if dataclasses.is_dataclass(obj):
            out = {}
            for attr, wire, _ in self.plans[type(obj)].fields:
                v = getattr(obj, attr)
                if v is not None:
                    out[wire] = self.to_dict(v)
            return out
        if isinstance(obj, list):
            return [self.to_dict(x) for x in obj]
        if isinstance(obj, Decimal):
            return float(obj)
        return obj


class PydanticFamily:
    """pydantic v2 models mirroring the Structs (aliases = wire names, same optionals)."""

    def __init__(self) -> None:
        self.models: dict[type, type[pydantic.BaseModel]] = {}

    def model(self, struct: type) -> type[pydantic.BaseModel]:
        if struct in self.models:
            return self.models[struct]
        info = mi.type_info(struct)
        assert isinstance(info, mi.StructType)
        fields: dict[str, Any] = {}
        for f in info.fields:
            annotation = self._annotation(f.type)
            default = ... if f.required else None
            fields[f.name] = (annotation, pydantic.Field(default, alias=f.encode_name))
        model = pydantic.create_model(  # type: ignore[call-overload]
            f"PM{struct.__name__}",
            __config__=pydantic.ConfigDict(populate_by_name=True),
            **fields,
        )
        self.models[struct] = model
        return model  # type: ignore[no-any-return]

    def _annotation(self, t: mi.Type) -> Any:
        t = _unwrap(t)
        if isinstance(t, mi.StructType):
            return self.model(t.cls)
        if isinstance(t, mi.ListType):
            return list[self._annotation(t.item_type)]  # type: ignore[misc]
        if isinstance(t, mi.UnionType):
            members = tuple(self._annotation(m) for m in _non_none(t))
            return Optional[Union[members]]  # noqa: UP007, UP045 -- built at runtime
        return {mi.StrType: str, mi.DecimalType: Decimal, mi.IntType: int}.get(type(t), Any)


# --- timing -------------------------------------------------------------------------------


def measure(fn: Callable[[], object], *, quick: bool) -> float:
    """Operations per second: best of several repeats (best = least disturbed by others)."""
    timer = timeit.Timer(fn)
    if quick:
        number, repeat = 20, 1
    else:
        number, _ = timer.autorange()  # enough calls for >= 0.2 s
        repeat = 5
    best = min(timer.repeat(repeat=repeat, number=number))
    return number / best


# --- the builder in the loop ------------------------------------------------------------


def new_cancellation(i: int) -> Any:
    """A camt.056 as bench_post.py's ``ours-builder`` builds one (ids of the caller's)."""
    return build_cancellation(
        original_end_to_end_id=f"E2E{i:08d}",
        amount=Decimal("1234.10"),
        creditor_agent_bic="BNPAFRPPXXX",
        creditor_iban="FR1420041010050500013M02606",
        assigner_bic="COBADEFFXXX",
        assignee_bic="BNPAFRPPXXX",
        assignment_id=f"ASG{uuid.uuid4().hex}"[:35],
    )


def new_transfer(i: int) -> Any:
    """A pacs.008 with every id, the UETR and creDtTm generated by the builder."""
    return build_credit_transfer(
        debtor_name="Alice Example",
        debtor_iban="DE89370400440532013000",
        debtor_agent_id="37040044",
        creditor_name="Bob Example",
        creditor_iban="FR1420041010050500013M02606",
        creditor_agent_id="20041010",
        amount=Decimal("12.30"),
        remittance=f"Invoice {i}",
    )


def builder_rows(*, quick: bool) -> list[dict[str, Any]]:
    """µs per message: build + validate + encode (+ the client's encode_validated)."""
    rows: list[dict[str, Any]] = []
    for name, build in (("camt.056", new_cancellation), ("pacs.008", new_transfer)):
        sample = build(0)
        counter = iter(range(1, 1 << 62))
        steps: dict[str, Callable[[], object]] = {
            "build + encode_validated": lambda b=build, c=counter: encode_validated(b(next(c))),
            "find_problems": lambda m=sample: find_problems(m),
            "encode_validated": lambda m=sample: encode_validated(m),
        }
        for step, fn in steps.items():
            ops = measure(fn, quick=quick)
            rows.append({"message": name, "step": step, "us_per_msg": round(1e6 / ops, 2)})
    return rows


def in_flight_rows(n: int = 20_000, alive: int = 64, repeat: int = 5) -> dict[str, float]:
    """µs CPU per message of build + ``encode_validated`` with ``alive`` messages in flight.

    A ring keeps the last ``alive`` messages referenced, as a client with that many
    requests under way does, so a message's memory is not reused at once.
    Best of ``repeat`` runs of ``n`` messages each.
    """
    out: dict[str, float] = {}
    for name, build in (("camt.056", new_cancellation), ("pacs.008", new_transfer)):
        best = float("inf")
        for _ in range(repeat):
            ring: list[Any] = [None] * alive
            start = time.process_time()
            for i in range(n):
                msg = build(i)
                encode_validated(msg)
                ring[i % alive] = msg
            best = min(best, (time.process_time() - start) / n * 1e6)
        out[name] = round(best, 2)
    return out


def validation_rows(n: int = 20_000, repeat: int = 5) -> dict[str, float]:
    """µs CPU per call of what validation pays for reference data, best of ``repeat`` runs.

    ``find_problems`` of a builder's message (the walk, every scalar rule), and the three
    rules a registry feeds one valid value at a time: the IBAN (country format and
    mod-97), the BIC (its country) and the currency. With ``schwifty`` installed, its own
    ``IBAN()`` of the same value too: what calling the registry's library would cost.
    """
    from payments_async.iso20022._validate import RULES

    iban, bic = "DE89370400440532013000", "COBADEFFXXX"
    camt056, pacs008 = new_cancellation(0), new_transfer(0)
    calls: dict[str, Callable[[], object]] = {
        "camt.056 find_problems": lambda: find_problems(camt056),
        "pacs.008 find_problems": lambda: find_problems(pacs008),
        "IBAN rule": lambda rule=RULES["Iban"]: rule(iban),
        "BIC rule": lambda rule=RULES["BicFi"]: rule(bic),
        "currency rule": lambda rule=RULES["CurrencyCode"]: rule("EUR"),
    }
    try:
        from schwifty import IBAN  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        calls["IBAN via schwifty"] = lambda: IBAN(iban)
    out: dict[str, float] = {}
    for name, fn in calls.items():
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            for _ in range(n):
                fn()
            best = min(best, (time.process_time() - start) / n * 1e6)
        out[name] = round(best, 3)
    return out


def ab_rows(other: Path, batches: int, *, quick: bool) -> list[dict[str, Any]]:
    """The builder in the loop, this checkout against ``other``, alternately in fresh
    processes (``--in-flight``): one row per batch and message, with the difference."""
    rows: list[dict[str, Any]] = []
    args = ["--in-flight", "--quick"] if quick else ["--in-flight"]
    for batch in range(batches):
        order = [("other", other), ("this", ROOT)]
        got: dict[str, dict[str, float]] = {}
        for label, root in order if batch % 2 == 0 else order[::-1]:
            proc = subprocess.run(
                [sys.executable, __file__, *args, "--root", str(root)],
                capture_output=True,
                text=True,
                check=True,
            )
            got[label] = json.loads(proc.stdout)
        for message in got["this"]:
            before, after = got["other"][message], got["this"][message]
            rows.append(
                {
                    "batch": batch,
                    "message": message,
                    "other_us": before,
                    "this_us": after,
                    "less_us": round(before - after, 2),
                    "ratio": round(after / before, 3),
                }
            )
    return rows


def print_ab(rows: list[dict[str, Any]], other: Path) -> None:
    print(
        "µs CPU per message (build + encode_validated, 64 in flight) or per call (the rest): "
        f"{other} -> this checkout"
    )
    for r in rows:
        print(
            f"batch {r['batch']:2} {r['message']:22} {r['other_us']:7.2f} -> {r['this_us']:7.2f}"
            f"  ({r['less_us']:+.2f} less, x{r['ratio']:.3f})"
        )
    for message in dict.fromkeys(r["message"] for r in rows):
        mine = [r for r in rows if r["message"] == message]
        print(
            f"{message}: median {statistics.median(r['other_us'] for r in mine):.2f} -> "
            f"{statistics.median(r['this_us'] for r in mine):.2f} µs, median of per-batch "
            f"differences {statistics.median(r['less_us'] for r in mine):.2f} µs less, "
            f"of ratios x{statistics.median(r['ratio'] for r in mine):.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="tiny counts: a smoke test")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write JSON")
    parser.add_argument("--root", type=Path, help="measure the payments_async found here")
    parser.add_argument(
        "--in-flight",
        action="store_true",
        help="only build + encode_validated and the validation calls, as JSON",
    )
    parser.add_argument(
        "--ab",
        type=Path,
        metavar="DIR",
        help="the builder in the loop and validation: this checkout against DIR, alternately",
    )
    parser.add_argument("--batches", type=int, default=6, help="batches for --ab")
    args = parser.parse_args(argv)
    if args.in_flight:
        n, repeat = (200, 1) if args.quick else (20_000, 5)
        print(json.dumps(in_flight_rows(n, repeat=repeat) | validation_rows(n, repeat)))
        return 0
    if args.ab is not None:
        ab = ab_rows(args.ab, args.batches, quick=args.quick)
        print_ab(ab, args.ab)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"benchmark": "codec-ab", "rows": ab}, indent=2) + "\n")
        print(f"\nwrote {args.out}")
        return 0

    dcs = DataclassFamily()
    pds = PydanticFamily()
    samples: dict[str, tuple[type, Callable[[bytes], Any], Path]] = {
        "pacs.008": (Pacs008, decode_pacs008, (FIXTURES / "pacs008_credit_transfer.json")),
        "camt.029": (Camt029, decode_camt029, (FIXTURES / "camt029_resolution.json")),
    }

    rows: list[dict[str, Any]] = []
    for name, (struct, decode, path) in samples.items():
        wire = encode(decode(path.read_bytes()))  # compact, our own encoding
        ours = decode(wire)
        dc_cls = dcs.model(struct)
        dc_obj = dcs.from_dict(dc_cls, json.loads(wire, parse_float=Decimal))
        pd_cls = pds.model(struct)
        pd_obj = pd_cls.model_validate_json(wire)

        # Same content, whatever the implementation (numbers compared as Decimals).
        reference = json.loads(wire, parse_float=Decimal)
        for produced in (
            json.dumps(dcs.to_dict(dc_obj)).encode(),
            pd_obj.model_dump_json(by_alias=True, exclude_none=True).encode(),
        ):
            assert _numbers_as_decimal(json.loads(produced)) == _numbers_as_decimal(reference)

        impls: dict[str, dict[str, Callable[[], object]]] = {
            "msgspec (ours)": {
                "encode": lambda ours=ours: encode(ours),
                "decode": lambda decode=decode, wire=wire: decode(wire),
            },
            "json + dataclasses": {
                "encode": lambda o=dc_obj: json.dumps(dcs.to_dict(o)).encode(),
                "decode": lambda c=dc_cls, w=wire: dcs.from_dict(
                    c, json.loads(w, parse_float=Decimal)
                ),
            },
            "pydantic v2": {
                "encode": lambda o=pd_obj: o.model_dump_json(by_alias=True, exclude_none=True),
                "decode": lambda c=pd_cls, w=wire: c.model_validate_json(w),
            },
        }
        for op in ("encode", "decode"):
            for impl, fns in impls.items():
                ops = measure(fns[op], quick=args.quick)
                rows.append(
                    {
                        "message": name,
                        "op": op,
                        "impl": impl,
                        "ops_per_s": round(ops, 1),
                        "us_per_op": round(1e6 / ops, 3),
                        "bytes": len(wire),
                    }
                )

    ours_by = {
        (r["message"], r["op"]): r["ops_per_s"] for r in rows if r["impl"] == "msgspec (ours)"
    }
    for r in rows:
        r["ours_x_faster"] = round(ours_by[(r["message"], r["op"])] / r["ops_per_s"], 2)

    print(f"{'message':9} {'op':7} {'implementation':20} {'ops/s':>12} {'µs/op':>9} {'ours ×':>7}")
    for r in rows:
        print(
            f"{r['message']:9} {r['op']:7} {r['impl']:20} {r['ops_per_s']:>12,.0f} "
            f"{r['us_per_op']:>9.2f} {r['ours_x_faster']:>7.2f}"
        )
    print(
        "\nours × = how many times faster msgspec is than that row (1.00 = itself).\n"
        "stdlib json writes Decimal as float (inexact); pydantic writes Decimal as a string."
    )

    builders = builder_rows(quick=args.quick)
    print(f"\n{'message':9} {'builder in the loop, per message':34} {'µs':>7}")
    for b in builders:
        print(f"{b['message']:9} {b['step']:34} {b['us_per_msg']:>7.2f}")

    result = {
        "benchmark": "codec",
        "quick": args.quick,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "versions": {p: metadata.version(p) for p in ("msgspec", "pydantic")},
        "rows": rows,
        "builders": builders,
        "notes": [
            "ops_per_s is the best of 5 repeats of an autoranged loop (>= 0.2 s each)",
            "json + dataclasses writes Decimal as float; pydantic v2 writes Decimal as a string",
            "builders: us per message, best of 5 autoranged repeats; build + encode_validated "
            "is what a submit loop with the builder pays before signing",
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


def _numbers_as_decimal(node: Any) -> Any:
    # Normalise every number (and numeric string: pydantic writes Decimal as a string) so
    # the three outputs can be compared for content.
    if isinstance(node, dict):
        return {k: _numbers_as_decimal(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_numbers_as_decimal(v) for v in node]
    if isinstance(node, bool) or node is None:
        return node
    try:
        return Decimal(str(node)).normalize()
    except ArithmeticError:
        return node


if __name__ == "__main__":
    raise SystemExit(main())
