# The README's commands. Each installs what it needs (a venv with the Python deps; the
# Go binaries are built on first use into ~/.cache/karpenter-e2e/bin).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The harness's one command (runners/cli.py; `karpenter-e2e --help` lists its subcommands)
KE2E := $(PY) -m karpenter_e2e
PYTEST_ARGS ?=

ALLURE_VERSION ?= 3.18.0
ALLURE := .tools/allure/node_modules/.bin/allure
HISTORY ?=

FROM ?= v1.14.3
TO ?= v1.15.0
GATE_ARGS ?=

PHONY_E2E := soak merge
.PHONY: $(PHONY_E2E) docker docker-down docs e2e e2e-kind kind-build eks-night eks-rehearsal eks-rehearsal-gate eks-night-account eks-night-opt-in eks-night-suites eks-night-sweep eks-night-teardown durations nightly e2e-aws-sim example-plugin lint test setup build report upgrade-gate scale sweep cluster-up cluster-down cluster-status mutants check check-examples matrix matrix-join bisect explore release-diffs killrate

# An editable install: the project's root on the venv's path, where karpenter_e2e/ names the
# layers by symlink. Nothing to redo when a module is added; only a changed pyproject does.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.installed

## e2e: the main job: the scenario suites on E2E_CLUSTERS local clusters at once, each with its
## own Karpenter and E2E_WORKERS xdist workers sharing it (default: what this machine's cores
## and memory allow, runners/machine.py). Tests are dealt longest first; own_karpenter tests
## get a serial cluster. One merged JUnit, Allure results and summary in reports/latest.
## SHARD=i/N runs the i-th duration-balanced slice (one CI job of N). The binaries are built
## first, in this process, so a cold build's progress is on screen.
E2E_CLUSTERS ?=
E2E_WORKERS ?=
SHARD ?=
E2E_RUN = $(KE2E) e2e --reports-dir reports \
	$(if $(E2E_CLUSTERS),--clusters $(E2E_CLUSTERS)) \
	$(if $(E2E_WORKERS),--workers $(if $(filter 0,$(E2E_WORKERS)),1,$(E2E_WORKERS))) \
	$(if $(SHARD),--shard $(SHARD))
e2e: build
	$(E2E_RUN) -- -v -o log_cli=true $(PYTEST_ARGS)

## soak: N back-to-back default make e2e runs; each run's closing line, wall time and load
## average go to reports/soak-<start>.md (stops at nothing: every run is reported)
N ?= 20
soak: build
	$(KE2E) soak --runs $(N) --reports-dir reports -- $(E2E_RUN) -- -v -o log_cli=true $(PYTEST_ARGS)

## merge: one report from several runs' directories (CI's shards): make merge OUT=dir RUNS="a b"
OUT ?= reports/merged
RUNS ?=
merge: setup
	$(KE2E) merge $(OUT) $(RUNS)

## durations: keep this machine's last measured test durations (pytest's cache) as
## suites/durations.json, the longest-first order a fresh clone (CI) starts from
durations: setup
	$(KE2E) durations

## nightly: only the nightly-only scenarios (minutes of Karpenter's clock each: chaos);
## make e2e skips them, saying so; the nightly workflow and the upgrade gate run them.
nightly: build
	$(E2E_RUN) -- -v -o log_cli=true -m nightly --karpenter-run-nightly $(PYTEST_ARGS)

## e2e-kind: the suites on kind clusters (docs/modes-eks-kind.md): Docker first (make docker),
## then kind, Helm and the node image (kind's published one where a registry answers, else one
## built here with no registry), then the lanes, each a kind cluster with kwok and Karpenter
## installed in it by their own manifests and chart. KIND_IMAGE=built|kindest|<image>
KIND_IMAGE ?=
e2e-kind: kind-build
	$(E2E_RUN) -- -v -o log_cli=true --karpenter-cluster=kind \
		$(if $(KIND_IMAGE),--karpenter-kind-image $(KIND_IMAGE)) $(PYTEST_ARGS)

