# qoelab: `make demo` runs the lab with a real small sweep; `make test` runs the whole suite.
# Both install what they need on a Debian 12 host (as root) and start PostgreSQL/Redis if none answers.
SHELL := /bin/bash
.DEFAULT_GOAL := help

.PHONY: help deps services demo stop test lint format emulator frontend schema clean vm-image

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

deps: ## install Debian packages, .venv, npm packages; build the C emulator and the front end
	@scripts/install-deps.sh

services: deps ## make sure PostgreSQL and Redis answer (start private ones under .state/ if not)
	@scripts/services.sh up

demo: services ## migrate, start web + worker + scheduler, run a small real sweep, print the dashboard URL
	@scripts/demo.sh start

stop: ## stop the demo's web server, worker and scheduler (and private PostgreSQL/Redis)
	@scripts/demo.sh stop
	@scripts/services.sh down

test: services ## the whole suite: lint, migrations, unit, integration (netns, Celery, QEMU guests), Playwright
	@scripts/test.sh --with-vm-image

lint: ## ruff lint + format check
	@.venv/bin/ruff check . && .venv/bin/ruff format --check .

format: ## ruff format + autofix
	@.venv/bin/ruff format . && .venv/bin/ruff check --fix .

emulator: ## build the userspace link emulator (workers/build/linkemu)
	@$(MAKE) -s -C workers/csrc

frontend: ## build the front-end static files into frontend/dist
	@cd frontend && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build

schema: ## regenerate docs/openapi.yaml from the API
	@set -a; . .state/env; set +a; QOELAB_DEBUG=true .venv/bin/python backend/manage.py spectacular --file docs/openapi.yaml

vm-image: deps ## build the Debian guest for VM server mode into vm-images/out (cached by input hash; root)
	@vm-images/build.sh

clean: ## remove build outputs (keeps .venv and .state)
	rm -rf workers/build frontend/dist backend/staticfiles
