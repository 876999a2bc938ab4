"""The seed systems' recipes (conf/recipes/, README "Recipes"): every file is a valid config
of its job, each names its jobs in order, and each recipe's filter (and the triangular
recipe's monolingual run and curriculum) runs on real text of its languages, as printed but
for the inputs and the models the user provides: LaBSE's weights are replaced by the bundled
encoder's (the recipe's thresholds kept), the LMs are trained here with jobs/train_lm.py."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs.filtering.config import load_config
from jobs.filtering.job import main as filter_main
from jobs.mixing.config import load_mix_config
from jobs.mixing.job import main as mix_main
from jobs.selection.config import load_select_config
from jobs.train_lm import main as train_lm_main
from jobs.translation.config import load_translate_config

REPO = Path(__file__).resolve().parent.parent
RECIPES = REPO / "conf" / "recipes"
DATA = REPO / "tests" / "data"
NAMES = ["didi-wmt20-zh-en", "hwtsc-wmt21-multilingual", "hwtsc-wmt21-news",
         "hwtsc-wmt21-triangular-ru-zh", "zenghuimt-wmt21-zh-en"]
DB = "recipes"
# LaBSE's weights are the user's: the bundled encoder stands in, with the recipe's thresholds.
NO_LABSE = ["embedding.encoders.labse.backend=use",
            "embedding.encoders.labse.model=models/use-multilingual-v3"]


def test_one_recipe_per_seed_system_and_the_readme_lists_each() -> None:
    assert sorted(p.name for p in RECIPES.iterdir() if p.is_dir()) == NAMES
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Recipes", 1)[1].split("\n## ", 1)[0]
    for name in NAMES:
        assert f"conf/recipes/{name}/" in section, name


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recipe_file_is_a_valid_config_of_its_job(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Recipe: ")  # the system, the paper, its words
    if path.stem in ("filter", "mono"):
        pair = [] if re.search(r"^(pair|lang):", text, re.M) else ["pair=jv-en"]
        cfg = load_config(path, pair)
        assert cfg.langs
    elif path.stem.startswith("select"):
        lang = [] if re.search(r"^(pair|lang):", text, re.M) else ["lang=jv"]
        load_select_config(path, lang)
    elif path.stem == "distill":
        stream = load_translate_config(path).streams[0]
        assert stream.reference.column and stream.reference.min_bleu == 28
    else:
        assert path.stem == "mix"
        load_mix_config(path)
    # Every config a recipe's commands name is one of its files.
    for named in re.findall(r"conf/recipes/([\w.-]+/[\w.-]+\.yaml)", text):
        assert (RECIPES / named).is_file(), named


def test_each_filter_recipe_names_its_jobs_in_order_and_what_the_user_provides() -> None:
    for name in NAMES:
        text = (RECIPES / name / "filter.yaml").read_text(encoding="utf-8")
        assert "# Jobs, in order" in text and "# You provide:" in text, name
        jobs = re.findall(r"^#\s+(?:sluice|python)\s+(\S+)", text, re.M)
        assert jobs and "filter" in jobs, (name, jobs)


@pytest.fixture(scope="module")
def lms(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """zh and en LMs on Tatoeba pairs the runs below do not filter, as `--set`s."""
    out = tmp_path_factory.mktemp("recipe-lm")
    models = {}
    for lang in ("zh", "en"):
        text = out / f"train.{lang}"
        lines = (DATA / f"tatoeba-zh-en.{lang}").read_text(encoding="utf-8").splitlines()
        text.write_text("\n".join(lines[:1000]) + "\n", encoding="utf-8")
        models[lang] = str(out / f"{lang}.binlm")
        assert train_lm_main(["--lang", lang, "--order", "3", "--out", models[lang],
                              str(text)]) == 0
    return [f"lm.models={{zh: {models['zh']}, en: {models['en']}}}"]


@pytest.fixture(scope="module")
def tico(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """TICO-19's aligned en/zh/ru lines as the triangular task's three pairs."""
    out = tmp_path_factory.mktemp("tico")
    rows = [line.split("\t") for line in
            (DATA / "embed_tico19.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    files = {}
    for pair, (a, b) in {"ru-zh": (2, 1), "ru-en": (2, 0), "en-zh": (0, 1)}.items():
        files[pair] = out / f"{pair}.tsv"
        files[pair].write_text("".join(f"{r[a]}\t{r[b]}\n" for r in rows), encoding="utf-8")
    return files


def run_filter(lake_root: Path, recipe: str, file: str, run_id: str, *args: str,
               sets: tuple[str, ...] = ()) -> None:
    argv = ["--config", str(RECIPES / recipe / file), "--lake", str(lake_root / DB),
            "--run-id", run_id, *args,
            *[x for s in (f"lake.database={DB}", *sets) for x in ("--set", s)]]
    assert filter_main(argv) == 0, (recipe, run_id)


def fates(spark, lake_root: Path, run_id: str, table: str = "bitext") -> dict[str, int]:
    rows = (spark.read.parquet(str(lake_root / DB / "tables" / table))
            .where(F.col("run_id") == run_id)
            .groupBy(F.coalesce("reject_rule", F.lit("kept")).alias("fate")).count().collect())
    return {r.fate: r["count"] for r in rows}


@pytest.mark.integration
@pytest.mark.parametrize("recipe", ["didi-wmt20-zh-en", "zenghuimt-wmt21-zh-en"])
def test_the_zh_en_recipes_filter_with_their_lm_and_alignment(spark, lake_root: Path, lms,
                                                              recipe: str,
                                                              tmp_path: Path) -> None:
    zh, en = ((DATA / f"tatoeba-zh-en.{x}").read_text(encoding="utf-8").splitlines()
              for x in ("zh", "en"))
    tagged = [(f"<b>{a}</b>", f"<p>{b}</p>") for a, b in zip(zh[1000:1010], en[1000:1010],
                                                             strict=True)]
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{a}\t{b}\n" for a, b in [*zip(zh, en, strict=True), *tagged]),
                   encoding="utf-8")
    run_id = f"recipe-{recipe[:4]}"
    run_filter(lake_root, recipe, "filter.yaml", run_id, "--input", str(tsv),
               "--corpus", "tatoeba", sets=tuple(lms))
    got = fates(spark, lake_root, run_id)
    total = sum(got.values())
    # DiDi drops lines with HTML tags; the others strip the tags (the lines are then
    # duplicates of their untagged twins, or share their fate: not rejected for markup).
    html = spark.read.parquet(str(lake_root / DB / "tables" / "bitext")).where(
        (F.col("run_id") == run_id) & (F.col("line") > len(zh))).collect()
    reasons = {r.reject_rule for r in html}
    if recipe.startswith("didi"):
        assert reasons == {"url_email_html"}
    else:
        assert "url_email_html" not in reasons and "duplicate" in reasons
    # The worst 5% of each side by its LM score, of the rows alive there: each about 5%.
    for side in ("src", "tgt"):
        assert 0.02 * total <= got.get(f"cut_lm_{side}", 0) <= 0.06 * total, got
    assert got["kept"] >= 0.6 * total, got


@pytest.mark.integration
@pytest.mark.parametrize(("recipe", "pair"), [("hwtsc-wmt21-news", "ha-en"),
                                              ("hwtsc-wmt21-news", "ja-en"),
                                              ("hwtsc-wmt21-multilingual", "jv-en"),
                                              ("hwtsc-wmt21-multilingual", "ta-en")])
def test_the_hwtsc_recipes_keep_real_pairs_of_their_languages(spark, lake_root: Path,
                                                              recipe: str, pair: str) -> None:
    run_id = f"recipe-{recipe[6:10]}-{pair}"
    run_filter(lake_root, recipe, "filter.yaml", run_id, "--pair", pair, "--input",
               str(DATA / "langs" / f"{pair}.tsv"), "--corpus", "tatoeba")
    got = fates(spark, lake_root, run_id)
    assert got["kept"] >= 0.8 * sum(got.values()), got


@pytest.mark.integration
def test_the_triangular_recipe_filters_three_pairs_takes_mono_and_builds_its_curriculum(
        spark, lake_root: Path, tico: dict[str, Path]) -> None:
    recipe = "hwtsc-wmt21-triangular-ru-zh"
    for pair, path in tico.items():  # an aligner of each pair, trained on its 120 lines
        run_filter(lake_root, recipe, "filter.yaml", f"tri-{pair}", "--pair", pair,
                   "--input", str(path), "--corpus", "tico",
                   sets=(*NO_LABSE, "align.min_train_pairs=100"))
        got = fates(spark, lake_root, f"tri-{pair}")
        assert "embed_cosine" not in got  # LaBSE scores; the curriculum decides by it
        scored = sum(got.values()) - sum(n for rule, n in got.items()
                                         if rule not in ("kept", "cut_align_coverage"))
        assert abs(got.get("cut_align_coverage", 0) - 0.1 * scored) <= 2, got
    run_filter(lake_root, recipe, "mono.yaml", "tri-mono")
    mono = fates(spark, lake_root, "tri-mono", "mono")
    clean_zh = spark.read.parquet(str(lake_root / DB / "tables" / "bitext")).where(
        F.col("run_id").isin("tri-ru-zh", "tri-en-zh") & (F.col("outcome") == "clean"))
    assert sum(mono.values()) == clean_zh.count()
    assert mono.get("duplicate", 0) >= 1  # the same Chinese line as the target of both pairs
    assert mix_main(["--config", str(RECIPES / recipe / "mix.yaml"), "--lake",
                     str(lake_root / DB), "--set", f"lake.database={DB}",
                     "--run-id", "tri-mix"]) == 0
    mixed = spark.read.parquet(str(lake_root / DB / "tables" / "mixture")).where(
        F.col("run_id") == "tri-mix").select(F.col("stage").cast("int").alias("stage"),
                                             "direction", "score").collect()
    by_stage: dict[int, list] = {}
    for r in mixed:
        by_stage.setdefault(r.stage, []).append(r)
    assert {r.direction for r in by_stage[1]} == {"ru-zh", "ru-en", "en-zh"}
    assert all(r.score >= (0.7 if r.direction == "ru-zh" else 0.8) for r in by_stage[2])
    assert {r.direction for r in by_stage.get(3, [])} <= {"ru-zh"}
    assert len(by_stage.get(3, [])) <= len(by_stage.get(2, [])) < len(by_stage[1])
