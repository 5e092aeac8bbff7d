# The README's two commands are `make demo` and `make test`; each sets itself up first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-compose test-distributed faults screenshots unit lint lock clean

# --no-compile: what a command imports is byte-compiled then, not the whole lock (about 20 s less).
$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || \
	  { echo "error: Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --no-compile -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	@touch $(STAMP)

# Python packages, then the default Kafka versions (Java 17 and Maven are checked there).
setup: $(STAMP)
	$(BIN)/kafka-canary setup

# Debian's Chromium and ChromeDriver, for the test that opens the report page in a headless browser.
CHROMEDRIVER := /usr/bin/chromedriver
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
$(CHROMEDRIVER):
	@command -v apt-get >/dev/null || { echo "error: install Chromium and ChromeDriver (/usr/bin/chromium, $@)"; exit 1; }
	$(SUDO) apt-get install -y -q chromium chromium-driver || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver; }

# Debian's Prometheus: promtool lints the metric names (its server is not started).
PROMTOOL := /usr/bin/promtool
$(PROMTOOL):
	@command -v apt-get >/dev/null || { echo "error: install Prometheus's promtool ($@)"; exit 1; }
	$(SUDO) apt-get install -y -q --no-install-recommends prometheus || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends prometheus; }

# Debian's OpenSSH server and client: the command deployer's test rolls a broker over ssh to a throwaway sshd on
# loopback (tests/integration/ssh_host.py), the remote shell parsing the command again.
SSHD := /usr/sbin/sshd
$(SSHD):
	@command -v apt-get >/dev/null || { echo "error: install the OpenSSH server and client ($@, ssh)"; exit 1; }
	$(SUDO) apt-get install -y -q --no-install-recommends openssh-server openssh-client || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends openssh-server openssh-client; }

# Debian's Docker engine and debootstrap, for the container tests (the docker deployer; the test session starts the
# engine when none runs and stops it after). KAFKA_CANARY_SKIP_DOCKER=1 skips those tests on purpose.
DOCKERD := /usr/sbin/dockerd
$(DOCKERD):
	@command -v apt-get >/dev/null || { echo "error: install a Docker engine (dockerd) and debootstrap"; exit 1; }
	$(SUDO) apt-get install -y -q docker.io debootstrap || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q docker.io debootstrap; }

# The broker rollout DAG end to end (airflow dags test); BAD=1: a bad canary, rolled back; UPGRADE=1: the canary
# is upgraded to Kafka 4.1.2 instead of getting num.io.threads=6.
demo: setup
	$(BIN)/kafka-canary demo $(if $(BAD),--bad) $(if $(UPGRADE),--upgrade)

# The fault suite and the other slow tests (pytest -m slow: real rollouts under faults, about an hour) run with `make faults`.
# The unit tests and those that judge no latency or rate (marked parallel) on two workers, a module's tests on one;
# then the rest of the tests on real brokers one at a time, alone on the machine: their gates judge latencies.
IN_MAKE_TEST := not slow and not compose and not distributed
test: setup lint $(CHROMEDRIVER) $(PROMTOOL) $(SSHD) $(if $(filter 1,$(KAFKA_CANARY_SKIP_DOCKER)),,$(DOCKERD))
	$(BIN)/pytest -n 2 --dist loadfile -m "$(IN_MAKE_TEST) and (parallel or not integration)"
	$(BIN)/pytest -m "$(IN_MAKE_TEST) and integration and not parallel"

# docker-compose.yaml up for real on images built here (tests/compose_stack), the broker rollout DAG triggered through its
# REST API; Debian's docker-compose (v1) unless the engine's CLI has Compose v2. CI runs it after `make test`.
COMPOSE := /usr/bin/docker-compose
$(COMPOSE):
	@command -v apt-get >/dev/null || { echo "error: install Docker Compose ($@, or Compose v2)"; exit 1; }
	$(SUDO) apt-get install -y -q docker-compose || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q docker-compose; }

test-compose: setup $(DOCKERD) $(COMPOSE)
	$(BIN)/pytest -s -m compose tests/compose_stack

# Airflow beyond one machine (tests/distributed): Debian's PostgreSQL and redis-server on loopback, two Celery workers
# sharing no disk, run storage on a real S3 server, Spark standalone (docs/production.md); about 8 minutes.
REDIS := /usr/bin/redis-server
$(REDIS):
	@command -v apt-get >/dev/null || { echo "error: install redis-server and PostgreSQL"; exit 1; }
	$(SUDO) apt-get install -y -q --no-install-recommends redis-server postgresql || \
	  { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q --no-install-recommends redis-server postgresql; }

test-distributed: setup $(REDIS) $(CHROMEDRIVER)
	$(BIN)/pytest -s -m distributed tests/distributed

faults: setup $(CHROMEDRIVER)
	$(BIN)/pytest -m slow tests/reliability tests/integration tests/e2e

# The report pages' screenshots in docs/img, from real rollouts opened in Chromium (tests/e2e/test_report_pages.py).
screenshots: setup $(CHROMEDRIVER)
	KAFKA_CANARY_SCREENSHOTS=$(CURDIR)/docs/img $(BIN)/pytest -m slow tests/e2e/test_report_pages.py

unit: $(STAMP)
	$(BIN)/pytest tests/unit

# Style, then the import layers (pyproject's [tool.importlinter]), then the types (pyproject's [tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy

# Rebuild requirements.lock from the loose ranges in pyproject.toml (needs PyPI).
lock:
	rm -rf /tmp/kafka-canary-lock && $(PYTHON) -m venv /tmp/kafka-canary-lock
	/tmp/kafka-canary-lock/bin/pip install -q -e '.[airflow,distributed,spark,dev]' 'pandas<3' pyspark-client
	/tmp/kafka-canary-lock/bin/pip freeze --exclude-editable | grep -v '^-e' > requirements.lock.new
	@echo "review requirements.lock.new (pyspark and pyspark-client on one release, pandas 2.x), then move it over requirements.lock"

clean:
	rm -rf $(VENV)
