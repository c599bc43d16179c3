"""Leave-one-set-out (unirag.evaluation.held_out): each set scored with the variant chosen on the
others, from `unirag eval rag --answers -o` results."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from unirag.errors import UniragError
from unirag.evaluation.cli import eval_app
from unirag.evaluation.held_out import held_out, held_out_markdown, load_runs


def run(path, name, right: dict[str, float], hit3=0.9):
    answers = {label: {"n_answers": 40, "key_correct": share, "keys_shown": 0.7, "abstained": 0.05}
               for label, share in right.items()}
    path.write_text(json.dumps({"questions": f"/data/{name}.jsonl", "metrics": {"hit@3": hit3, "answers": answers}}))
    return path


@pytest.fixture
def three_sets(tmp_path):
    # "tuned" is best on rust alone, and worse than the default on the other two
    return [run(tmp_path / "a.json", "rust", {"default": 0.40, "tuned": 0.60, "other": 0.35}),
            run(tmp_path / "b.json", "pydocs", {"default": 0.50, "tuned": 0.40, "other": 0.55}),
            run(tmp_path / "c.json", "pdf", {"default": 0.30, "tuned": 0.20, "other": 0.30})]


def test_each_set_is_scored_with_the_choice_made_on_the_others(three_sets):
    rows = {r.name: r for r in held_out(load_runs(three_sets))}
    assert list(rows) == ["rust", "pydocs", "pdf"]
    # rust: chosen on pydocs + pdf, where "other" (0.425 mean) beats the default (0.40)
    assert (rows["rust"].chosen, rows["rust"].held_out) == ("other", 0.35)
    assert (rows["rust"].best, rows["rust"].in_set) == ("tuned", 0.60)  # what tuning on rust itself says
    # pydocs: on rust + pdf, "tuned" (0.40) beats "other" (0.325) and the default (0.35)
    assert (rows["pydocs"].chosen, rows["pydocs"].held_out) == ("tuned", 0.40)
    # pdf: on rust + pydocs, "tuned" (0.50) beats "other" and the default (0.45 each)
    assert (rows["pdf"].chosen, rows["pdf"].held_out) == ("tuned", 0.20)
    assert rows["pdf"].default == 0.30 and rows["pdf"].hit3 == 0.9 and rows["pdf"].ceiling == 0.7
    table = held_out_markdown(list(rows.values()))
    assert "| rust | 40 | 40.0 | other | 35.0 | tuned | 60.0 | 70.0 | 90.0 | 5.0 |" in table
    assert "| mean of 3 sets | | 40.0 | | 31.7 | | 48.3 |" in table


def test_a_tie_goes_to_the_default(tmp_path):
    runs = load_runs([run(tmp_path / "a.json", "a", {"tuned": 0.5, "default": 0.5}),
                      run(tmp_path / "b.json", "b", {"tuned": 0.5, "default": 0.5})])
    assert {r.chosen for r in held_out(runs)} == {"default"}


def test_bad_inputs_are_one_line_errors(tmp_path, three_sets):
    with pytest.raises(UniragError, match="at least two question sets"):
        load_runs(three_sets[:1])
    (tmp_path / "x.json").write_text('{"metrics": {}}')
    with pytest.raises(UniragError, match="not a `unirag eval rag --answers N -o FILE` result"):
        load_runs([three_sets[0], tmp_path / "x.json"])
    with pytest.raises(UniragError, match="variants .* differ"):
        load_runs([three_sets[0], run(tmp_path / "d.json", "d", {"default": 0.1})])
    with pytest.raises(UniragError, match="given twice"):
        load_runs([three_sets[0], three_sets[0]])


def test_a_labelled_run_joins_its_sets_variants(tmp_path, three_sets):
    other = [run(tmp_path / f"{name}-l.json", name, {"default": share, "tuned": 0.0})
             for name, share in (("rust", 0.5), ("pydocs", 0.6), ("pdf", 0.1))]
    runs = load_runs([*three_sets, *(f"layer29={path}" for path in other)])
    assert list(runs["rust"]["metrics"]["answers"]) == ["default", "tuned", "other", "layer29", "layer29/tuned"]
    rows = {r.name: r for r in held_out(runs)}
    # pdf: chosen on rust + pydocs, where layer29 (0.55) beats every unlabelled variant
    assert (rows["pdf"].chosen, rows["pdf"].held_out) == ("layer29", 0.1)
    with pytest.raises(UniragError, match="no unlabelled run of the set 'rust'"):
        load_runs([*three_sets[1:], f"layer29={other[0]}"])
    with pytest.raises(UniragError, match="variants .* differ"):
        load_runs([*three_sets, f"layer29={other[0]}"])
    with pytest.raises(UniragError, match="has a variant 'x' already"):
        load_runs([*three_sets, f"x={other[0]}", f"x={other[0]}"])


def test_eval_held_out_command_prints_and_writes_the_table(three_sets, tmp_path):
    out = tmp_path / "held_out.md"
    result = CliRunner().invoke(eval_app, ["held-out", *map(str, three_sets), "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() in result.output and "| pydocs | 40 | 50.0 | tuned | 40.0 |" in out.read_text()
