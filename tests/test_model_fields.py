"""Model fields declared once (tpusim.config.model.ModelShape): the workloads and the
training step's arguments take every shape field from it, with its type, bounds and
default; no builder or workload module re-declares one or lists their names again;
a preset's builder fields are exactly the shape's.

Oracles: the field lists written out here by hand (what a transformer preset has);
the source of the modules read as syntax trees (a re-declaration or a literal list of
names is visible there whatever it computes).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tpusim.config.loader import load_model
from tpusim.config.model import NEUTRAL_SHAPE, SHAPE_FIELDS, ModelShape
from tpusim.program.builders.args import TrainingArgs
from tpusim.program.builders.decode import MODEL_FIELDS
from tpusim.workloads.decode_step import DecodeWorkload
from tpusim.workloads.training_step import TrainingWorkload

PACKAGE = Path(__file__).resolve().parents[1] / "tpusim"
READERS = (
    "program/builders/args.py",
    "program/builders/decode.py",
    "program/builders/layer_shape.py",
    "workloads/spec.py",
    "workloads/training_step.py",
    "workloads/decode_step.py",
)
SIZES = ("layers", "d_model", "d_ff", "heads", "head_dim")
FEATURES = {
    "kv_heads": None,
    "vocab": 0,
    "mlp": "plain",
    "attention": "gqa",
    "q_lora_rank": 0,
    "kv_lora_rank": 0,
    "rope_head_dim": 0,
    "experts": 0,
    "top_k": 2,
    "expert_d_ff": None,
    "shared_experts": 0,
    "dense_layers": 0,
}


def test_the_shape_has_the_sizes_and_features_with_neutral_defaults():
    assert (*SIZES, *FEATURES) == SHAPE_FIELDS
    assert NEUTRAL_SHAPE == FEATURES == ModelShape.neutral()


@pytest.mark.parametrize("kind", [TrainingWorkload, DecodeWorkload, TrainingArgs])
def test_every_reader_takes_every_shape_field_as_declared(kind):
    for name, declared in ModelShape.model_fields.items():
        field = kind.model_fields[name]
        assert field.annotation == declared.annotation, name
        assert field.default == declared.default and field.metadata == declared.metadata, name


def test_the_plain_decode_builder_takes_the_sizes_and_kv_heads_only():
    assert set(MODEL_FIELDS) == set(FEATURES) - {"kv_heads"} | {"expert_axis"}
    assert all(MODEL_FIELDS[k] == FEATURES[k] for k in MODEL_FIELDS if k in FEATURES)


@pytest.mark.parametrize("name", ["llama-3.1-8b", "deepseek-v3", "mixtral-8x7b"])
def test_a_presets_builder_fields_are_the_shape(name):
    fields = load_model(name).builder_fields()
    assert tuple(fields) == SHAPE_FIELDS
    assert ModelShape.model_validate(fields).model_dump() == fields


def _class_fields(tree: ast.Module) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    out.add(item.target.id)
    return out


def _name_lists(tree: ast.Module) -> list[set[str]]:
    """The shape-field names of every literal tuple, list, set or dict key list that
    names more than two of them."""
    out = []
    for node in ast.walk(tree):
        items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
        if not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) or items is None:
            continue
        names = {i.value for i in items if isinstance(i, ast.Constant) and i.value in FEATURES}
        if len(names) > 2:
            out.append(names)
    return out


@pytest.mark.parametrize("module", READERS)
def test_no_reader_redeclares_a_workload_shape_field_or_lists_their_names(module):
    tree = ast.parse((PACKAGE / module).read_text())
    if module.startswith("workloads/") or module.endswith("args.py"):
        assert _class_fields(tree) & set(ModelShape.model_fields) == set()
    assert _name_lists(tree) == []


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        (TrainingWorkload, {"kind": "training_step", "seq": 64, "batch": 8}),
        (DecodeWorkload, {"kind": "decode_step", "batch": 8, "context": 64}),
    ],
)
def test_a_preset_fills_every_shape_field_of_a_workload(kind, extra):
    """Every shape field of the preset reaches the workload (and its builder's
    keywords) with no list of names between them."""
    spec = kind.model_validate({"name": "w", "model": "deepseek-v3", "mesh": {"x": 1}} | extra)
    preset = load_model("deepseek-v3").builder_fields()
    assert {k: getattr(spec, k) for k in SHAPE_FIELDS} == preset
    assert ModelShape.shape_of(spec.builder_fields()) == preset
