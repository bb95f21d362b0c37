package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
)

// Server names in reports.
const (
	serverLinkraft = "linkraft"
	serverCeiling  = "ceiling"
)

// Run seeds links in cfg.Workspace, runs the warm-up and the measured
// load, and, with cfg.Ceiling, the same load against the in-process
// ceiling server; then, unless cfg.KeepSeeds, it deletes the seeds.
// Cancelling ctx ends the load early; the report then covers what ran.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	runID, err := newRunID()
	if err != nil {
		return nil, err
	}
	if cfg.Scenario == ScenarioCeiling {
		return runCeiling(ctx, &cfg, localSeeds(cfg.SeedLinks, runID))
	}
	targets := newTargets(cfg.Targets, cfg.Connections)
	defer closeTargets(targets)
	seeds, err := seedLinks(ctx, &cfg, targets, runID)
	if err != nil {
		err = fmt.Errorf("bench: seeding %d links in workspace %q: %w", cfg.seedCount(), cfg.Workspace, err)
		// Remove what was created before the failure, and say how that went:
		// there is no report to say it in.
		if !cfg.KeepSeeds {
			if res, _ := removeSeeds(ctx, &cfg, targets, seeds); res.Created > 0 {
				err = fmt.Errorf("%w (of the %d created, %d removed, %d not)", err, res.Created, res.Removed, res.Failed)
			}
		}
		return nil, err
	}
	var reads []string // the create scenario reads none, not even its probe
	if cfg.needsSeeds() {
		reads = seeds.codes
	}
	rep := load(ctx, &cfg, serverLinkraft, targets, reads, runID)
	rep.addSeeds(seeds.sent)
	var ceilingErr error
	if cfg.Ceiling && cfg.needsSeeds() && ctx.Err() == nil {
		var ceiling *Report
		if ceiling, ceilingErr = runCeiling(ctx, &cfg, seeds); ceilingErr == nil {
			rep.attachCeiling(ceiling)
		}
	}
	rep.Seeds = &SeedCleanup{Workspace: cfg.Workspace, Created: len(seeds.codes), Kept: cfg.KeepSeeds}
	if !cfg.KeepSeeds {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "bench: removing %d seeded links from workspace %s\n", len(seeds.codes), cfg.Workspace)
		}
		var sent []int64
		*rep.Seeds, sent = removeSeeds(ctx, &cfg, targets, seeds)
		rep.addCleanup(sent)
	}
	if ceilingErr != nil {
		return nil, ceilingErr
	}
	return rep, nil
}

// runCeiling starts the in-process ceiling server with the seeded links
// and loads it with cfg's load.
func runCeiling(ctx context.Context, cfg *Config, seeds *seeded) (*Report, error) {
	links := make(map[string]string, len(seeds.codes))
	for i, code := range seeds.codes {
		links[code] = seeds.urls[i]
	}
	srv, err := StartCeiling("127.0.0.1:0", links)
	if err != nil {
		return nil, err
	}
	targets := newTargets([]string{srv.Addr()}, cfg.Connections)
	rep := load(ctx, cfg, serverCeiling, targets, seeds.codes, seeds.runID)
	closeTargets(targets)
	if err := srv.Close(); err != nil {
		return nil, err
	}
	return rep, nil
}

// localSeeds makes n links for the ceiling server without any request:
// 7-character codes, and URLs shaped like the seeded ones.
func localSeeds(n int, runID string) *seeded {
	s := &seeded{runID: runID, codes: make([]string, n), urls: make([]string, n)}
	for i := range n {
		code := strconv.FormatInt(int64(i), 36)
		s.codes[i] = "c000000"[:max(7-len(code), 1)] + code
		s.urls[i] = seedURL(runID, i)
	}
	return s
}

func seedURL(runID string, i int) string {
	return "https://example.com/bench/" + runID + "/" + strconv.Itoa(i)
}

// newRunID names a run; created URLs carry it, so runs never collide.
func newRunID() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("bench: run id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
