package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// docRecipe is a recipe: a block of docs/DEPLOY.md that an operator
// pastes (a shell block) or writes into a file (an environment file, a
// drop-in), marked by an HTML comment on the line before it:
//
//	<!-- recipe: first-status -->
//	    export LINKRAFT_ADMIN_TOKEN=…
//	    linkraft status
//
// The comment does not show on the rendered page, and the test finds the
// block by name, so a rewrite of the text around it keeps the test honest
// as long as the marker stays with its block.
type docRecipe struct {
	name string
	line int    // of the marker in DEPLOY.md, for messages
	text string // the block without its indentation, ending in a newline
}

var (
	// recipeMarker is a well-formed marker; indent is the marker's own
	// (a block inside a list item is indented with the item).
	recipeMarker = regexp.MustCompile(`^( *)<!-- recipe: ([a-z0-9][a-z0-9-]*) -->\s*$`)
	// anyMarker catches a marker that recipeMarker would not read (a typo
	// must not make a recipe silently disappear from the test).
	anyMarker = regexp.MustCompile(`<!--\s*recipe`)
)

// parseRecipes reads every marked block of doc. The block is the lines
// after the marker indented by at least four more spaces than it, blank
// lines included, up to the first line that is not; problems lists every
// marker that does not introduce such a block, and duplicates.
func parseRecipes(doc string) (map[string]docRecipe, []string) {
	lines := strings.Split(doc, "\n")
	recipes := map[string]docRecipe{}
	var problems []string
	for i, l := range lines {
		if !anyMarker.MatchString(l) {
			continue
		}
		m := recipeMarker.FindStringSubmatch(l)
		if m == nil {
			problems = append(problems, fmt.Sprintf("DEPLOY.md:%d: malformed recipe marker %q (want <!-- recipe: name -->)", i+1, strings.TrimSpace(l)))
			continue
		}
		name, indent := m[2], len(m[1])+4
		if prev, dup := recipes[name]; dup {
			problems = append(problems, fmt.Sprintf("DEPLOY.md:%d: recipe %q marked again (first at line %d)", i+1, name, prev.line))
			continue
		}
		var block []string
		for _, b := range lines[i+1:] {
			if strings.TrimSpace(b) != "" && len(b)-len(strings.TrimLeft(b, " ")) < indent {
				break
			}
			block = append(block, b)
		}
		for len(block) > 0 && strings.TrimSpace(block[len(block)-1]) == "" {
			block = block[:len(block)-1]
		}
		if len(block) == 0 || strings.TrimSpace(block[0]) == "" {
			problems = append(problems, fmt.Sprintf("DEPLOY.md:%d: recipe %q is not followed by a block indented %d spaces on the next line", i+1, name, indent))
			continue
		}
		for j, b := range block {
			if len(b) >= indent {
				block[j] = b[indent:]
			} else {
				block[j] = ""
			}
		}
		recipes[name] = docRecipe{name: name, line: i + 1, text: strings.Join(block, "\n") + "\n"}
	}
	return recipes, problems
}

// markerNames lists the recipes in doc order, for messages.
func markerNames(recipes map[string]docRecipe) []string {
	names := make([]string, 0, len(recipes))
	for n := range recipes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return recipes[names[i]].line < recipes[names[j]].line })
	return names
}

// substRule replaces what matches pattern with repl, where \1 and \2 are
// the pattern's groups. The pattern is written in the part of the syntax
// Go's regexp and GNU sed -E share, so the shims (ssh, scp, systemctl
// reading a unit) apply exactly the rules the test applies to a recipe.
type substRule struct {
	re      *regexp.Regexp
	pattern string
	repl    string
}

func newRule(pattern, repl string) substRule {
	if strings.ContainsAny(strings.NewReplacer(`\1`, "", `\2`, "").Replace(repl), "\\&|$\n") {
		panic("deploy-doc: a replacement the sed script cannot hold: " + repl)
	}
	return substRule{re: regexp.MustCompile(pattern), pattern: pattern, repl: repl}
}

