# topoweb: `make run` serves the explorer on 127.0.0.1:8000; `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
REQ_HASH := $(shell cat requirements.txt requirements-dev.txt | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(REQ_HASH)
EXT_SUFFIX := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
NATIVE := apps/domain/_search_core$(EXT_SUFFIX) apps/domain/parsers/_lspci_scan$(EXT_SUFFIX)
PG_URL ?= postgres://postgres@127.0.0.1:5432/topoweb
REDIS_URL ?= redis://127.0.0.1:6379/15

.PHONY: run test install migrate demo services browser test-sqlite test-postgres bench soak clean

install: $(STAMP) $(NATIVE)

$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

# The engine's C parts (apps/domain/build_native.py): the channel search's recursion and the lspci
# -vvv parser's scans; without a C compiler the build says so and their Python references run.
$(NATIVE) &: apps/domain/_search_core.c apps/domain/parsers/_lspci_scan.c | $(STAMP)
	-$(BIN)/python -m apps.domain.build_native

# The local trial (`make run`) is the one place debug is on by default; a server started any
# other way runs with TOPOWEB_DEBUG off and needs TOPOWEB_SECRET_KEY.
DEV := TOPOWEB_DEBUG=$${TOPOWEB_DEBUG:-1}

migrate: install
	$(DEV) $(BIN)/python manage.py migrate --noinput

demo: migrate
	$(DEV) $(BIN)/python manage.py load_demo

run: demo
	$(DEV) $(BIN)/python manage.py ensure_admin
	$(DEV) $(BIN)/python manage.py runserver 127.0.0.1:8000

# Debian's chromium for the browser tests (Playwright drives it; no browser is downloaded).
browser:
	@command -v chromium >/dev/null || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# PostgreSQL and Redis for the production-path tests; started when they are down.
services:
	@pg_isready -q -h 127.0.0.1 -p 5432 || pg_ctlcluster --skip-systemctl-redirect $$(ls /etc/postgresql) main start
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
	@for i in $$(seq 30); do pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && exit 0; sleep 1; done; echo "PostgreSQL or Redis did not start"; exit 1

test: install browser services test-sqlite test-postgres

test-sqlite: install
	$(BIN)/python -m pytest -q

# The Django side of the suite again on PostgreSQL (the domain tests use no database).
test-postgres: install services
	TOPOWEB_DATABASE_URL=$(PG_URL) $(BIN)/python -m pytest -q -m "not browser" --ignore=tests/domain

# Benchmarks (docs/performance.md): one table, bench/results/latest.json. hwloc's lstopo is the peer
# of the host page; installed from Debian when missing. BENCH_GROUPS=... runs some groups only.
bench: install services browser
	@command -v lstopo >/dev/null || { \
	  echo "installing Debian's hwloc (lstopo) for the benchmarks"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq hwloc >/dev/null; }
	$(BIN)/python -m bench $(BENCH_GROUPS)

# Fault tests of the whole ingest path (private PostgreSQL, Redis, server, workers): minutes, not in `make test`.
soak: install services
	TOPOWEB_SOAK=1 $(BIN)/python -m pytest -q -m soak tests/reliability

clean:
	rm -rf $(VENV) var static_collected artifacts
