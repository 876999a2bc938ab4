# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LID    := models/lid.176.ftz
USE    := models/use-multilingual-v3
export PYSPARK_PYTHON        := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup demo test lint bench clean

setup: $(STAMP) $(LID) $(USE)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,train,score]'
	touch $@

$(LID): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/fetch_lid_model.sh $@

$(USE): | $(STAMP)
	PIP=$(VENV)/bin/pip scripts/fetch_embed_model.sh $@

demo: setup
	$(VENV)/bin/spark-submit --master 'local[2]' \
	  --driver-java-options -Dlog4j.configurationFile=conf/log4j2.properties \
	  jobs/filter.py --config conf/demo.yaml

test: setup
	$(PY) -m pytest -q tests

lint: setup
	$(VENV)/bin/ruff check .

bench: setup
	$(PY) bench/filter_throughput.py

clean:
	rm -rf lake spark-warehouse metastore_db derby.log
