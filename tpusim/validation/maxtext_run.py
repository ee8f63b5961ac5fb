"""A MaxText training run pasted as its command line, on a system: the line's
``key=value`` overrides read as MaxText reads them (over MaxText's defaults), checked
as a published case is (:class:`~.workloads.RunSpec`) and translated to
``training_step`` fields by the same :func:`~.workloads_translate.translate` that
``validate --workloads`` uses. ``tpusim step SYSTEM --maxtext LINE`` and
``tpusim.training_step(system, maxtext=LINE)`` run it.

The line may start with MaxText's command (``python3 -m
maxtext.trainers.pre_train.train .../base.yml``, or ``train_compile``): every word
before the first ``key=value`` is skipped. Values are read as YAML scalars, as
MaxText's ``pyconfig`` does (``-1``, ``True``, ``2.5``). The slice is the system's:
its chips (in JAX devices, :data:`JAX_DEVICES_PER_CHIP`), its torus dims, and its pods
as MaxText slices. Keys tpusim does not model (kernel block sizes, checkpointing,
profiling, data paths) are returned in :attr:`MaxTextRun.not_modelled`, for one warning
line; none is dropped silently. A key MaxText gives twice, a model MaxText names that
tpusim has no preset for, or a value of the wrong type is an InputError naming it.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any, get_args

import yaml
from pydantic import ValidationError

from tpusim.config.limits import MAX_STEP_TOKENS
from tpusim.config.loader import System
from tpusim.config.system import TorusTopologySpec
from tpusim.errors import InputError
from tpusim.validation.maxtext_flags import COST_FLAGS, RECORDED_FLAGS, RematTensor
from tpusim.validation.maxtext_line import MODEL_NAMES
from tpusim.validation.workloads import RunSpec
from tpusim.validation.workloads_translate import translate

JAX_DEVICES_PER_CHIP = {"ironwood": 2}
"""JAX devices per chip where not one (grade: primary, code): Ironwood's two
TensorCores are two devices (libtpu's ``get_topology_desc("tpu7x:2x2x1")`` lists 8
devices for 4 chips; the tpu-recipes Ironwood runs count 128 devices on 64 chips); v4
and v5p run their two TensorCores as one megacore device, v5e and v6e have one."""

DEFAULTS: dict[str, Any] = {
    "per_device_batch_size": 12.0,
    "max_target_length": 2048,
    "dtype": "bfloat16",
    "remat_policy": "full",
}
"""MaxText's defaults of the keys a run needs (grade: primary, code: MaxText
``src/maxtext/configs/base.yml`` at e591f30, 2026-08-22: ``per_device_batch_size:
12.0``, ``max_target_length: 2048``, ``dtype: "bfloat16"``, ``remat_policy: 'full'``;
``ici_fsdp_parallelism: -1`` and ``dcn_data_parallelism: -1`` are applied by the
meshes, ``quantization: ""`` is none)."""

RUN_KEYS = frozenset({"model_name", *DEFAULTS, "quantization"})
"""The keys read into the run besides the ``layout`` flags and a custom policy's
tensors."""

#: A run's field -> the MaxText key it is read from (errors name the line's key).
_KEYS = {
    "model": "model_name",
    "per_device_batch": "per_device_batch_size",
    "seq": "max_target_length",
}
#: MaxText's names of a custom remat policy's tensors (keys of the line).
REMAT_TENSORS = frozenset(get_args(RematTensor))
_MODELS = {maxtext: preset for preset, maxtext in MODEL_NAMES.items()}


@dataclass(frozen=True)
class MaxTextRun:
    """A line on a system: the run as checked, its ``training_step`` fields (the
    translation's), the fields the current ``training_step`` lacks, and the line's keys
    tpusim does not model."""

    run: RunSpec
    fields: dict[str, object]
    missing: tuple[str, ...]
    not_modelled: tuple[str, ...]


def maxtext_overrides(line: str) -> dict[str, Any]:
    """The ``key=value`` words of ``line`` in order, values as YAML scalars; InputError
    for a key given twice, a word that is not ``key=value`` after the first one, or a
    line with none."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise InputError(f"maxtext: {exc}") from None
    out: dict[str, Any] = {}
    started = False
    for word in words:
        key, equals, text = word.partition("=")
        if not equals or not key:
            if started:
                raise InputError(f"maxtext: '{word}' is not key=value")
            continue  # MaxText's command and its config file
        started = True
        if key in out:
            raise InputError(f"maxtext: {key} is given twice")
        out[key] = _scalar(text)
    if not out:
        raise InputError("maxtext: no key=value in the line")
    return out


def _scalar(text: str) -> Any:
    """``text`` as a YAML scalar, a number YAML 1.1 leaves a string (``1e30``) as a
    float."""
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def maxtext_run(line: str, system: System) -> MaxTextRun:
    """``line`` (:func:`maxtext_overrides`) as a run on ``system``'s slices; InputError
    naming the key for a model without a preset or a value the run refuses."""
    keys = maxtext_overrides(line)
    if "model_name" not in keys:
        raise InputError("maxtext: model_name is missing (the model's MaxText name)")
    model = _MODELS.get(str(keys["model_name"]))
    if model is None:
        known = ", ".join(sorted(_MODELS))
        raise InputError(
            f"maxtext: model_name={keys['model_name']}: no tpusim preset (known: {known})"
        )
    got = DEFAULTS | {k: v for k, v in keys.items() if k in DEFAULTS}
    tensors = {k: v for k, v in keys.items() if k in REMAT_TENSORS}
    layout = {k: v for k, v in keys.items() if _layout_key(k)}
    if not any(k.startswith("ici_") and v == -1 for k, v in layout.items()):
        layout.setdefault("ici_fsdp_parallelism", -1)
    pods = system.spec.pods or 1
    if pods > 1 and not any(k.startswith("dcn_") and v == -1 for k, v in layout.items()):
        layout.setdefault("dcn_data_parallelism", -1)
    slice_system = system.pod or system
    per_chip = JAX_DEVICES_PER_CHIP.get(system.chip.name, 1)
    devices = slice_system.num_chips * per_chip * pods
    data = {
        "chip": system.chip.name,
        "slice": _slice(slice_system),
        "num_slices": pods,
        "devices_per_chip": per_chip,
        "model": model,
        "per_device_batch": got["per_device_batch_size"],
        "global_batch": _global_batch(got["per_device_batch_size"], devices),
        "seq": got["max_target_length"],
        "dtype": got["dtype"],
        "quantization": keys.get("quantization") or None,
        "remat_policy": got["remat_policy"],
        "remat_tensors": tensors or None,
        "layout": layout,
    }
    try:
        run = RunSpec.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(_KEYS.get(str(p), str(p)) for p in error["loc"])
        problem = str(error["msg"]).removeprefix("Value error, ")
        raise InputError(f"maxtext: {where + ': ' if where else ''}{problem}") from None
    translation = translate(run)
    used = RUN_KEYS | set(tensors) | set(layout)
    not_modelled = tuple(k for k in keys if k not in used)
    return MaxTextRun(run, translation.fields, translation.missing, not_modelled)


def _global_batch(per_device: object, devices: int) -> int:
    """Sequences per step: MaxText's per-device batch times the devices (a whole number:
    MaxText rounds nothing); InputError otherwise."""
    if isinstance(per_device, bool) or not isinstance(per_device, int | float):
        raise InputError(f"maxtext: per_device_batch_size={per_device!r} is not a number")
    total = per_device * devices
    if per_device <= 0 or not math.isfinite(total) or abs(total - round(total)) > 1e-9:
        raise InputError(
            f"maxtext: per_device_batch_size={per_device:g} x {devices} devices is not a "
            "whole number of sequences"
        )
    if total > MAX_STEP_TOKENS:
        raise InputError(
            f"maxtext: per_device_batch_size={per_device:g} x {devices} devices is over "
            f"the limit of {MAX_STEP_TOKENS:,} tokens per step"
        )
    return round(total)


def _slice(system: System) -> dict[str, object]:
    """One slice of ``system`` as a published case writes it (name, chips, dims)."""
    topology = system.spec.topology
    dims = list(topology.dims) if isinstance(topology, TorusTopologySpec) else [system.num_chips]
    return {"name": system.name, "chips": system.num_chips, "dims": dims}


def _layout_key(key: str) -> bool:
    """A ``layout`` flag: a mesh axis (an unknown one too: the run refuses it, naming
    it), a cost flag or a recorded one."""
    mesh = key.startswith(("ici_", "dcn_")) and key.endswith("_parallelism")
    return mesh or key in COST_FLAGS or key in RECORDED_FLAGS
