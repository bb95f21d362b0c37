package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// updateReadme rewrites README.md's Flags table instead of comparing it.
var updateReadme = flag.Bool("update", false, "rewrite README.md's Flags table from serve's flag table")

const readmePath = "../../README.md"

// TestReadmeFlagTable: README.md's Flags table is serve's flag table
// (serveConfig.flagDefs) rendered, so a flag added, renamed or described
// anew there shows in the README too, and a README edit that the table
// does not have fails here. README.md is the checked copy: after changing
// a flag, regenerate its rows with
//
//	go test ./cmd/linkraft -run TestReadmeFlagTable -update
//
// which rewrites the table's rows only, and commit both.
func TestReadmeFlagTable(t *testing.T) {
	want := readmeFlagRows(t, (&serveConfig{}).flagDefs("host"))
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start, end, err := readmeFlagTable(lines)
	if err != nil {
		t.Fatal(err)
	}
	got := lines[start:end]
	if slices.Equal(got, want) {
		return
	}
	if *updateReadme {
		updated := slices.Concat(lines[:start], want, lines[end:])
		if err := os.WriteFile(readmePath, []byte(strings.Join(updated, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the Flags table of %s", readmePath)
		return
	}
	t.Errorf("README.md's Flags table differs from serve's flag table (- README, + table); "+
		"regenerate it with go test ./cmd/linkraft -run TestReadmeFlagTable -update:\n%s", lineDiff(got, want))
}

// readmeFlagTable finds the rows of the table under README.md's "## Flags"
// heading: lines[start:end], after its header and separator.
func readmeFlagTable(lines []string) (start, end int, err error) {
	heading := slices.Index(lines, "## Flags")
	if heading < 0 {
		return 0, 0, fmt.Errorf("%s has no \"## Flags\" heading", readmePath)
	}
	header := slices.Index(lines[heading:], "| flag | default | meaning |")
	if header < 0 || heading+header+1 >= len(lines) || lines[heading+header+1] != "|---|---|---|" {
		return 0, 0, fmt.Errorf("%s: no \"| flag | default | meaning |\" table with a |---|---|---| separator under ## Flags", readmePath)
	}
	start = heading + header + 2
	end = start
	for end < len(lines) && strings.HasPrefix(lines[end], "|") {
		end++
	}
	return start, end, nil
}

// readmeFlagRows renders defs as README.md's Flags table rows: a row per
// flag with readme text, followed flags with sharesRow named beside it.
// The default column says each flag's default once, or once for the row
// when they are all the same ("none" for --tls-cert and --tls-key).
func readmeFlagRows(t *testing.T, defs []flagDef) []string {
	t.Helper()
	fs := flag.NewFlagSet("readme", flag.ContinueOnError)
	registerFlags(fs, defs)
	type row struct {
		names, defaults []string
		meaning         string
	}
	var rows []*row
	for _, d := range defs {
		def := d.readmeDefault
		if def == "" {
			def = readmeDefault(fs.Lookup(d.name))
		}
		name := "`--" + d.name + "`"
		switch {
		case d.sharesRow && d.readme != "":
			t.Errorf("--%s has readme text and shares the row before: one or the other", d.name)
		case d.sharesRow && len(rows) > 0:
			r := rows[len(rows)-1]
			r.names, r.defaults = append(r.names, name), append(r.defaults, def)
		case d.readme != "":
			rows = append(rows, &row{names: []string{name}, defaults: []string{def}, meaning: d.readme})
		default:
			t.Errorf("--%s has no README row: give it readme text, or sharesRow", d.name)
		}
	}
	var out []string
	for _, r := range rows {
		defaults := r.defaults
		if len(slices.Compact(slices.Clone(defaults))) == 1 {
			defaults = defaults[:1]
		}
		out = append(out, fmt.Sprintf("| %s | %s | %s |", strings.Join(r.names, ", "), strings.Join(defaults, ", "), r.meaning))
	}
	return out
}

// readmeDefault is the README's default column for f: "none" for an
// empty string, "off" for false, else the default in code, durations as
// people write them (1h, not 1h0m0s).
func readmeDefault(f *flag.Flag) string {
	switch v := f.Value.(flag.Getter).Get().(type) {
	case string:
		if v == "" {
			return "none"
		}
	case bool:
		if !v {
			return "off"
		}
	case time.Duration:
		s := v.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return "`" + s + "`"
	}
	return "`" + f.DefValue + "`"
}

// lineDiff is a line diff of a and b: the lines only in a, with "-", and
// only in b, with "+", around those in common (a longest common
// subsequence), which it leaves out: the table's rows are long.
func lineDiff(a, b []string) string {
	// common[i][j]: the longest common subsequence of a[i:] and b[j:].
	common := make([][]int, len(a)+1)
	for i := range common {
		common[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				common[i][j] = common[i+1][j+1] + 1
			} else {
				common[i][j] = max(common[i+1][j], common[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i, j = i+1, j+1
		case j == len(b) || (i < len(a) && common[i+1][j] >= common[i][j+1]):
			fmt.Fprintf(&out, "- %s\n", a[i])
			i++
		default:
			fmt.Fprintf(&out, "+ %s\n", b[j])
			j++
		}
	}
	return out.String()
}

// TestLineDiff: the README test's diff marks what changed and only that.
func TestLineDiff(t *testing.T) {
	got := lineDiff([]string{"a", "b", "c"}, []string{"a", "x", "c", "d"})
	want := "- b\n+ x\n+ d\n"
	if got != want {
		t.Errorf("lineDiff = %q, want %q", got, want)
	}
}

// TestServeFlagChecks: each check of serve's flag table refuses what it
// should, with the message it has always given.
func TestServeFlagChecks(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--id="}, "--id must not be empty"},
		{[]string{"--code-length=3"}, "--code-length must be 4-10"},
		{[]string{"--redirect-status=200"}, "--redirect-status must be 301, 302, 307 or 308"},
		{[]string{"--click-flush-interval=0"}, "--write-timeout and --click-flush-interval must be positive"},
		{[]string{"--shutdown-drain=-1s"}, "--shutdown-drain must be >= 0 (0: no drain)"},
		{[]string{"--snapshot-threshold=15"}, "--snapshot-threshold must be at least 16"},
		{[]string{"--engine-cache-mb=0"}, "--engine-cache-mb must be at least 1"},
		{[]string{"--option-cache=0"}, "--option-cache must be between 1 and 1073741824"},
		{[]string{"--record-cache=0"}, "--record-cache must be between 1 and 1073741824"},
		{[]string{"--record-cache=1073741825"}, "--record-cache must be between 1 and 1073741824"},
		{[]string{"--create-burst=0"}, "--create-rate must be >= 0 and --create-burst >= 1"},
		{[]string{"--max-conns-per-ip=-1"}, "--max-conns-per-ip must be >= 0 (0: no cap)"},
		{[]string{"--base-url=ftp://s.example"}, "--base-url must start with http:// or https://"},
		{[]string{"--cluster-key=short"}, "--cluster-key (32 bytes in base64, as `linkraft keygen` prints): "},
		{[]string{"--bootstrap-expect=-1"}, "--bootstrap-expect must be >= 0"},
		{[]string{"--trusted-proxy=not-an-address"}, "--trusted-proxy: "},
		{[]string{"--backup-to=/backups", "--backup-retain=0"}, "--backup-interval must be at least 1s and --backup-retain at least 1"},
		{[]string{"--tls-cert=c.pem"}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert=c.pem", "--tls-key=k.pem", "--acme-email=a@s.example"}, "--tls-cert/--tls-key and ACME (--acme-domains, --acme-email) exclude each other"},
		{[]string{"--acme-domains=s.example", "--acme-directory=http://ca.example"}, "--acme-directory must be an https URL"},
		{[]string{"--acme-domains=not a name"}, "--acme-domains: "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseServeFlags(append([]string{"--id=n1"}, tt.args...), io.Discard)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v, want one starting %q", err, tt.want)
			}
		})
	}
	if _, err := parseServeFlags([]string{"--id=n1", "--backup-retain=0"}, io.Discard); err != nil {
		t.Errorf("--backup-retain without --backup-to: %v, want no error", err)
	}
}