## kind-build: what the kind lanes need, built ahead: Docker up, the pinned binaries, kind, Helm
## and the node image (.ci/run starts it beside make test, niced, so the cold builds overlap the
## tests' waits)
kind-build: build docker
	$(KE2E) cluster build --cluster kind $(if $(KIND_IMAGE),--kind-image $(KIND_IMAGE))

## e2e-aws-sim: the suites against Karpenter's real AWS provider and a fake AWS (aws-sim mode)
e2e-aws-sim: setup
	$(KE2E) cluster build --cluster aws-sim
	$(PY) -m pytest suites -v -o log_cli=true --karpenter-cluster=aws-sim -n 2 \
		--karpenter-reports-dir reports $(PYTEST_ARGS)

## example-plugin: a platform team's project (examples/plugin-project) pip-installs the harness
## (not editable: the wheel's contents are what is tested) beside another Kubernetes pytest
## plugin whose options once clashed with the harness's (pytest-kind: --cluster-name,
## --keep-cluster; pytest-helm-charts: --kubeconfig), collects its tests and runs its own
## scenario against a local cluster the plugin brings up and down. One venv per neighbour:
## pytest-kind and pytest-helm-charts both register --kubeconfig, so they refuse each other.
## build/ goes first: setuptools reuses it, and a module moved since would ride along.
EXAMPLE := examples/plugin-project
EXAMPLE_NEIGHBOURS ?= pytest-kind==22.11.1 pytest-helm-charts==1.3.5
example-plugin: build
	for neighbour in $(EXAMPLE_NEIGHBOURS); do \
	  echo "example-plugin: beside $$neighbour"; \
	  rm -rf build $(EXAMPLE)/.venv && $(PYTHON) -m venv $(EXAMPLE)/.venv \
	  && $(EXAMPLE)/.venv/bin/pip install -q . "$$neighbour" \
	  && (cd $(EXAMPLE) && .venv/bin/python -m pytest --collect-only -q \
	      && .venv/bin/python -m pytest -v -o log_cli=true \
	         --karpenter-cluster-name plugin-example $(PYTEST_ARGS)) || exit 1; \
	done

## lint: static checks: ruff (pyflakes, pycodestyle, isort, bugbear, ...), mypy (strict for
## clusters.api.waits, clusters.api.kube, clusters.karpenter.settled, fixtures.expect) and
## lint-imports (the layers' contracts); settings in pyproject.toml. mypy finds karpenter_e2e
## by path (its symlinked layers), so it needs no install of the project. A second mypy pass
## checks the code that imports the package from outside it (the suites, the example project),
## so a name moved or renamed in the package fails here rather than at collection time; it
## checks every scenario body too (--check-untyped-defs: a test function has no annotations).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --no-warn-unused-configs --check-untyped-defs conftest.py suites $(EXAMPLE)/tests
	$(VENV)/bin/lint-imports

## docs: the documentation site (mkdocs-material), built offline and strict (a broken link or
## anchor fails); its home page is the README. Output: reports/site/index.html
docs: setup
	sed 's#](docs/#](#g' README.md > docs/index.md
	$(VENV)/bin/mkdocs build --strict --quiet
	@echo "docs: reports/site/index.html"

## test: the static checks, then the harness's own unit tests (what .ci/run runs)
test: lint
	$(PY) -m pytest tests -q --junitxml=reports/junit-tests.xml $(PYTEST_ARGS)

## build: compile every pinned binary into the per-user cache (e2e does this on demand)
build: setup
	$(KE2E) cluster build

## upgrade-gate: the scale case measured on FROM and on TO at once (TO/FROM within limits),
## then Karpenter FROM -> TO must disrupt nothing, then every suite passes on TO
upgrade-gate: setup
	$(KE2E) gate --from $(FROM) --to $(TO) $(GATE_ARGS)

## explore: generated workloads on FROM (and TO, diffed), shrunk when something is found:
## make explore FROM=v1.14.3 TO=v1.15.0 N=3 SEED=... [SEEDS=found.seeds] [KUBE=1.30] [EXPLORE_JOBS=3] (docs/differential.md)
# N and TO are soak's and the gate's too: explore takes them only from the command line
explore: setup
	$(KE2E) explore --from $(FROM) $(if $(filter command line,$(origin TO)),--to $(TO)) --n $(if $(filter command line,$(origin N)),$(N),3) $(if $(SEED),--seed $(SEED)) $(if $(SEEDS),--seeds $(SEEDS)) $(if $(SHRINK),--shrink-budget $(SHRINK)) $(if $(KUBE),--kubernetes-version $(KUBE)) $(if $(EXPLORE_JOBS),--jobs $(EXPLORE_JOBS))

