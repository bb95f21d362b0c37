// Command mutate checks that the tests guarding linkraft's guarantees
// catch a broken build. Each entry of its table (mutations.go) is a
// realistic one-line bug in the code behind one guarantee of
// docs/RELIABILITY.md and the tests said to guard it. mutate copies the
// module once, and for each entry runs the guard on the unchanged copy
// (it must pass), writes the bug, runs the guard again (it must fail),
// and puts the file back. It prints a Markdown table of what was caught
// and exits non-zero when a bug survived, a guard failed on the
// unchanged code, or an entry no longer applies.
//
//	go run ./e2e/mutate                  # every entry (make mutate)
//	go run ./e2e/mutate -run 'hash|tags' # the entries whose name matches
//	go run ./e2e/mutate -list            # the table, without running it
//
// The working tree is never changed: the copy lives in a temporary
// directory and shares only Go's build cache.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// mutation is one bug and the tests that must catch it.
type mutation struct {
	name      string // short, unique: what -run matches
	guarantee string // the guarantee broken, as docs/RELIABILITY.md words it
	file      string // relative to the module root
	from, to  string // from must occur exactly once in file
	also      []edit // further edits, for a bug that takes more than one
	pkg, run  string // the guard: go test -run run pkg
	race      bool   // the guard needs -race: the bug is a data race
}

// edit replaces text that must occur exactly once in a file.
type edit struct{ file, from, to string }

func (m mutation) edits() []edit { return append([]edit{{m.file, m.from, m.to}}, m.also...) }

// outcome is what running one mutation found.
type outcome struct {
	result   string // caught, SURVIVED, or why it could not be judged
	evidence string // the guard's first failure line
	took     time.Duration
}

func main() {
	run := flag.String("run", "", "run only the mutations whose name matches this regular expression")
	list := flag.Bool("list", false, "print the mutations without running them")
	timeout := flag.Duration("timeout", 10*time.Minute, "the longest one guard may run")
	flag.Parse()
	if err := mutate(*run, *list, *timeout, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mutate:", err)
		os.Exit(1)
	}
}

func mutate(pattern string, listOnly bool, timeout time.Duration, out io.Writer) error {
	match, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	var chosen []mutation
	for _, m := range mutations {
		if match.MatchString(m.name) {
			chosen = append(chosen, m)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no mutation matches %q", pattern)
	}
	if listOnly {
		printTable(out, chosen, nil)
		return nil
	}
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "linkraft-mutate-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := copyModule(root, dir); err != nil {
		return err
	}
	outcomes := make([]outcome, len(chosen))
	failed := 0
	for i, m := range chosen {
		fmt.Fprintf(os.Stderr, "mutate: %d/%d %s\n", i+1, len(chosen), m.name)
		outcomes[i] = runMutation(dir, m, timeout)
		if outcomes[i].result != "caught" {
			failed++
		}
		fmt.Fprintf(os.Stderr, "mutate: %s: %s %s\n", m.name, outcomes[i].result, outcomes[i].evidence)
	}
	printTable(out, chosen, outcomes)
	if failed > 0 {
		return fmt.Errorf("%d of %d mutations not caught", failed, len(chosen))
	}
	return nil
}

// runMutation judges one mutation in the copy at dir and puts its files
// back whatever happens.
func runMutation(dir string, m mutation, timeout time.Duration) outcome {
	start := time.Now()
	judged := func(result, evidence string) outcome {
		return outcome{result, evidence, time.Since(start).Round(time.Second)}
	}
	originals, mutated := map[string][]byte{}, map[string][]byte{}
	for _, e := range m.edits() {
		path := filepath.Join(dir, e.file)
		src, ok := mutated[path]
		if !ok {
			var err error
			if src, err = os.ReadFile(path); err != nil {
				return judged("no such file", err.Error())
			}
			originals[path] = src
		}
		if n := bytes.Count(src, []byte(e.from)); n != 1 {
			return judged("stale", fmt.Sprintf("%s: the text to change occurs %d times, want once", e.file, n))
		}
		mutated[path] = bytes.Replace(src, []byte(e.from), []byte(e.to), 1)
	}
	if failure, err := guard(dir, m, timeout); err != nil {
		return judged("guard fails unmutated", failure)
	}
	defer writeFiles(originals) //nolint:errcheck // the copy is removed at the end
	if err := writeFiles(mutated); err != nil {
		return judged("write", err.Error())
	}
	failure, err := guard(dir, m, timeout)
	switch {
	case err == nil:
		return judged("SURVIVED", "")
	case strings.Contains(failure, "build failed"), strings.Contains(failure, "setup failed"):
		return judged("does not compile", failure)
	case errors.Is(err, context.DeadlineExceeded):
		return judged("caught", "the guard did not finish within "+timeout.String())
	}
	return judged("caught", failure)
}

