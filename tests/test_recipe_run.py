"""`sluice recipe run` (issue 68 item 3): a recipe's jobs in order over one lake, rounds of
translation and training, resumed where a run stopped. The integration test runs the HW-TSC
news zh/en recipe as shipped, on a slice of real Tatoeba text with a tiny model: filter the
bitext and both sides' monolingual text, train, translate both ways (FTST), filter the
synthetic pairs again, mix them in, train a second round. Its first attempt stops at a
missing input after two steps committed; the same command with the input given resumes after
them, and a third run finds everything done."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from jobs.kit.errors import ConfigError
from jobs.lake.plain_query import connect
from jobs.recipes.plan import fill, load_plan
from jobs.recipes.run import Runner

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
RECIPE = REPO / "conf/recipes/hwtsc-wmt21-news/recipe-zh-en.yaml"
SLUICE = REPO / ".venv/bin/sluice"


def test_a_template_the_plan_does_not_know_is_a_config_error(tmp_path: Path) -> None:
    plan = tmp_path / "recipe.yaml"
    plan.write_text("name: r\nrounds:\n  steps:\n"
                    "    - {name: mix, job: mix, args: [--name, '{nmae}-r{round}']}\n"
                    "    - {name: train, train: {config: c.yaml, mixture: 'r{round}'}}\n",
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"unknown \{nmae\}"):
        load_plan(plan, [])


def test_templates_fill_lists_and_name_what_is_missing() -> None:
    values = {"inputs.bitext": ["a.zh", "a.en"], "round": 2, "name": "r", "inputs.mono": None}
    assert fill(["--input", "{inputs.bitext}", "{name}-r{round}"], values) == \
        ["--input", "a.zh", "a.en", "r-r2"]
    with pytest.raises(ConfigError, match=r"\{inputs.mono\} is not set"):
        fill(["--input", "{inputs.mono}"], values)


def slices(where: Path) -> list[str]:
    """The run's inputs: 600 Tatoeba zh-en pairs (Moses files), and Chinese and English
    monolingual text from other Anki lines; a tiny training config, 150 steps a round."""
    zh = (DATA / "tatoeba-zh-en.zh").read_text(encoding="utf-8").splitlines()[:600]
    en = (DATA / "tatoeba-zh-en.en").read_text(encoding="utf-8").splitlines()[:600]
    anki = [line.split("\t") for line in
            (DATA / "train_anki_cmn.tsv").read_text(encoding="utf-8").splitlines()]
    files = {"bitext.zh": zh, "bitext.en": en, "news.zh": [c[1] for c in anki[:150]],
             "news.en": [c[0] for c in anki[150:300]]}
    for name, lines in files.items():
        (where / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    train = where / "train.yaml"
    train.write_text(
        f"extends: {REPO / 'conf/train/tiny-multi-zh-en.yaml'}\n"
        f"data:\n  dev: {{paths: [{DATA / 'train_dev_tatoeba.zh'}, "
        f"{DATA / 'train_dev_tatoeba.en'}], format: moses, tgt_lang: en}}\n"
        "train: {max_steps: 150, save_every: 150, eval_every: 150, log_every: 50}\n",
        encoding="utf-8")
    return ["--set", f"inputs.bitext=[{where / 'bitext.zh'}, {where / 'bitext.en'}]",
            "--set", f"inputs.mono_zh={where / 'news.zh'}",
            "--set", f"vars.train_config={train}", "--set", "rounds.max=1",
            "--set", "rounds.min_gain=-100"]


def recipe(where: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SLUICE), "--master", "local[2]", "recipe", "run", str(RECIPE),
                           *args], cwd=where, capture_output=True, text=True, timeout=1200)


@pytest.mark.integration
def test_a_recipe_runs_end_to_end_and_resumes(tmp_path: Path) -> None:
    common = slices(tmp_path)
    unset = recipe(tmp_path, *common)  # no English text named: refused before any step
    assert unset.returncode == 2 and "inputs.mono_en not set" in unset.stderr, unset.stderr
    assert "$ " not in unset.stderr
    # The English text's file missing: the third step fails, after two committed.
    first = recipe(tmp_path, *common, "--set", f"inputs.mono_en={tmp_path / 'missing.en'}")
    assert first.returncode == 1, first.stderr[-3000:]
    assert "missing.en" in first.stderr and "rerun the same command to resume" in first.stderr

    second = recipe(tmp_path, *common, "--set", f"inputs.mono_en={tmp_path / 'news.en'}")
    assert second.returncode == 0, second.stderr[-4000:]
    for done in ("hwtsc-news-zh-en-filter-bitext", "hwtsc-news-zh-en-filter-mono-zh"):
        assert f"{done}: committed already, skipped" in second.stderr
    record = json.loads((tmp_path / "recipes/hwtsc-news-zh-en/rounds.json").read_text())
    assert [r["round"] for r in record["rounds"]] == [0, 1]
    assert all(isinstance(r["dev_bleu"], float) for r in record["rounds"])
    for round_ in (0, 1):
        assert (tmp_path / f"recipes/hwtsc-news-zh-en/r{round_}/train-ct2/model.bin").is_file()

    lake = connect(tmp_path / "lake")
    runs = {r for (r,) in lake.execute(
        "SELECT run_id FROM sluice.runs WHERE status = 'succeeded'").fetchall()}
    assert {f"hwtsc-news-zh-en-r1-{s}" for s in (
        "translate", "filter-synthetic-zh-en", "filter-synthetic-en-zh", "mix")} <= runs
    # FTST: both directions' synthetic pairs, beam and sampling, made by round 0's model ...
    made = dict(lake.execute(
        "SELECT direction || ' ' || method, count(*) FROM sluice.synthetic "
        "WHERE run_id = 'hwtsc-news-zh-en-r1-translate' GROUP BY 1").fetchall())
    assert set(made) == {"zh-en beam", "zh-en sampling", "en-zh beam", "en-zh sampling"}
    model0 = str(tmp_path / "recipes/hwtsc-news-zh-en/r0/train-ct2")
    assert lake.execute("SELECT DISTINCT model_path FROM sluice.synthetic").fetchall() == \
        [(model0,)]
    # ... filtered again into bitext_clean, and in round 1's mixture beside the bitext
    kept = dict(lake.execute("SELECT pair, count(*) FROM sluice.bitext "
                             "WHERE corpus = 'ftst-r1' AND outcome = 'clean' GROUP BY 1")
                .fetchall())
    assert kept.keys() == {"zh-en", "en-zh"} and all(kept.values()), kept
    sizes = dict(lake.execute("SELECT mixture, count(*) FROM sluice.mixture GROUP BY 1")
                 .fetchall())
    r0, r1 = sizes["hwtsc-news-zh-en-r0"], sizes["hwtsc-news-zh-en-r1"]
    assert r1 == r0 + sum(kept.values()), sizes

    third = recipe(tmp_path, *common, "--set", f"inputs.mono_en={tmp_path / 'news.en'}")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "$ " not in third.stderr  # nothing ran: every step's output is there
    assert third.stderr.count("skipped") == 3 + 2 + 5  # once-steps, round 0, round 1


class ScriptedRunner(Runner):
    """A Runner whose steps only record that they ran, and whose models score `bleu` by round."""

    def __init__(self, plan, bleu: list[float], work: Path) -> None:
        super().__init__(plan, REPO, set(), ["sluice"])
        self.bleu, self.ran = bleu, []
        self.work = work

    def run_job(self, step, round_) -> None:
        self.ran.append((step.name, round_))

    def run_train(self, step, round_) -> None:
        self.ran.append((step.name, round_))
        self.models[step.name] = f"r{round_}"

    def dev_bleu(self, step, round_) -> float:
        return self.bleu[round_]


def test_rounds_stop_when_the_dev_score_stops_rising(tmp_path: Path) -> None:
    plan = load_plan(RECIPE, ["rounds.max=5", "rounds.min_gain=0.5"])
    runner = ScriptedRunner(plan, [10.0, 12.0, 11.5, 15.0], tmp_path)
    record = runner.run()
    # round 2 lost 0.5 (under the 0.5 gain a round must bring): it is the last; round 1 best
    assert [r["round"] for r in record["rounds"]] == [0, 1, 2]
    assert record["best"]["round"] == 1 and record["best"]["models"] == {"train": "r1"}
    assert ("translate", 0) not in runner.ran and ("translate", 1) in runner.ran
    assert [s for s, r in runner.ran if r is None] == [
        "filter-bitext", "filter-mono-zh", "filter-mono-en"]
    assert json.loads((tmp_path / "rounds.json").read_text())["best"]["round"] == 1


def test_round_zero_may_start_from_your_model(tmp_path: Path, monkeypatch) -> None:
    """`--set models.train=DIR`: round 0 translates with your model and trains nothing; with
    no score to compare round 1 against, rounds.max decides."""
    plan = load_plan(RECIPE, ["models.train=models/zh-en-ct2", "rounds.max=1"])
    runner = Runner(plan, REPO, set(), ["sluice"])
    runner.work = tmp_path
    commands: list[list[str]] = []
    monkeypatch.setattr(runner, "call", commands.append)
    monkeypatch.setattr(runner, "committed", lambda run_id: False)
    monkeypatch.setattr(runner, "dev_bleu", lambda step, round_: None if round_ == 0 else 1.0)
    (tmp_path / "r1" / "train" / "checkpoints").mkdir(parents=True)
    (tmp_path / "r1" / "train" / "checkpoints" / "ckpt_00000010.pt").touch()
    with pytest.raises(ConfigError, match="inputs.bitext"):  # an input is still needed
        runner.run()
    runner.plan.inputs |= {"bitext": "b.tsv", "mono_zh": "z", "mono_en": "e"}
    record = runner.run()
    trained = [c for c in commands if "training.train" in c]
    assert len(trained) == 1 and "r1" in " ".join(trained[0])  # round 1 only
    translate = next(c for c in commands if "translate" in c)
    assert "models.zh-en=models/zh-en-ct2" in translate
    assert [r["round"] for r in record["rounds"]] == [0, 1]
    with pytest.raises(ConfigError, match="name no train step"):
        load_plan(RECIPE, ["models.trian=models/x"])


def test_redo_trains_again_from_scratch(tmp_path: Path, monkeypatch) -> None:
    """`--redo train`: an exported model is trained again, and not resumed from the old run's
    last checkpoint (which would stop at once, at max_steps)."""
    plan = load_plan(RECIPE, [])
    runner = Runner(plan, REPO, {"train"}, ["sluice"])
    runner.work = tmp_path
    step = next(s for s in plan.rounds.steps if s.name == "train")
    (tmp_path / "r0" / "train-ct2").mkdir(parents=True)
    (tmp_path / "r0" / "train-ct2" / "model.bin").touch()
    old = tmp_path / "r0" / "train" / "checkpoints" / "ckpt_00000150.pt"
    old.parent.mkdir(parents=True)
    old.touch()
    seen: list[bool] = []

    def call(command: list[str]) -> None:
        if "training.train" in command:
            seen.append(old.exists())
            old.parent.mkdir(parents=True, exist_ok=True)
            (old.parent / "ckpt_00000010.pt").touch()

    monkeypatch.setattr(runner, "call", call)
    runner.run_train(step, 0)
    assert seen == [False]  # trained, the old checkpoints gone first