## release-diffs: each served release against the one before it, every example on both,
## the differences joined into one table (the nightly; docs/differential.md):
## make release-diffs [PAIRS=v1.14.3:v1.15.0,...] [LAST=K] [FOLDERS="dir ..."] [EXPLORE=N] [KUBE=1.30]
release-diffs: build
	$(KE2E) release-diffs $(if $(PAIRS),--pairs $(PAIRS)) $(if $(LAST),--last $(LAST)) $(foreach f,$(FOLDERS),--folder $(f)) $(if $(EXPLORE),--explore $(EXPLORE)) $(if $(KUBE),--kubernetes-version $(KUBE))

## mutants: the kill matrix: each mutant (a patched Karpenter) must fail the scenarios it names
## (MUTANT_CLUSTER=aws-sim: the AWS provider's mutants, in aws-sim mode)
MUTANTS ?=
MUTANT_DIR ?= mutants
MUTANT_JOBS ?= 4
MUTANT_CLUSTER ?= local
mutants: setup
	$(KE2E) mutants --mutants "$(MUTANTS)" --mutant-dir $(MUTANT_DIR) \
		--jobs $(MUTANT_JOBS) --cluster $(MUTANT_CLUSTER) $(if $(SHARD),--shard $(SHARD))

## killrate: the oracles' own kill rate: each mutant (SAMPLE=30: a stratified sample; MUTANTS="a b")
## on the generic workloads (WORKLOADS=a,b, nightly (default) or all), judged by the oracles and the diff
## against the unmutated build alone (docs/killrate.md). KILLRATE_JOBS clusters at a time.
SAMPLE ?=
WORKLOADS ?= nightly
KILLRATE_JOBS ?= 1
KILLRATE_PREFIX ?= killrate-
KILLRATE_ARGS ?=
killrate: setup
	$(KE2E) killrate --mutants "$(MUTANTS)" $(if $(SAMPLE),--sample $(SAMPLE)) \
		--workloads $(WORKLOADS) --jobs $(KILLRATE_JOBS) --cluster-prefix $(KILLRATE_PREFIX) $(if $(SHARD),--shard $(SHARD)) $(KILLRATE_ARGS)

## matrix: scenario x Karpenter release: the suites (SCENARIOS="a,b": those ids) on every release
## in VERSIONS (default: every one the Go module proxy serves from v1.0 on), MATRIX_JOBS at once,
## each on a cluster of its own (matrix-<version>). JSON, Markdown, an Allure results directory
## and a heat map (matrix.png) in reports/matrix-latest/. MATRIX_ARGS="--cluster-prefix x" ...
## Each release runs on its default Kubernetes minor; KUBERNETES="1.35 1.36" runs each on each
## minor (a combination outside the release's supported range: skipped cells that say so).
VERSIONS ?=
KUBERNETES ?=
SCENARIOS ?=
MATRIX_JOBS ?= 2
MATRIX_LANES ?=
MATRIX_ARGS ?=
matrix: setup
	$(KE2E) matrix $(if $(VERSIONS),--versions "$(VERSIONS)") \
		$(if $(SCENARIOS),--scenarios "$(SCENARIOS)") --jobs $(MATRIX_JOBS) --reports-dir reports \
		$(if $(MATRIX_LANES),--lanes $(MATRIX_LANES)) \
		$(if $(KUBERNETES),--kubernetes-versions "$(KUBERNETES)") \
		$(MATRIX_ARGS) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

## matrix-join: several matrix directories (the nightly's per-release jobs, or runs on different
## days) as one table, heat map and Allure results in reports/matrix-latest/; a release in two is
## refused
DIRS ?=
matrix-join: setup
	@test -n "$(DIRS)" || { echo "usage: make matrix-join DIRS=\"reports/matrix-a reports/matrix-b\""; exit 2; }
	$(KE2E) matrix-join --reports-dir reports $(DIRS)

