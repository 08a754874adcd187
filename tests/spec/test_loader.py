"""Loading: extends, overrides, positions, params.yaml round trips."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rmsweb.spec import ExperimentSpec, SpecErrors, load_experiment, load_from_params
from rmsweb.spec.loader import apply_overrides, load_located


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_every_shipped_experiment_validates(repo_root: Path) -> None:
    files = sorted((repo_root / "experiments").rglob("*.yaml"))
    assert files
    for f in files:
        spec = load_experiment(f)
        assert spec.name == f.stem, "experiment files are named after their experiment"


def test_experiment_files_start_with_schema_and_run_command(repo_root: Path) -> None:
    for f in sorted((repo_root / "experiments").rglob("*.yaml")):
        first, second = f.read_text().splitlines()[:2]
        assert first == "# yaml-language-server: $schema=../schemas/experiment.schema.json", f
        assert second.startswith("# Run: "), f


def test_extends_deep_merges_and_lists_replace(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")  # a project: sub/ may extend ../base.yaml
    write(
        tmp_path,
        "base.yaml",
        """
        name: base
        suite: {kind: miniwob, tasks: [click-button, enter-text], max_steps: 7}
        sft: {max_steps: 100, batch_size: 8}
        """,
    )
    child = write(
        tmp_path,
        "sub/child.yaml",
        """
        extends: ../base.yaml
        name: child
        suite: {tasks: [click-link]}
        sft: {batch_size: 16}
        """,
    )
    spec = load_experiment(child)
    assert spec.suite.tasks == ["click-link"]  # lists replace
    assert spec.suite.max_steps == 7  # inherited
    assert (spec.sft.max_steps, spec.sft.batch_size) == (100, 16)  # deep merge


def test_changing_kind_replaces_the_section(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", "name: base\nrl: {kind: salvage_ds, anchor_weight: 0.3}\n")
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\nrl: {kind: grpo}\n")
    spec = load_experiment(child)
    assert spec.rl.kind == "grpo"
    same_kind = write(tmp_path, "c2.yaml", "extends: base.yaml\nname: c2\nrl: {kind: salvage_ds}\n")
    assert load_experiment(same_kind).rl.anchor_weight == 0.3


def test_positions_of_inherited_keys_point_at_the_parent(tmp_path: Path) -> None:
    write(tmp_path, "base.yaml", "name: base\nsft:\n  max_steps: 100\n  batch_size: 8\n")
    child = write(tmp_path, "child.yaml", "extends: base.yaml\nname: child\nsft: {batch_size: 4}\n")
    located = load_located(child)
    assert located.positions[("sft", "max_steps")].file.endswith("base.yaml")
    assert located.positions[("sft", "max_steps")].line == 3
    assert located.positions[("sft", "batch_size")].file.endswith("child.yaml")


def test_overrides_layer_last(tmp_path: Path) -> None:
    spec_file = write(
        tmp_path, "x.yaml", "name: x\nrl: {kind: salvage_ds}\neval: {policies: [{kind: expert}]}\n"
    )
    spec = load_experiment(
        spec_file,
        ["rl.anchor_weight=0.75", "suite.tasks=[click-tab]", "eval.policies.0.name=gold"],
    )
    assert spec.rl.anchor_weight == 0.75
    assert spec.suite.tasks == ["click-tab"]
    assert spec.eval.policies[0].name == "gold"


def test_override_of_a_missing_list_item_is_an_error(tmp_path: Path) -> None:
    spec_file = write(tmp_path, "x.yaml", "name: x\neval: {policies: [{kind: random}]}\n")
    with pytest.raises(SpecErrors, match="no such list item"):
        apply_overrides(load_located(spec_file), ["eval.policies.5.name=a"])


def test_all_errors_reported_together(tmp_path: Path) -> None:
    spec_file = write(
        tmp_path, "x.yaml", "name: x\nseed: -1\nsft: {max_steps: 0}\nrl: {kind: grpo, epsilon: 2}\n"
    )
    with pytest.raises(SpecErrors) as exc:
        load_experiment(spec_file)
    keys = {e.key for e in exc.value.errors}
    assert {"seed", "sft.max_steps", "rl.epsilon"} <= keys


def test_params_yaml_round_trip_with_dvc_style_floats(tmp_path: Path) -> None:
    spec = ExperimentSpec(name="e1")
    data = {"e1": spec.model_dump(mode="json")}
    # `dvc exp run -S` writes floats like 3e-06, which PyYAML 1.1 reads back as strings.
    data["e1"]["sft"]["learning_rate"] = "3e-06"
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(data))
    loaded = load_from_params(params, "e1")
    assert loaded.sft.learning_rate == pytest.approx(3e-6)
    with pytest.raises(SpecErrors, match="no experiment 'nope'"):
        load_from_params(params, "nope")


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    group=st.sampled_from([2, 4, 8]),
    states=st.integers(1, 16),
    anchor=st.floats(0, 5, allow_nan=False),
    lo=st.floats(0, 1, allow_nan=False),
    hi=st.floats(0, 1, allow_nan=False),
)
def test_dump_validate_round_trip(
    seed: int, group: int, states: int, anchor: float, lo: float, hi: float
) -> None:
    lo, hi = min(lo, hi), max(lo, hi)
    spec = ExperimentSpec.model_validate(
        {
            "name": "prop",
            "seed": seed,
            "rl": {
                "kind": "salvage_ds",
                "group_size": group,
                "batch_size": group * states,
                "anchor_weight": anchor,
                "competence_min": lo,
                "competence_max": hi,
            },
        }
    )
    dumped = yaml.safe_dump(spec.model_dump(mode="json"))
    assert ExperimentSpec.model_validate(yaml.safe_load(dumped)) == spec


def test_committed_schema_is_current(repo_root: Path) -> None:
    from rmsweb.spec.schema import render_schema

    committed = (repo_root / "schemas" / "experiment.schema.json").read_text()
    assert committed == render_schema(), "run `rmsweb schema` and commit"


def test_scalars_follow_yaml_1_2() -> None:
    from rmsweb.spec.loader import parse_yaml_located

    text = (
        "name: x\na: yes\nb: 3e-06\nc: 012\nd: 2001-12-14\ne: .inf\nf: 0x1F\ng: 0o17\n"
        "h: True\ni: ~\nj: off\nk: 1_000\nl: '='\nm: =\n"
    )
    data = parse_yaml_located(text, "s.yaml").data
    assert data["a"] == "yes" and data["j"] == "off"  # YAML 1.1 booleans stay text
    assert data["b"] == pytest.approx(3e-6)  # as `dvc exp run -S` writes floats
    assert data["c"] == 12 and data["f"] == 31 and data["g"] == 15  # 012 is not octal
    assert data["d"] == "2001-12-14" and data["k"] == "1_000" and data["m"] == "="
    assert data["e"] == float("inf") and data["h"] is True and data["i"] is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nseed: 1e999\n", "too large"),
        ("name: x\nseed: 99999999999999999999\n", "out of range"),
        ("name: x\nseed: !!int abc\n", "'abc' is not an integer"),
        ("name: x\nseed: !!bool yes\n", "write true or false"),
        ("name: x\n? [a, b]\n: 1\n", "key a list is not text"),
        ("name: x\n1: one\n", "key '1' is not text"),
        ("name: x\na: !!binary aGVsbG8=\n", "tag !!binary is not allowed"),
        ("name: x\na: !!set {b: null}\n", "tag !!set is not allowed"),
        ("name: x\na: {<<: !!python/object:x {c: 1}}\n", "tag !!python/object:x"),
        ("name: x\na: {<<: 3}\n", "expected a mapping or list of mappings for merging"),
        ("\ufeffname: x\n\x07: 1\n", "character U+0007 is not allowed"),
    ],
)
def test_hostile_scalars_and_tags_are_positioned_errors(text: str, message: str) -> None:
    from rmsweb.spec.loader import parse_yaml_located

    with pytest.raises(SpecErrors) as exc:
        parse_yaml_located(text, "h.yaml")
    assert any(message in e.message for e in exc.value.errors), str(exc.value)
    assert all(e.pos.line >= 2 for e in exc.value.errors), str(exc.value)


def test_merge_keys_are_overridden_by_explicit_keys(tmp_path: Path) -> None:
    spec_file = write(
        tmp_path,
        "m.yaml",
        """
        name: m
        eval:
          policies:
            - &sft {kind: checkpoint, name: sft, source: sft}
            - <<: *sft
              name: rl
              source: rl
        """,
    )
    located = load_located(spec_file)
    assert [p["name"] for p in located.data["eval"]["policies"]] == ["sft", "rl"]
    assert located.positions[("eval", "policies", 1, "name")].line == 7


def test_overrides_are_read_like_spec_files(tmp_path: Path) -> None:
    spec_file = write(tmp_path, "x.yaml", "name: x\n")
    assert load_experiment(spec_file, ["sft.learning_rate=1e-5"]).sft.learning_rate == 1e-5
    with pytest.raises(SpecErrors, match="only true/false are booleans"):
        load_experiment(spec_file, ["suite.train.count=yes"])
    with pytest.raises(SpecErrors) as exc:
        load_experiment(spec_file, ["seed=!!python/object/apply:os.system [id]"])
    assert "<override 1: seed=" in str(exc.value) and "is not allowed" in str(exc.value)
    with pytest.raises(SpecErrors, match="expected a list"):
        load_experiment(spec_file, ["eval.policies.²=x"])  # "²".isdigit(), int("²") fails
    with pytest.raises(SpecErrors, match="deeper than 32"):
        load_experiment(spec_file, [".".join(["a"] * 5000) + "=1"])


def test_a_long_extends_chain_is_an_error_not_a_recursion_error(tmp_path: Path) -> None:
    write(tmp_path, "s0.yaml", "name: s0\n")
    for i in range(1, 40):
        write(tmp_path, f"s{i}.yaml", f"extends: s{i - 1}.yaml\nname: s{i}\n")
    assert load_experiment(tmp_path / "s10.yaml").name == "s10"
    with pytest.raises(SpecErrors, match="extends chain is longer than 16"):
        load_experiment(tmp_path / "s39.yaml")


def test_extends_stays_inside_the_project_and_errors_name_the_spec_line(tmp_path: Path) -> None:
    """`extends:` reads only files of the spec's repository (or its folder outside one):
    an absolute path, a `..` chain or a symbolic link out of it is refused at the
    spec's own `extends` line, and never read."""
    project = tmp_path / "project"
    (project / "experiments").mkdir(parents=True)
    (project / "pyproject.toml").write_text("")
    outside = write(tmp_path, "outside.yaml", "name: outside\nsft: {batch_size: 4}\n")
    (project / "experiments" / "link.yaml").symlink_to(outside)
    cases = {
        "abs.yaml": (f"extends: {outside}\n", "is an absolute path"),
        "home.yaml": ("extends: ~/x.yaml\n", "is an absolute path"),
        "up.yaml": ("extends: ../../outside.yaml\n", "leads outside the project"),
        "etc.yaml": ("extends: " + "../" * 30 + "etc/passwd\n", "leads outside the project"),
        "via_link.yaml": ("extends: link.yaml\n", "leads outside the project"),
    }
    for name, (text, message) in cases.items():
        spec = write(project / "experiments", name, "# a comment\n" + text + "name: x\n")
        with pytest.raises(SpecErrors) as info:
            load_experiment(spec)
        (error,) = info.value.errors
        assert (error.pos.file, error.pos.line, error.key) == (str(spec), 2, "extends"), name
        assert message in error.message, (name, error.message)
    # inside the project, also from a subfolder and by a link that stays inside: fine
    write(project, "base.yaml", "name: base\nsft: {batch_size: 4}\n")
    (project / "experiments" / "inner.yaml").symlink_to(project / "base.yaml")
    for text in ("extends: ../base.yaml\n", "extends: inner.yaml\n"):
        spec = write(project / "experiments", "ok.yaml", text + "name: ok\n")
        assert load_experiment(spec).sft.batch_size == 4


def test_errors_reading_a_parent_name_the_extends_line(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    write(tmp_path, "broken.yaml", "name: broken\nsft: [unclosed\n")
    write(tmp_path, "empty.yaml", "# nothing\n")
    write(tmp_path, "mid.yaml", "extends: broken.yaml\nname: mid\n")
    for parent, where in (("broken.yaml", "broken.yaml"), ("empty.yaml", "empty.yaml")):
        child = write(tmp_path, "child.yaml", f"name: child\nextends: {parent}\n")
        with pytest.raises(SpecErrors) as info:
            load_experiment(child)
        for error in info.value.errors:
            assert error.pos.file.endswith(where)  # the parent's own line ...
            assert error.message.endswith(f"(in the spec extended at {child}:2:1)")  # ... and ours
    child = write(tmp_path, "child.yaml", "extends: mid.yaml\nname: child\n")
    with pytest.raises(SpecErrors) as info:
        load_experiment(child)
    assert str(info.value).endswith(
        f"(in the spec extended at {tmp_path / 'mid.yaml'}:1:1)"
        f" (in the spec extended at {child}:1:1)"
    )
