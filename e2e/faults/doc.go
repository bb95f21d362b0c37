// Package faults is linkraft's Jepsen-style fault-injection suite. It owns
// everything under e2e/faults: a harness that starts 3 or 5 real
// `linkraft serve` processes (each in its own network namespace on a private
// bridge when the test runs as root with ip and iptables, on 127.0.0.x
// otherwise), a concurrent workload that records every operation, nemeses
// (partitions, kill -9, SIGSTOP, adding and removing nodes) applied on a
// seeded random schedule, and the checkers that judge the recorded history,
// including a per-code linearizability check with porcupine.
//
// The non-test files hold the history format and the checkers, so they can be
// reused on a history.jsonl written by an earlier run; the harness lives in
// the _test.go files. Run the short schedule with
//
//	go test -race -count=1 -v -run TestFaultSchedule ./e2e/faults/
//
// and repeat a run with -faults.seed=N (every run prints its seed). Flags:
// -faults.nodes (3 or 5), -faults.duration, -faults.soak, -faults.artifacts
// (or LINKRAFT_FAULT_ARTIFACTS). The suite is skipped with -short.
package faults
