package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"time"
)

// Scenario is what a run sends.
type Scenario string

// The scenarios. Mixed is 80 % redirects and 20 % creates; Ceiling loads the
// in-process ceiling server exactly as Redirect loads linkraft.
const (
	ScenarioRedirect Scenario = "redirect"
	ScenarioCreate   Scenario = "create"
	ScenarioMixed    Scenario = "mixed"
	ScenarioStats    Scenario = "stats"
	ScenarioCeiling  Scenario = "ceiling"
)

// Scenarios lists every scenario, for flag help.
func Scenarios() []Scenario {
	return []Scenario{ScenarioRedirect, ScenarioCreate, ScenarioMixed, ScenarioStats, ScenarioCeiling}
}

// lateThreshold: an open-loop send that starts later than this after its
// intended time is counted as a late send.
const lateThreshold = time.Millisecond

// maxConnections bounds -c: each connection holds its own histograms
// (about 200 KB) and a file descriptor.
const maxConnections = 4096

// Config is one benchmark run. The zero value is not valid: use the flag
// defaults of "linkraft bench" or fill every field.
type Config struct {
	// Targets are linkraft nodes, "host:port" or "http://host:port".
	Targets  []string
	Scenario Scenario
	// Connections is the number of closed-loop workers, or the most
	// requests in flight in an open loop.
	Connections int
	// Rate > 0 selects the open loop: total requests per second.
	Rate     float64
	Duration time.Duration
	// Warmup runs the same load before Duration; its results are dropped.
	Warmup time.Duration
	// SeedLinks is how many links are created before a redirect, stats or
	// mixed run (the ceiling server gets the same number in its map).
	SeedLinks int
	Timeout   time.Duration // per request
	// Key is the API key creates, deletes and stats requests carry
	// (links:write on Workspace, and stats:read for the stats scenario);
	// redirects carry none.
	Key string
	// Workspace is where the seeds and the measured creates go: a
	// workspace of the bench's own, so a run never mixes its links with
	// anyone's and its seeds can be removed afterwards.
	Workspace string
	// KeepSeeds leaves the seeded links in place after the run; by
	// default they are deleted (the measured creates always stay).
	KeepSeeds bool
	// Ceiling: after a redirect, mixed or stats run, run the same load
	// against the in-process ceiling server and report the ratio.
	Ceiling bool
	// Progress, when set, receives a one-line status every second.
	Progress io.Writer
}

// openLoop reports whether requests are issued at a fixed rate.
func (c *Config) openLoop() bool { return c.Rate > 0 }

// needsSeeds reports whether the scenario reads existing links.
func (c *Config) needsSeeds() bool { return c.Scenario != ScenarioCreate }

// seedCount is how many links are created before the run. The create
// scenario reads none, but creates one anyway (and removes it with the
// seeds): a key that may not use the workspace then stops the bench
// before the run instead of turning the whole run into 403s.
func (c *Config) seedCount() int {
	if c.needsSeeds() {
		return c.SeedLinks
	}
	return 1
}

// workspaceName is the server's rule for workspace names (docs/API.md);
// checking it here also keeps the name safe to put in JSON unescaped.
var workspaceName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validate checks the config and normalises the targets to host:port.
func (c *Config) validate() error {
	if !c.Scenario.valid() {
		return fmt.Errorf("unknown scenario %q (want one of %v)", c.Scenario, Scenarios())
	}
	switch {
	case c.Connections < 1 || c.Connections > maxConnections:
		return fmt.Errorf("connections must be 1-%d, got %d", maxConnections, c.Connections)
	case c.Rate < 0:
		return fmt.Errorf("rate must be >= 0, got %v", c.Rate)
	case c.Duration <= 0:
		return fmt.Errorf("duration must be positive, got %v", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("warmup must be >= 0, got %v", c.Warmup)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive, got %v", c.Timeout)
	case c.SeedLinks < 1 && c.needsSeeds():
		return fmt.Errorf("scenario %s reads links: seed-links must be >= 1", c.Scenario)
	case c.Ceiling && (c.Scenario == ScenarioCreate || c.Scenario == ScenarioCeiling):
		return fmt.Errorf("ceiling comparison is for the redirect, mixed and stats scenarios, not %s", c.Scenario)
	}
	if c.Scenario == ScenarioCeiling {
		return nil // the targets and the workspace are not used
	}
	if !workspaceName.MatchString(c.Workspace) {
		return fmt.Errorf("workspace %q: want 1-64 of A-Z a-z 0-9 _ -", c.Workspace)
	}
	targets, err := normaliseTargets(c.Targets)
	if err != nil {
		return err
	}
	c.Targets = targets
	return nil
}

func (s Scenario) valid() bool {
	for _, known := range Scenarios() {
		if s == known {
			return true
		}
	}
	return false
}

// normaliseTargets turns "http://host:port/" and "host:port" into host:port.
func normaliseTargets(in []string) ([]string, error) {
	var out []string
	for _, t := range in {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if strings.HasPrefix(t, "https://") {
			return nil, fmt.Errorf("target %q: https is not supported; load the nodes' plain HTTP port", t)
		}
		addr := strings.TrimSuffix(strings.TrimPrefix(t, "http://"), "/")
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("target %q: want host:port or http://host:port: %w", t, err)
		}
		out = append(out, addr)
	}
	if len(out) == 0 {
		return nil, errors.New("no targets")
	}
	return out, nil
}