## bisect: the first release from GOOD to BAD where SCENARIO fails (binary search over the served
## releases; both ends checked first), and the module files changed from the release before it.
## BROKEN=vA FIXED=vB instead: the first release where a failing SCENARIO passes (the fix).
SCENARIO ?=
GOOD ?=
BAD ?=
BROKEN ?=
FIXED ?=
BISECT_ARGS ?=
bisect: setup
	@test -n "$(SCENARIO)" -a \( -n "$(GOOD)$(BAD)" -o -n "$(BROKEN)$(FIXED)" \) || { echo "usage:" \
		"make bisect SCENARIO=id GOOD=vA BAD=vB, or SCENARIO=id BROKEN=vA FIXED=vB" \
		"[BISECT_ARGS='--cluster-prefix x']"; exit 2; }
	$(KE2E) bisect --scenario $(SCENARIO) \
		$(if $(GOOD),--good $(GOOD)) $(if $(BAD),--bad $(BAD)) \
		$(if $(BROKEN),--broken $(BROKEN)) $(if $(FIXED),--fixed $(FIXED)) \
		--reports-dir reports $(BISECT_ARGS) $(if $(PYTEST_ARGS),-- $(PYTEST_ARGS))

## scale: the 1000-pod scale scenario (Karpenter's basic perf case) on a local cluster
scale: setup
	$(PY) -m pytest suites/test_scale.py -v -o log_cli=true --karpenter-run-scale \
		--karpenter-reports-dir reports $(PYTEST_ARGS)

## sweep: delete leftovers of earlier runs older than MAX_AGE (SWEEP_ARGS="--dry-run" to list;
## SWEEP_ARGS="--aws-sim NAME" for an aws-sim cluster and its fake AWS; SWEEP_ARGS="--kind" for
## the kind clusters earlier runs left on this machine's Docker)
MAX_AGE ?= 6h
SWEEP_KUBECONFIG ?= $(HOME)/.cache/karpenter-e2e/clusters/karpenter-e2e/kubeconfig
SWEEP_ARGS ?=
sweep: setup
	$(KE2E) sweep $(if $(findstring --aws-sim,$(SWEEP_ARGS))$(findstring --kind,$(SWEEP_ARGS)),,--kubeconfig $(SWEEP_KUBECONFIG)) \
		--max-age $(MAX_AGE) $(SWEEP_ARGS)

## eks-night: the nightly EKS job's steps that do not depend on how its cluster is made
## (.ci/eks-night): the workflow's eks job runs eks-night-account, -opt-in, -suites, -sweep and
## -teardown as its steps, its own cluster steps between them; `make eks-night` runs the whole
## night in order, each step timed (EKS_NIGHT_TIMES), the cluster made by EKS_CLUSTER_UP and
## deleted by EKS_CLUSTER_DELETE (default: eksctl's). EKS_TEMPLATE: the release's
## getting-started cloudformation.yaml. AWS: boto3's own credentials and endpoint.
CLUSTER_NAME ?= karpenter-e2e-nightly
AWS_REGION ?= us-west-2
EKS_TEMPLATE ?=
EKS_SUITES_ARGS ?=
EKS_WORKERS ?= 2
EKS_CLUSTER_UP ?=
EKS_CLUSTER_DELETE ?=
EKS_BEFORE_SWEEP ?=
EKS_AFTER_SWEEP ?=
EKS_NIGHT_TIMES ?= reports/eks-night/steps.md
EKS_NIGHT_STEPS := account opt-in suites sweep teardown
# Each of these reaches the script as an environment variable (a value holds no double quote).
EKS_NIGHT_VARS := CLUSTER_NAME AWS_REGION EKS_TEMPLATE EKS_SUITES_ARGS EKS_WORKERS EKS_CLUSTER_UP \
	EKS_CLUSTER_DELETE EKS_BEFORE_SWEEP EKS_AFTER_SWEEP EKS_NIGHT_TIMES
