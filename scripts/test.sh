#!/usr/bin/env bash
# The one test command: static checks, the local servers the tests talk to
# (scripts/emulators.sh: S3, GCS, Azure, toxiproxy, MariaDB, PostgreSQL; and
# jq, which a test runs), every test under the race detector, and a bounded
# run of every fuzz target.
#
#   scripts/test.sh                 everything (what CI runs)
#   REDOKIT_NO_EMULATORS=1 ...      skip starting servers and installing jq (tests
#                                   that need one skip with a reason; under CI
#                                   they fail)
#   REDOKIT_FUZZTIME=30s ...        longer fuzzing per target (default 8s)
#   REDOKIT_CRASH_TRIALS=500 ...    more SIGKILL crash trials (default 50)
#   REDOKIT_CRASH_GC_TRIALS=1000 .. SIGKILL trials with a coordinator, GC and a
#                                   reader running (default 100, ~1 min)
#   REDOKIT_BITFLIPS=5000 ...       single-bit flips Verify must find (default 2000,
#                                   ~10 s)
#   REDOKIT_FAULT_SCHEDULES=1000 .. seeded fault schedules on mem and local disk
#                                   (default 100, ~1.5 min under -race; half of them
#                                   force staged runs with a tiny writer quota)
#   REDOKIT_STALE_SCHEDULES=1000 .. stale-read schedules (blobtest.Stale serves older
#                                   versions of the meta object and writer states;
#                                   default 100)
#   REDOKIT_CHAIN_HISTORIES=10000 . generated histories of the chain property
#                                   test (recovery, proof and GC agree; default 500)
#   REDOKIT_STAGED_CRASH_TRIALS=1000 SIGKILL trials while a single-ts transaction is
#                                   staged (default 100; REDOKIT_STAGED_CRASH_MIB sizes
#                                   it, default 8; 1024 for the 1 GiB case)
#   REDOKIT_APPLY_KILL_TRIALS=100 . SIGKILL trials of apply per sink (SQLite,
#                                   MariaDB, PostgreSQL; default 20; half of them
#                                   kill at a DDL begun)
#   REDOKIT_FOLLOW_KILLS=100 ...    SIGKILLs of apply --follow per sink while a load
#                                   writes the log, each run restarted (default 20)
#   REDOKIT_TWOSITE_TRIALS=50 ...   examples/pgcdc's two-site drill: site A killed at a
#                                   random moment, site B's apply --follow promotes
#                                   (default 1, ~5 s a trial)
#   REDOKIT_APPLY_FUZZ_HISTORIES=10000 histories of apply's differential fuzzer
#                                   per sink (default 200, 2-3 min under -race;
#                                   REDOKIT_APPLY_FUZZ_SEED=n replays from history
#                                   seed n, REDOKIT_APPLY_FUZZ_SINKS=postgres
#                                   limits the sinks)
#   REDOKIT_PGCDC_TXNS=20000 ...... transactions of examples/pgcdc's disaster
#                                   drill (default 3000)
#   REDOKIT_PGCDC_SNAPSHOT_ROWS=1000000 rows of 1 KiB in examples/pgcdc's
#                                   snapshot memory test (default 60000, ~10 s
#                                   under -race)
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
step() { printf '\n== %s (%ds)\n' "$*" $(( $(date +%s) - start )); }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "the main module alone (GOWORK=off: go.mod's versions, as a user of the module builds it)"
# go.work adds the benchmarks module, whose dependencies can raise versions
# in the build list: the main module would then be tested with versions a
# user of its go.mod never gets. Its packages must build with the same
# module versions either way (raise go.mod to what go.work picks), and build,
# vet and pass a few tests on go.mod alone; examples/outsidedriver's test
# builds redokit with an outside driver as a backend author would.
if ! diff <(GOWORK=off go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... | sort -u) \
          <(go list -deps -test -f '{{with .Module}}{{.Path}} {{.Version}}{{end}}' ./... | sort -u); then
  echo "go.work builds the main module with other versions than go.mod (< go.mod alone, > go.work): raise go.mod's"; exit 1
fi
GOWORK=off go build ./...
GOWORK=off go vet ./...
GOWORK=off go test -count=1 ./blob ./backends/local ./examples/outsidedriver
GOWORK=off go test -count=1 -run 'Test(Version|HelpAndNoArgs|UsageErrors)' ./cli

step "go vet"
go vet ./...

