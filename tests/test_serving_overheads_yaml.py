"""Serving overheads are data (configs/servers/*.yaml, with grade and fit_on per
number) and ``tpusim calibrate --serving`` writes that YAML: the round trip.

* every shipped profile written back by :func:`profile_data` loads to the same profile
  (its units written out: ``8.707 ms``);
* a fit written by :func:`write_profiles` loads back with the fitted host time (to the
  4 significant digits the file keeps) and HBM efficiency, graded ``calibrated``
  naming the figures, other chips' terms and the sampler passes as shipped, and the
  iteration costs take the written terms.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tpusim.serving.overheads import IterationOverheads
from tpusim.serving.servers import load_server, profile_data, shipped_servers
from tpusim.serving.service import Deployment, Service
from tpusim.validation.serving_fit import Fitted, write_profiles

#: A shipped system of each chip generation a shipped profile names.
SYSTEM_OF = {"ironwood": "ironwood-256", "v6e": "v6e-pod", "tpu8i": "tpu8i-pod"}


@pytest.mark.parametrize("name", list(shipped_servers()))
def test_a_shipped_profile_written_back_loads_to_the_same_profile(name, tmp_path):
    shipped = load_server(name)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(profile_data(shipped), sort_keys=False))
    assert load_server(str(path)) == shipped
    assert "ms" in path.read_text()  # the host time keeps its unit


def test_a_written_fit_loads_back_graded_and_reaches_the_overheads(tmp_path):
    shipped = load_server("vllm-tpu-inference")
    fit = Fitted(
        "vllm-tpu-inference",
        IterationOverheads(0.012345, 0.81, 0.0),
        ("fig-a", "fig-b"),
        ("v6e", "ironwood"),
        3,
        0.1,
    )
    (path,) = write_profiles(tmp_path, [fit])
    assert path == tmp_path / "vllm-tpu-inference.yaml"
    assert path.read_text().startswith("# Server profile vllm-tpu-inference, written by")
    written = load_server(str(path))
    terms = written.terms
    assert terms.host_time.value == pytest.approx(0.01235, rel=1e-12)  # 12.35 ms
    assert terms.hbm_efficiency.value == 0.81
    assert terms.host_time.grade == terms.hbm_efficiency.grade == "calibrated"
    assert terms.host_time.fit_on == terms.hbm_efficiency.fit_on == ("fig-a", "fig-b")
    assert terms.sampling_passes == shipped.terms.sampling_passes
    assert written.measured_chips == ("v6e", "ironwood")
    # the fit's host time and HBM efficiency; the terms it does not fit (the sampler
    # passes, the derived MoE terms) as shipped
    shipped_o = shipped.overheads("v6e")
    expected = IterationOverheads(
        0.01235, 0.81, shipped_o.sampling_passes, shipped_o.expert_efficiency, 0.0,
        shipped_o.moe_layer_s, shipped_o.moe_token_s,
    )  # fmt: skip
    assert terms.moe_token_time == shipped.terms.moe_token_time
    for chip in ("v6e", "ironwood", "tpu8i"):  # shared by every chip, measured or not
        assert written.overheads(chip) == expected
    service = Service(Deployment(SYSTEM_OF["tpu8i"], "llama-3.1-8b", tp=1, server=str(path)))
    assert service.costs.overheads == expected


def test_a_fit_at_a_bound_or_refused_says_so_in_the_file(tmp_path):
    at_bound = Fitted(
        "vllm-tpu-inference",
        IterationOverheads(0.008, 1.0, 2.0),
        ("f",),
        ("v6e",),
        1,
        0.1,
        at_bound=("hbm_efficiency 1",),
    )
    (path,) = write_profiles(tmp_path, [at_bound])
    note = load_server(str(path)).terms.hbm_efficiency.note
    assert "at the bound of its grid (hbm_efficiency 1)" in note
    shipped = load_server("vllm-tpu-inference")
    refused = Fitted(
        "vllm-tpu-inference",
        shipped.overheads("v6e"),
        ("f",),
        ("v6e",),
        1,
        0.1,
        shipped_error=0.05,
        fitted_error=0.09,
        kept=False,
    )
    (path,) = write_profiles(tmp_path / "b", [refused])
    assert "kept as shipped: the fit raised its figures' error" in path.read_text()
    assert load_server(str(path)).terms == shipped.terms


def test_a_chip_s_own_term_overrides_the_shared_one(tmp_path):
    data = profile_data(load_server("vllm-tpu-inference"))
    data["chips"] = {
        "ironwood": {"hbm_efficiency": {"value": 0.55, "grade": "assumption", "note": "n"}}
    }
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    profile = load_server(str(path))
    assert profile.overheads("ironwood").hbm_efficiency == 0.55
    assert profile.overheads("ironwood").host_s == profile.terms.host_time.value
    assert profile.overheads("v6e").hbm_efficiency == profile.terms.hbm_efficiency.value


@pytest.mark.parametrize("name", sorted(shipped_servers()))
def test_a_calibrated_term_names_its_profiles_fit_figures_only(name):
    """Every calibrated term of a shipped profile is fitted on its own profile's
    ``split: fit`` figures, all of them and no other (never a holdout figure, never
    another server's: the two Ironwood servers, default and batched attention kernel,
    keep apart); a term its figures do not identify says whose fit it borrowed."""
    from tpusim.validation.serving_figures import load_figures

    figures = load_figures()

    def fit_figures(server: str) -> tuple[str, ...]:
        return tuple(f.id for f in figures if f.server == server and f.split == "fit")

    held = {f.id for f in figures if f.split == "holdout"}
    for term_name, term in load_server(name).terms:
        if getattr(term, "grade", None) == "calibrated":
            borrowed = re.match(r"borrowed from ([\w-]+)'s fit", term.note)
            assert term.fit_on == fit_figures(borrowed[1] if borrowed else name), term_name
            assert not held & set(term.fit_on)
            if borrowed:  # a copy: it must be the lender's current value, never a stale one
                assert term.value == getattr(load_server(borrowed[1]).terms, term_name).value


@pytest.mark.parametrize(
    ("system", "server"),
    [("v6e-pod", "vllm-tpu-inference-batched-rpa"), ("v6e-pod", "vllm-tpu-inference")],
)
def test_serve_s_text_names_the_profile_and_whether_its_terms_are_borrowed(capsys, system, server):
    """Issue 41: a chip with no figure of the profile says so, with the profile it
    borrowed, in the text as in the JSON row (the oracle: the profile's
    ``measured_chips``)."""
    from tests.helpers import run

    code, out, err = run(capsys, "serve", system, "--model", "llama-3.1-8b", "--tp", "1",
                         "--rate", "2", "--requests", "20", "--server", server)  # fmt: skip
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.split()[:1] == ["server"])
    fitted = ", ".join(load_server(server).measured_chips)
    if "v6e" in load_server(server).measured_chips:
        assert line.split(None, 1)[1] == f"{server} terms fitted on {fitted}"
    else:
        assert f"no serving figure on v6e: borrowed {server} terms fitted on {fitted}" in line