EKS_NIGHT := $(foreach v,$(EKS_NIGHT_VARS),$(v)="$($(v))") .ci/eks-night
$(addprefix eks-night-,$(EKS_NIGHT_STEPS)): eks-night-%: setup
	$(EKS_NIGHT) $*
eks-night: build
	$(EKS_NIGHT) all

## eks-rehearsal: the EKS night on this machine, no account: kind as the control plane, the
## AWS provider installed by its own charts (from its module's source), aws-sim's fake AWS
## reachable from the kind network, eks mode unchanged (docs/modes-eks-kind.md). The same
## `make eks-night` as the workflow, between `karpenter-e2e rehearsal up-aws` and `down`.
REH_NAME ?= rh-night
REH_ARGS ?=
eks-rehearsal: build docker
	@$(KE2E) rehearsal up-aws --name $(REH_NAME) $(REH_ARGS) || exit 2; \
	mkdir -p reports/eks-night; rcfile=reports/eks-night/.rc; echo 1 > $$rcfile; \
	{ (set -a; . "$$($(KE2E) rehearsal env --name $(REH_NAME))"; set +a; \
	  $(MAKE) --no-print-directory eks-night CLUSTER_NAME=$(REH_NAME) AWS_REGION=us-west-2 \
	    EKS_TEMPLATE="$$($(KE2E) rehearsal env --name $(REH_NAME) --template)" \
	    EKS_CLUSTER_UP="$(KE2E) rehearsal cluster-up --name $(REH_NAME) $(REH_ARGS)" \
	    EKS_CLUSTER_DELETE="$(KE2E) rehearsal cluster-down --name $(REH_NAME)" \
	    EKS_BEFORE_SWEEP="$(KE2E) rehearsal check-opt-in --name $(REH_NAME) && $(KE2E) rehearsal seed-sweep --name $(REH_NAME)" \
	    EKS_AFTER_SWEEP="$(KE2E) rehearsal check-sweep --name $(REH_NAME) --after sweep"; \
	  night=$$?; $(KE2E) rehearsal check-sweep --name $(REH_NAME) --after teardown || night=1; \
	  exit $$night); \
	  echo $$? > $$rcfile; } 2>&1 | tee reports/eks-night/console.log; rc=$$(cat $$rcfile); \
	$(KE2E) rehearsal check-leaks --name $(REH_NAME) reports || rc=1; \
	$(KE2E) rehearsal down --name $(REH_NAME); exit $$rc

## eks-rehearsal-gate: the upgrade gate as a platform team runs it on EKS, rehearsed: the
## rehearsal cluster with FROM installed by its chart (and the stack of FROM's module), then
## `gate --cluster eks`, whose `helm upgrade` takes TO's packaged charts (--chart-repo); the
## night's teardown after it. TO must be one of versions.AWS_PROVIDER_VERSIONS (the images
## and charts made at cluster-up). GATE_ARGS="-k ..." narrows the suites on TO.
REH_GATE ?= rh-gate
eks-rehearsal-gate: build docker
	@$(KE2E) rehearsal up-aws --name $(REH_GATE) --karpenter-version $(FROM) || exit 2; \
	rc=0; (set -a; . "$$($(KE2E) rehearsal env --name $(REH_GATE))"; set +a; \
	  $(PY) -m karpenter_e2e.clusters.eks.account deploy-stack --stack Karpenter-$(REH_GATE) \
	    --template "$$($(KE2E) rehearsal env --name $(REH_GATE) --template)" --cluster $(REH_GATE) \
	  && $(KE2E) rehearsal cluster-up --name $(REH_GATE) --karpenter-version $(FROM) \
	  && CLUSTER_NAME=$(REH_GATE) AWS_REGION=us-west-2 .ci/eks-night opt-in \
	  && $(KE2E) gate --from $(FROM) --to $(TO) --cluster eks --cluster-name $(REH_GATE) \
	    --kubeconfig "$$KUBECONFIG" --eks-opt-in $(REH_GATE) --region us-west-2 \
	    --interruption-queue $(REH_GATE) --perf-pods 0 --no-diff-examples \
	    --chart-repo "$$($(KE2E) rehearsal env --name $(REH_GATE) --charts)" \
	    --out reports/upgrade-gate-eks $(GATE_ARGS); rc=$$?; \
	  CLUSTER_NAME=$(REH_GATE) AWS_REGION=us-west-2 \
	    EKS_CLUSTER_DELETE="$(KE2E) rehearsal cluster-down --name $(REH_GATE)" \
	    .ci/eks-night teardown || rc=1; \
	  $(KE2E) rehearsal check-leaks --name $(REH_GATE) reports/upgrade-gate-eks || rc=1; \
	  exit $$rc) || rc=$$?; \
	$(KE2E) rehearsal down --name $(REH_GATE); exit $$rc

