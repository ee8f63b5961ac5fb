"""Each field of a step, each role's axis field and each fault key is declared once
(issue 44): the builder's arguments (``TrainingArgs``) and the ``training_step``
workload are one model (``TrainingFields``), a role's ``<role>_axis`` comes from its
registration, the fault keys live in ``tpusim.config.faults``, and no field of these
models is declared elsewhere with another default.

Oracles: the models' own declarations (each class's ``__annotations__``, what a
reader of its source sees), scanned over every pydantic model of the package."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from pydantic import BaseModel

import tpusim
from tpusim.config.faults import (
    FAULT_FIELDS,
    FaultKeys,
    FaultSet,
    FaultSetKeys,
    GivenFaultFlags,
    GivenFaultKeys,
)
from tpusim.program.builders.args import TrainingArgs
from tpusim.program.builders.fields import RoleAxes, StepFields, TrainingFields
from tpusim.program.builders.roles import role_fields
from tpusim.workloads.decode_step import DecodeWorkload
from tpusim.workloads.spec import WorkloadSpec
from tpusim.workloads.training_step import TrainingWorkload

#: Fields of the same name in models of another thing, each with why its default is
#: its own (model class -> field).
HOMONYMS = {
    # a preset file's MLP: the published models are gated; builder_fields() passes it
    ("tpusim.config.model.ModelSpec", "mlp"),
    # a served checkpoint's stored dtype, not how a training step keeps its weights
    ("tpusim.validation.serving_figures.Figure", "weight_dtype"),
    # tpusim faults (a Monte Carlo): the range of failed-link counts swept and the seed
    # of the trials' draws, not one run's failed links and random-link seed
    ("tpusim.cli.faults.FaultsOptions", "fail_links"),
    ("tpusim.cli.faults.FaultsOptions", "seed"),
    # tpusim compile's --mesh: the mesh as its command line writes it, a string
    ("tpusim.cli.compile.CompileFlags", "mesh"),
}


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _models() -> list[type[BaseModel]]:
    """Every pydantic model class of the package (modules that need an extra, as
    ``compile/`` needs jax, left out)."""
    for module in pkgutil.walk_packages(tpusim.__path__, "tpusim."):
        try:
            importlib.import_module(module.name)
        except ImportError:
            continue
    found = {c for c in _subclasses(BaseModel) if c.__module__.startswith("tpusim.")}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


MODELS = _models()
SCOPED = [m for m in MODELS if issubclass(m, StepFields | FaultSetKeys | GivenFaultFlags)]
#: What a workload spec says about itself, not about the step or its faults.
META = set(WorkloadSpec.model_fields) | {"kind", "name", "model"}
#: The fields of a step (training or decode, builder or workload) and the fault keys.
FIELDS = (
    set(TrainingArgs.model_fields)
    | set(TrainingWorkload.model_fields)
    | set(DecodeWorkload.model_fields)
    | set(FaultSet.model_fields)
) - META


def _name(model: type) -> str:
    return f"{model.__module__}.{model.__qualname__}"


def _own(model: type) -> set[str]:
    """The fields ``model`` declares itself (not inherited)."""
    return set(inspect.get_annotations(model))


def _default(model: type[BaseModel], field: str) -> object:
    info = model.model_fields[field]
    return None if info.is_required() else info.get_default(call_default_factory=True)


def test_the_scan_sees_the_models_it_checks():
    names = {_name(m) for m in SCOPED}
    assert {_name(TrainingArgs), _name(TrainingWorkload), _name(FaultKeys)} <= names
    assert len(MODELS) > 50


def test_no_field_of_a_step_or_a_fault_key_has_two_defaults():
    """Wherever a model declares a field a step or fault model has with a default,
    the defaults agree (None: not given, the value comes from elsewhere)."""
    clashes = []
    for scoped in SCOPED:
        for field in FIELDS & set(scoped.model_fields):
            mine = _default(scoped, field)
            if mine is None:
                continue
            for other in MODELS:
                if field not in other.model_fields or (_name(other), field) in HOMONYMS:
                    continue
                theirs = _default(other, field)
                if theirs is not None and theirs != mine:
                    clashes.append(f"{field}: {_name(scoped)} {mine!r}, {_name(other)} {theirs!r}")
    assert {"fsdp_prefetch_layers", "weight_dtype", "seed", "routing", "dtype"} <= FIELDS
    assert clashes == []


def test_the_training_fields_are_declared_once():
    """``TrainingArgs`` and the workload are ``TrainingFields``: neither declares one
    of its fields again, and each shared field is the same declaration."""
    shared = set(TrainingFields.model_fields)
    for model in (TrainingArgs, TrainingWorkload, *TrainingWorkload.__mro__[1:]):
        if model in (TrainingFields, StepFields) or not isinstance(model, type):
            continue
        if issubclass(model, BaseModel) and model is not BaseModel:
            assert not (_own(model) & shared) or model.__module__ == "tpusim.config.model", model
    for field in shared:
        args, spec = TrainingArgs.model_fields[field], TrainingWorkload.model_fields[field]
        assert (args.annotation, args.metadata, _default(TrainingArgs, field)) == (
            spec.annotation,
            spec.metadata,
            _default(TrainingWorkload, field),
        ), field
    assert set(TrainingArgs.model_fields) - shared == {"mesh", "host_bandwidth_Bps"}


def test_role_axis_fields_come_from_the_registry_only():
    declared = [
        f"{_name(m)}.{a}"
        for m in MODELS
        for a in _own(m)
        if a in role_fields() or a.endswith("_axis")
    ]
    assert declared == []
    assert TrainingArgs.axis_fields() == TrainingWorkload.axis_fields() == role_fields()
    assert DecodeWorkload.axis_fields() == ("tensor_axis", "expert_axis")


@pytest.mark.parametrize(
    ("fields", "where", "words"),
    [
        ({"tensor_axis": 3}, "tensor_axis", "valid string"),
        ({"tensor_axes": "t"}, "tensor_axes", "Extra inputs are not permitted"),
    ],
)
def test_a_role_axis_field_is_validated_as_a_declared_field_is(fields, where, words):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as info:
        RoleAxes.model_validate(fields)
    (error,) = info.value.errors()
    assert error["loc"] == (where,) and words in error["msg"]


def test_fault_keys_are_declared_in_one_module():
    """Every model that declares a fault key lives in ``tpusim.config.faults`` (the
    serving and goodput kinds' ``seed`` seeds their own draws: not a fault key of a
    kind that simulates a network)."""
    own_seed = {"tpusim.serving.options.ServeSpec", "tpusim.workloads.goodput.GoodputWorkload"}
    # tpusim faults (a Monte Carlo) sweeps a range of counts with a seed of its trials;
    # the command line's --faults is the file to read into FaultFlags.faults
    own_seed |= {"tpusim.cli.faults.FaultsOptions", "tpusim.cli.faults.FaultFlagValues"}
    where = {
        _name(m)
        for m in MODELS
        if _own(m) & set(FAULT_FIELDS) and m.__module__ != "tpusim.config.faults"
    }
    assert where == own_seed
    assert tuple(FaultKeys.model_fields) == FAULT_FIELDS
    assert set(GivenFaultKeys.model_fields) == set(FAULT_FIELDS)
    assert set(FaultSet.model_fields) < set(FAULT_FIELDS)
