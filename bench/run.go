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

// Run seeds links (unless the scenario only creates), runs the warm-up and
// the measured load, and, with cfg.Ceiling, the same load against the
// in-process ceiling server. Cancelling ctx ends the load early; the
// report then covers what ran.
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
	seeds := &seeded{sent: make([]int64, len(targets))}
	if cfg.needsSeeds() {
		if seeds, err = seedLinks(ctx, &cfg, targets, runID); err != nil {
			return nil, fmt.Errorf("bench: seeding %d links: %w", cfg.SeedLinks, err)
		}
	}
	rep := load(ctx, &cfg, serverLinkraft, targets, seeds.codes, runID)
	rep.addSeeds(seeds.sent)
	if cfg.Ceiling && cfg.needsSeeds() && ctx.Err() == nil {
		ceiling, err := runCeiling(ctx, &cfg, seeds)
		if err != nil {
			return nil, err
		}
		rep.attachCeiling(ceiling)
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