## report: offline HTML report from the last run's Allure results (Allure 3 from npm);
## RESULTS=reports/upgrade-gate/allure-results for the gate's
RESULTS ?= reports/latest/allure-results
$(ALLURE):
	npm install --no-audit --no-fund --prefix .tools/allure allure@$(ALLURE_VERSION)

report: $(ALLURE)
	@test -d $(RESULTS) || { echo "no $(RESULTS): run make e2e first"; exit 1; }
	@mkdir -p reports
	@if [ -n "$(HISTORY)" ]; then cp "$(HISTORY)" reports/history.jsonl; fi
	cd reports && ../$(ALLURE) generate $(abspath $(RESULTS)) --config ../rendering/allurerc.mjs -o html
	@echo "report: reports/html/index.html"

## docker: a Docker daemon for kind mode: the one that answers, or (Debian, root) Debian's
## docker.io installed and started, with capwrap registered only where this machine's
## capability bounding set lacks what --privileged asks for (clusters/kind/docker.py);
## docker-down stops only a daemon `make docker` started
docker: setup
	$(KE2E) docker up
docker-down: setup
	$(KE2E) docker down

## cluster-up/down/status: a cluster kept between runs; CLUSTER_ARGS="--cluster kind" for kind
CLUSTER_ARGS ?=
cluster-up: setup
	$(KE2E) cluster up --reuse $(CLUSTER_ARGS)
cluster-down: setup
	$(KE2E) cluster down $(CLUSTER_ARGS)
cluster-status: setup
	$(KE2E) cluster status $(CLUSTER_ARGS)

## check: what Karpenter does with your own NodePools and workloads, on a fresh local cluster
## (docs/check.md). check exits 0: every expectation held; 1: one failed; 2: bad input;
## 3: cluster error. make exits 2 for any failing recipe, whatever its code, so the recipe
## prints check's code; CI gates on `karpenter-e2e check`, which returns it.
MANIFESTS ?=
EXPECT ?=
SCALE ?=
SCALE_IN ?=
BASE ?=
VARS ?=
CHECK_ARGS ?=
check: setup
	@test -n "$(MANIFESTS)" || { echo "usage: make check MANIFESTS=folder/ [EXPECT=expect.yaml]" \
		"[SCALE=app=10,...] [SCALE_IN=app=0] [BASE=origin/main] [VARS=team.env]" \
		"[CHECK_ARGS='--cluster aws-sim']"; exit 2; }
	@$(KE2E) check $(MANIFESTS) $(if $(EXPECT),--expect $(EXPECT)) \
		$(if $(SCALE),--scale $(SCALE)) $(if $(SCALE_IN),--scale-in $(SCALE_IN)) \
		$(if $(BASE),--base $(BASE)) $(if $(VARS),--vars $(VARS)) $(CHECK_ARGS); \
	rc=$$?; [ $$rc -eq 0 ] || echo "make check: check exited $$rc ($$(case $$rc in \
		1) echo an expectation failed;; 2) echo bad input;; 3) echo cluster error;; \
		130) echo interrupted;; *) echo unexpected;; esac)); make reports any failure as 2:" \
		"for the code itself run karpenter-e2e check" >&2; exit $$rc

## check-examples: `check` on every check folder of examples/ (one with an expect.yaml: the
## rule of checks/examples.py), each on a cluster of its own; each must pass
check-examples: setup
	@set -e; for f in examples/*/expect.yaml; do d=$$(dirname $$f)/; \
		echo "== check $$d"; \
		$(KE2E) check $$d --cluster-name check-$$(basename $$d) $(CHECK_ARGS); \
	done
