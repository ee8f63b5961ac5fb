"""``tpusim plan``'s run (its flags in :mod:`tpusim.cli.plan`): the request the flags
give, the search (:mod:`tpusim.planner`) and the layouts as JSON or a table."""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import ValidationError

from tpusim import units
from tpusim.cli.model_flags import flag_problem, model_values
from tpusim.cli.network_flags import network_of
from tpusim.cli.plan import NOT_FLAGS, PlanFlags
from tpusim.errors import InputError
from tpusim.planner import plan_layouts
from tpusim.planner.request import DEFAULT_CONFIRM, DEFAULT_SHORTLIST
from tpusim.report import text_table
from tpusim.results.files import json_text
from tpusim.results.intervals import json_intervals
from tpusim.results.records import ProgramRecord

COLUMNS = (
    "rank",
    "mesh",
    "remat",
    "microbatches",
    "flags",
    "fidelity",
    "step time",
    "80% interval",
    "MFU",
    "peak HBM/chip",
    "exposed comm",
)


def plan_request(args: argparse.Namespace) -> PlanFlags:
    """The request the flags give; raises InputError naming the flag of a bad value."""
    given = model_values(args, PlanFlags, skip=NOT_FLAGS)
    shortlist = int(given.get("shortlist", DEFAULT_SHORTLIST))  # type: ignore[call-overload]
    given.setdefault("confirm", min(DEFAULT_CONFIRM, shortlist))
    try:
        flags = PlanFlags.model_validate(given)
    except ValidationError as exc:
        raise InputError(flag_problem(exc.errors()[0], PlanFlags, "tpusim plan")) from None
    ranks, confirms = flags.rank_fidelity, flags.confirm_fidelity
    return flags.model_copy(
        update={
            "rank_network": network_of(args, ranks, also=[confirms]),
            "confirm_network": network_of(args, confirms, also=[ranks]),
            "overrides": {"layers": flags.layers} if flags.layers else {},
            "progress": True,
        }
    )


def cmd_plan(args: argparse.Namespace) -> None:
    request = plan_request(args)
    record = plan_record(plan_layouts(request), request.top)
    if request.as_json:
        print(json_text(record))
        return
    print("\n".join(plan_lines(record)))


def layout_row(result: Any, simulated: Any) -> dict[str, Any]:
    """One layout of ``result`` (a PlanResult) as JSON: its mesh, roles, schedule, the
    times at the fidelity that placed it, and its times at the ranking fidelity."""
    fitted = simulated.fitted
    layout = fitted.layout
    ranked = result.ranked_run(fitted)
    return {
        "mesh": dict(layout.mesh),
        "roles": layout.roles,
        "remat": layout.remat.name,
        "microbatches": layout.microbatches,
        "flags": dict(layout.flags),
        "fidelity": simulated.fidelity,
        "step_time_s": simulated.step_time_s,
        "mfu": simulated.mfu,
        "peak_hbm_bytes_per_chip": fitted.peak_hbm_bytes,
        "exposed_communication_time_s": simulated.exposed_communication_time_s,
        "compute_time_s": simulated.compute_time_s,
        "screen_step_time_s": result.screens[id(fitted)].step_s,
        "ranked_step_time_s": ranked.step_time_s if ranked else None,
        "simulated_as": simulated.how,
    } | _intervals(simulated, result.system.chip.name)


def _intervals(simulated: Any, chip: str) -> dict[str, Any]:
    """``step_time_s_interval``, ``mfu_interval`` (80%) and ``interval_basis``."""
    row = {"step_time_s": simulated.step_time_s, "mfu": simulated.mfu}
    columns = {k: ProgramRecord.interval_columns[k] for k in row}
    return json_intervals(row, columns, chip)


def plan_record(result: Any, top: int) -> dict[str, Any]:
    """The ``plan`` JSON object of ``result`` with its ``top`` best layouts."""
    request, memory = result.request, result.memory
    reference = result.reference_run()
    simulated = {id(s.fitted) for s in result.ranked} | {id(s.fitted) for s in result.confirmed}
    return {
        "model": request.model,
        "system": result.system.name,
        "chips": result.system.num_chips,
        "global_batch": request.global_batch,
        "seq": request.seq,
        "dtype": request.dtype,
        "layers": request.overrides.get("layers"),
        "candidates_considered": memory.considered,
        "rejected_by_checks": memory.rejected,
        "out_of_memory": len(memory.too_big),
        "fit_in_memory": len(memory.fitting),
        "simulated": len(simulated),
        "screened_by": "closed-form",
        "ranked_by": request.rank_network.fidelity,
        "confirmed_by": request.confirm_network.fidelity,
        "layouts": [layout_row(result, s) for s in result.ordered()[:top]],
        "reference": None if reference is None else layout_row(result, reference),
    }


def plan_lines(record: dict[str, Any]) -> list[str]:
    """The text report of a ``plan`` record."""
    rows = [_text_row(i, row) for i, row in enumerate(record["layouts"], start=1)]
    fragment = f", a {record['layers']}-layer fragment" if record["layers"] else ""
    lines = [
        f"plan            {record['model']}{fragment} on {record['system']} "
        f"({record['chips']:,} chips), global batch {record['global_batch']:,} x "
        f"{record['seq']:,} tokens, {record['dtype']}",
        f"search          {record['candidates_considered']:,} layouts considered, "
        f"{record['fit_in_memory']:,} fit in memory, {record['simulated']} simulated: "
        f"screened in closed form, ranked at {record['ranked_by']} fidelity, the best "
        f"confirmed at {record['confirmed_by']}",
        "",
        text_table(rows, COLUMNS),
    ]
    if record["layouts"]:
        lines.append(f"interval basis  {record['layouts'][0]['interval_basis']}")
    ref = record["reference"]
    if ref is not None:
        lines += [
            "",
            f"pure FSDP       {_mesh_text(ref['mesh'])}, remat {ref['remat']}: "
            f"{units.format_time(ref['step_time_s'])}, MFU {ref['mfu']:.1%} "
            f"({ref['fidelity']})",
        ]
    return lines


def _range(pair: list[float] | None) -> str:
    """``lo-hi`` of a step time interval, or - without one."""
    return "-" if not pair else f"{units.format_time(pair[0])}-{units.format_time(pair[1])}"


def _flags_text(flags: dict[str, bool]) -> str:
    """The searched flags that are on (what tells two rows of one mesh apart), or -."""
    return ", ".join(name for name, on in flags.items() if on) or "-"


def _mesh_text(mesh: dict[str, int]) -> str:
    return " x ".join(f"{name} {size}" for name, size in mesh.items())


def _text_row(rank: int, row: dict[str, Any]) -> dict[str, str]:
    return {
        "rank": str(rank),
        "mesh": _mesh_text(row["mesh"]),
        "remat": row["remat"],
        "microbatches": str(row["microbatches"]),
        "flags": _flags_text(row["flags"]),
        "fidelity": row["fidelity"],
        "step time": units.format_time(row["step_time_s"]),
        "80% interval": _range(row.get("step_time_s_interval")),
        "MFU": f"{row['mfu']:.1%}",
        "peak HBM/chip": units.format_bytes(row["peak_hbm_bytes_per_chip"]),
        "exposed comm": units.format_time(row["exposed_communication_time_s"]),
    }