func (r substRule) apply(s string) string {
	return r.re.ReplaceAllString(s, strings.NewReplacer(`\1`, "${1}", `\2`, "${2}").Replace(r.repl))
}

// sedScript is rules as a script for sed -E -f.
func sedScript(rules []substRule) string {
	var b strings.Builder
	for _, r := range rules {
		fmt.Fprintf(&b, "s|%s|%s|g\n", strings.ReplaceAll(r.pattern, "|", `\|`), r.repl)
	}
	return b.String()
}

// The substitution table: the doc's example paths and addresses, and
// nothing else, become the simulation's. A path of the doc on a VM lies
// under that VM's directory; "this machine" (127.0.0.1, 0.0.0.0, an empty
// host) is the VM's own loopback address, since the VMs share the test
// machine's network.
const pathBoundary = `(^|[[:space:]='"(])`

// vmRules maps a VM's paths and own addresses.
func vmRules(root, ip string) []substRule {
	return []substRule{
		newRule(pathBoundary+`/(etc|var/lib|usr/local/bin|root|tmp)/`, `\1`+root+`/\2/`),
		newRule(`(^|[^0-9.])127\.0\.0\.1\b`, `\1`+ip),
		newRule(`(^|[^0-9.])0\.0\.0\.0\b`, `\1`+ip),
		// LINKRAFT_HTTP_ADDR=:8080 listens on every address of the VM.
		newRule(`=:([0-9]+)\b`, `=`+ip+`:\1`),
	}
}

// workstationRules maps the workstation's throw-away paths (/tmp), the
// copy of the environment file its operator keeps (/etc), and its own
// loopback address. Remote paths (scp's HOST:/path, ssh commands) are
// left to the shims, which map them onto the VM named.
func workstationRules(root, ip string) []substRule {
	return []substRule{
		newRule(pathBoundary+`/(etc|tmp)/`, `\1`+root+`/\2/`),
		newRule(`(^|[^0-9.])127\.0\.0\.1\b`, `\1`+ip),
	}
}

// deployDocNets are the loopback blocks that stand for 192.0.2.0/24, one
// a day: no other test uses them, so each day's nodes can listen on the
// doc's fixed ports, whichever other day runs at the same time.
var deployDocNets = map[string]string{
	"TestDeployDoc":         "127.0.87.",
	"TestDeployDocBucketS3": "127.0.88.",
	"TestDeployDocHTTPS":    "127.0.89.",
	"TestDeployDocHAProxy":  "127.0.90.",
}

// deployDocHost stands for the public name s.example.com.
const deployDocHost = "s.deploydoc.test"

var (
	docAddr = regexp.MustCompile(`(^|[^0-9.])192\.0\.2\.1([0-9])\b`)
	docID   = regexp.MustCompile(`\blr([0-9])\b`)
	docHost = regexp.MustCompile(`\bs\.example\.com\b`)
)

// docSubst maps the doc's VM addresses and its public name. roles says
// which simulated VM plays each of the doc's VMs (lr1 … lr5): the same one
// by default, another where the doc says to adapt a recipe ("on lr2 and
// lr3 change only …", "say it is lr1"), and then its id too. All at once,
// so that roles may swap.
func docSubst(s string, roles map[string]*simHost) string {
	s = docAddr.ReplaceAllStringFunc(s, func(m string) string {
		g := docAddr.FindStringSubmatch(m)
		if vm, ok := roles["lr"+g[2]]; ok {
			return g[1] + vm.ip
		}
		return m
	})
	s = docID.ReplaceAllStringFunc(s, func(m string) string {
		if vm, ok := roles[m]; ok {
			return vm.name
		}
		return m
	})
	return docHost.ReplaceAllString(s, deployDocHost)
}

