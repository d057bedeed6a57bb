# The two commands a newcomer needs; both run the idempotent bootstrap first.
.PHONY: demo test bootstrap bench
bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	.venv/bin/mbforge demo

test: bootstrap
	.venv/bin/python -m pytest

bench: bootstrap
	.venv/bin/python -m bench
