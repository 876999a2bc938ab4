"""Run a recipe end to end: `sluice [SPARK OPTIONS] recipe run PLAN [--set K=V] [--redo STEP]`.

Each step is a process, as a user would type it: a `sluice` job (spark-submit with the options
given before `recipe`) with a fixed run id, `<name>-<step>` or `<name>-r<round>-<step>`, or
training and export (`python -m training.train`, `training.export`). A step whose output is
there is not run again: a job whose run id has committed to the lake (a local lake is asked
directly; a remote one answers the job itself, a retry of a committed run being a no-op), a
model whose export is written. So a run cut short resumes where it stopped, with the same
command. Rounds repeat until the dev BLEU of the scoring model gains less than
`rounds.min_gain` (the seed papers' "until the two models converge"), or `rounds.max`; each
round's scores are in `<work>/<name>/rounds.json`, with the best round's model. Round 0 may
start from your model (`models:` in the plan) instead of training one."""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from jobs.kit.errors import EXIT_USAGE, ConfigError
from jobs.lake.plain_query import connect, local_root
from jobs.recipes.plan import RecipePlan, Step, fill, load_plan

# spark-submit options given before `recipe` (the launcher passes them on): every job step's.
SPARK_OPTIONS_ENV = "SLUICE_RECIPE_SPARK_OPTIONS"


def say(message: str) -> None:
    print(f"recipe: {message}", file=sys.stderr, flush=True)


class Runner:
    def __init__(self, plan: RecipePlan, here: Path, redo: set[str], sluice: list[str]) -> None:
        self.plan, self.here, self.redo, self.sluice = plan, here, redo, sluice
        self.work = Path(plan.work).resolve() / plan.name  # executors need a full path
        self.models: dict[str, str] = {}  # train step -> the last round's exported model

    # -- what is done -----------------------------------------------------------------------
    def committed(self, run_id: str) -> bool:
        root = local_root(self.plan.lake)
        if root is None or not (root / "tables" / "runs").is_dir():
            return False  # a remote lake: the job itself says a committed run is done
        found = connect(root).execute(
            "SELECT count(*) FROM sluice.runs WHERE run_id = ? AND status = 'succeeded'",
            [run_id]).fetchone()
        return bool(found and found[0])

    def model_dir(self, step: Step, round_: int) -> Path:
        return self.work / f"r{round_}" / f"{step.name}-ct2"

    # -- running ----------------------------------------------------------------------------
    def run_id(self, step: Step, round_: int | None) -> str:
        return f"{self.plan.name}-{step.name}" if round_ is None else \
            f"{self.plan.name}-r{round_}-{step.name}"

    def values(self, round_: int) -> dict:
        return self.plan.variables(str(self.here), round_) | {
            f"model.{name}": path for name, path in self.models.items()}

    def call(self, command: list[str]) -> None:
        say("$ " + shlex.join(command))
        started = time.monotonic()
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            raise StepFailed(f"exit {done.returncode}: {shlex.join(command)}")
        say(f"done in {time.monotonic() - started:.0f} s")

    def run_job(self, step: Step, round_: int | None) -> None:
        run_id = self.run_id(step, round_)
        if self.committed(run_id):
            say(f"{run_id}: committed already, skipped")
            return
        args = fill(step.args, self.values(round_ or 0))
        self.call([*self.sluice, step.job or "", *args, "--lake", self.plan.lake,
                   "--run-id", run_id])

    def run_train(self, step: Step, round_: int) -> None:
        assert step.train is not None
        if round_ == 0 and step.name in self.plan.models:
            self.models[step.name] = self.plan.models[step.name]
            say(f"round 0: {step.name} is your model, {self.models[step.name]}")
            return
        out = self.model_dir(step, round_)
        run_dir = self.work / f"r{round_}" / step.name
        if (out / "model.bin").is_file() and step.name not in self.redo:
            say(f"{out}: exported already, skipped")
        else:
            if step.name in self.redo:  # training resumes from its checkpoints: start afresh
                shutil.rmtree(run_dir, ignore_errors=True)
            values = self.values(round_)
            train = step.train
            sets = [f"run_dir={run_dir}", *fill(train.set, values)]
            self.call([sys.executable, "-m", "training.train",
                       "--config", fill([train.config], values)[0],
                       "--mixture", fill([train.mixture], values)[0], "--lake", self.plan.lake,
                       *[a for s in sets for a in ("--set", s)]])
            last = sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1]
            self.call([sys.executable, "-m", "training.export", "--force",
                       "--checkpoint", str(last), "--out", str(out)])
        self.models[step.name] = str(out)

    def dev_bleu(self, step: str, round_: int) -> float | None:
        """The last dev evaluation's BLEU of the round's model (training's dev_log.csv)."""
        log = self.work / f"r{round_}" / step / "dev_log.csv"
        rows = list(csv.DictReader(log.open(encoding="utf-8"))) if log.is_file() else []
        return float(rows[-1]["bleu"]) if rows and rows[-1].get("bleu") else None

    def run(self) -> dict:
        for step in self.plan.steps:
            self.run_job(step, None) if step.job else self.run_train(step, 0)
        scores: list[dict] = []
        rounds = self.plan.rounds
        for round_ in range(rounds.max + 1):
            for step in rounds.steps:
                if step.from_round <= round_:
                    self.run_job(step, round_) if step.job else self.run_train(step, round_)
            bleu = self.dev_bleu(self.plan.scoring_step, round_)
            scores.append({"round": round_, "dev_bleu": bleu, "models": dict(self.models)})
            say(f"round {round_}: dev BLEU {bleu}")
            before = scores[-2]["dev_bleu"] if round_ else None
            # No score to compare (no dev set, or round 0 was your model): rounds.max decides.
            if bleu is not None and before is not None and bleu - before < rounds.min_gain:
                say(f"round {round_} gained less than {rounds.min_gain} BLEU: stopping")
                break
        best = max(scores, key=lambda s: s["dev_bleu"] if s["dev_bleu"] is not None else -1)
        record = {"recipe": self.plan.name, "rounds": scores, "best": best}
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "rounds.json").write_text(json.dumps(record, indent=2) + "\n",
                                               encoding="utf-8")
        say(f"best: round {best['round']} (dev BLEU {best['dev_bleu']}): {best['models']}")
        return record


class StepFailed(Exception):
    pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="sluice recipe", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a recipe's plan, resuming where it stopped")
    run.add_argument("plan", type=Path, help="conf/recipes/<system>/recipe-*.yaml")
    run.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                     help="a plan value, e.g. inputs.bitext=data.tsv or rounds.max=2")
    run.add_argument("--redo", action="append", default=[], metavar="STEP",
                     help="train this train step again in every round it runs (a lake step "
                          "is redone under a new recipe name: its run ids are the name's)")
    args = p.parse_args(argv)
    try:
        plan = load_plan(args.plan, args.set)
        plan.check_inputs()
    except ConfigError as err:
        print(f"sluice: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    sluice = [str(Path(sys.executable).parent / "sluice"),
              *shlex.split(os.environ.get(SPARK_OPTIONS_ENV, ""))]
    runner = Runner(plan, args.plan.resolve().parent, set(args.redo), sluice)
    try:
        runner.run()
    except ConfigError as err:
        print(f"sluice: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except StepFailed as err:
        print(f"sluice: recipe {plan.name}: a step failed ({err}); rerun the same command to "
              "resume", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