// leftover finds what a rendered recipe still holds of the doc's examples:
// an address the table does not know, a placeholder nobody filled.
var leftover = regexp.MustCompile(`192\.0\.2\.[0-9]+|<[a-z][a-z_ -]*>`)

// TestDeployDocRecipes checks the reading of markers and the substitution
// table that TestDeployDoc relies on, without a cluster: a marker the
// parser misread would drop a recipe from the test unnoticed, and a table
// that sed applies differently from Go would run a unit file or an ssh
// command on the wrong paths.
func TestDeployDocRecipes(t *testing.T) {
	doc := strings.Join([]string{
		"Text:",
		"",
		"<!-- recipe: one -->",
		"    echo a",
		"",
		"    echo b",
		"",
		"1. **A step**:",
		"",
		"   <!-- recipe: in-list -->",
		"       ssh root@192.0.2.12 'systemctl restart linkraft'",
		"       wait_caught_up 192.0.2.12 lr2",
		"",
		"   More text.",
		"<!-- recipe: one -->",
		"    again",
		"<!--recipe:typo-->",
		"<!-- recipe: no-block -->",
		"text, not a block",
	}, "\n")
	recipes, problems := parseRecipes(doc)
	if got := recipes["one"].text; got != "echo a\n\necho b\n" {
		t.Errorf("recipe one: %q", got)
	}
	if got := recipes["in-list"].text; got != "ssh root@192.0.2.12 'systemctl restart linkraft'\nwait_caught_up 192.0.2.12 lr2\n" {
		t.Errorf("recipe in-list: %q", got)
	}
	if len(problems) != 3 || !strings.Contains(problems[0], "marked again") || !strings.Contains(problems[1], "malformed") || !strings.Contains(problems[2], "no-block") {
		t.Errorf("problems: want the duplicate, the typo and the marker without a block, got %q", problems)
	}

	// Roles swap at once: the doc's lr1 played by lr2 and the reverse.
	lr1, lr2 := &simHost{name: "lr1", ip: "127.0.87.11"}, &simHost{name: "lr2", ip: "127.0.87.12"}
	if got := docSubst("wait_caught_up 192.0.2.11 lr1; wait_caught_up 192.0.2.12 lr2 # s.example.com", map[string]*simHost{"lr1": lr2, "lr2": lr1}); got != "wait_caught_up 127.0.87.12 lr2; wait_caught_up 127.0.87.11 lr1 # "+deployDocHost {
		t.Errorf("docSubst: %q", got)
	}

	sample := strings.Join([]string{
		"EnvironmentFile=/etc/linkraft.env",
		"ExecStart=/usr/local/bin/linkraft serve",
		"LINKRAFT_HTTP_ADDR=:8080",
		"LINKRAFT_RAFT_ADDR=0.0.0.0:8081",
		"install -m 0600 /root/linkraft.env /etc/linkraft.env",
		`adm http://127.0.0.1:8080/admin/join --key "$(cat /tmp/check/admin.key)"`,
		"ls /var/lib/linkraft-backups; scp x root@h:/root/; echo /etc/not-at-start 10.0.0.0 127.0.0.10",
	}, "\n") + "\n"
	root := t.TempDir()
	for _, rules := range [][]substRule{vmRules("/sim/lr1", "127.0.87.11"), workstationRules("/sim/ws", "127.0.87.10")} {
		want := sample
		for _, r := range rules {
			want = r.apply(want)
		}
		script := filepath.Join(root, "paths.sed")
		if err := os.WriteFile(script, []byte(sedScript(rules)), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sed", "-E", "-f", script)
		cmd.Stdin = strings.NewReader(sample)
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("sed -E -f: %v", err)
		}
		if string(got) != want {
			t.Errorf("sed and Go apply the table differently:\nsed: %s\nGo:  %s", got, want)
		}
		if !strings.Contains(want, "root@h:/root/") {
			t.Errorf("a remote path was mapped as a local one: %s", want)
		}
	}
}