step "the local-only build (-tags redokit_nocloud)"
go vet -tags redokit_nocloud ./cmd/redokit ./cli

step "staticcheck"
# Pinned; the module cache keeps it between runs.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./... ./benchmarks/...
# The benchmarks program is its own module (its WAL and plotting deps stay out
# of the SDK's go.mod); go.work makes it buildable from here.
go vet ./benchmarks/...

if [ "${REDOKIT_NO_EMULATORS:-}" != "1" ] && [ -f scripts/emulators.sh ]; then
  step "local servers"
  # shellcheck source=emulators.sh
  source scripts/emulators.sh
  trap emulators_stop EXIT
  emulators_start
  # jq, which a test runs on redokit's --json (apt, like MariaDB's and
  # PostgreSQL's packages, once their apt run is over).
  emulators_tools
fi

export REDOKIT_CRASH_TRIALS="${REDOKIT_CRASH_TRIALS:-50}"
export REDOKIT_CRASH_GC_TRIALS="${REDOKIT_CRASH_GC_TRIALS:-100}"
export REDOKIT_BITFLIPS="${REDOKIT_BITFLIPS:-2000}"
export REDOKIT_FAULT_SCHEDULES="${REDOKIT_FAULT_SCHEDULES:-100}"
export REDOKIT_APPLY_KILL_TRIALS="${REDOKIT_APPLY_KILL_TRIALS:-20}"
export REDOKIT_FOLLOW_KILLS="${REDOKIT_FOLLOW_KILLS:-20}"
export REDOKIT_APPLY_FUZZ_HISTORIES="${REDOKIT_APPLY_FUZZ_HISTORIES:-200}"
# The staged-transaction kills run 10 times under -race (each trial's child
# is the race-built test binary, ~2 s a trial) and all of them without it,
# in their own step below.
staged_crash_trials="${REDOKIT_STAGED_CRASH_TRIALS:-100}"
export REDOKIT_STAGED_CRASH_TRIALS=10
step "go test -race (crash trials: $REDOKIT_CRASH_TRIALS; with reader and GC: $REDOKIT_CRASH_GC_TRIALS; bit flips: $REDOKIT_BITFLIPS; fault schedules: $REDOKIT_FAULT_SCHEDULES; apply kills per sink: $REDOKIT_APPLY_KILL_TRIALS; apply fuzz histories per sink: $REDOKIT_APPLY_FUZZ_HISTORIES)"
go test -race -count=1 -timeout 30m ./...

step "staged runs without -race: SIGKILL trials ($staged_crash_trials) and the memory bounds under a data limit (the writer's, and apply's of a transaction in parts)"
REDOKIT_STAGED_CRASH_TRIALS="$staged_crash_trials" go test -count=1 -run '^TestStagedTransactionCrash$' .
go test -count=1 -v -run '^TestStagedUnderDataLimit$' ./writer | grep -E '^(---|ok|FAIL|\s+staged_limit)' 
go test -count=1 -v -run '^TestApplyUnderDataLimit$' ./apply/internal/sqlsink | grep -E '^(---|ok|FAIL|\s+limit_test)'

step "go test ./benchmarks/... (the benchmark program's own checks: its baselines read what the reader reads)"
go test -count=1 -timeout 10m ./benchmarks/...

step "fuzz (${REDOKIT_FUZZTIME:-8s} per target)"
# Every Fuzz* function in the tree, each run alone for a bounded time.
while IFS=: read -r file target; do
  pkg="./$(dirname "$file")"
  echo "-- $pkg $target"
  # Go's fuzzer can end a run with a bare "context deadline exceeded" when the
  # time runs out while it is still minimising a new (passing) input; that is
  # the engine, not a finding. A real finding always writes its input under
  # testdata/fuzz and fails the retry too.
  for try in 1 2; do
    if out=$(go test -run='^$' -fuzz="^${target}\$" -fuzztime="${REDOKIT_FUZZTIME:-8s}" -fuzzminimizetime=200x "$pkg" 2>&1); then
      echo "$out" | tail -n 2; break
    fi
    echo "$out"
    if [ "$try" = 2 ] || echo "$out" | grep -q 'Failing input written' || ! echo "$out" | grep -q 'context deadline exceeded'; then
      exit 1
    fi
    echo "(fuzz engine timed out while minimising; running $target again)"
  done
done < <(git ls-files '*_test.go' | xargs grep -oE '^func Fuzz[A-Za-z0-9_]+' | sed 's/func //' | sort)

step "done"