func writeFiles(files map[string][]byte) error {
	for path, b := range files {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// guard runs the mutation's tests in dir; on failure it returns the
// first line that says why.
func guard(dir string, m mutation, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args := []string{"test", "-count=1", "-run", m.run}
	if m.race {
		args = append(args, "-race")
	}
	cmd := exec.CommandContext(ctx, "go", append(args, m.pkg)...)
	cmd.Dir = dir
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	if err == nil {
		return "", nil
	}
	return failureOf(out), err
}

// testMessage and failedTest are go test's lines that say what failed: a
// test's own message, else its --- FAIL line.
var (
	testMessage = regexp.MustCompile(`(?m)^\s+\S+_test\.go:\d+: .*$`)
	failedTest  = regexp.MustCompile(`(?m)^(--- FAIL: .*|FAIL\s.*\[(build|setup) failed\])$`)
)

// failureOf picks the line of out that best says what failed: the last
// message of a failed test (logs come before the failure that ends it),
// else the first --- FAIL line, else the last line.
func failureOf(out []byte) string {
	if ms := testMessage.FindAll(out, -1); len(ms) > 0 {
		// The e2e harness ends a failed test with each process's output: the
		// failure is the message before those.
		for i := len(ms) - 1; i >= 0; i-- {
			if !bytes.Contains(ms[i], []byte(": output of ")) {
				return strings.TrimSpace(string(ms[i]))
			}
		}
		return strings.TrimSpace(string(ms[len(ms)-1]))
	}
	if m := failedTest.Find(out); m != nil {
		return strings.TrimSpace(string(m))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// copyModule copies the module at root into dir: every file but version
// control, local data and the tools make builds (the copy's guards find
// them through the environment, as make test sets it).
func copyModule(root, dir string) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		switch e.Name() {
		case ".git", "data", ".tools", "linkraft":
			continue
		}
		if out, err := exec.Command("cp", "-r", filepath.Join(root, e.Name()), dir).CombinedOutput(); err != nil {
			return fmt.Errorf("copy %s: %v: %s", e.Name(), err, out)
		}
	}
	return nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the linkraft module")
	}
	return filepath.Dir(gomod), nil
}

// printTable writes the mutations as a Markdown table, with their
// outcomes when there are some.
func printTable(w io.Writer, ms []mutation, outcomes []outcome) {
	fmt.Fprintln(w, "| mutation | guarantee | bug | guard | result |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for i, m := range ms {
		result := "—"
		if outcomes != nil {
			o := outcomes[i]
			result = fmt.Sprintf("%s (%s)", o.result, o.took)
			if o.evidence != "" {
				result += ": " + cell(o.evidence, 160)
			}
		}
		to := "(removed)"
		if m.to != "" {
			to = "`" + cell(m.to, 80) + "`"
		}
		bug := fmt.Sprintf("`%s`: `%s` → %s", m.file, cell(m.from, 80), to)
		if len(m.also) > 0 {
			bug += fmt.Sprintf(" (and %d more edits)", len(m.also))
		}
		race := ""
		if m.race {
			race = "-race "
		}
		run := strings.ReplaceAll(m.run, "|", `\|`) // a table cell, even in code
		fmt.Fprintf(w, "| %s | %s | %s | `go test %s-run '%s' %s` | %s |\n", m.name, m.guarantee, bug, race, run, m.pkg, result)
	}
}

// cell makes s fit a Markdown table cell of at most n runes.
func cell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "`", "'")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
