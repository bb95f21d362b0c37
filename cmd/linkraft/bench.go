package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/linkraft/linkraft/bench"
)

// benchOutputs are where "linkraft bench" writes its report.
type benchOutputs struct {
	json bool
	html string
}

const benchUsage = `Usage: linkraft bench [flags]

Load one or more nodes and report throughput and latency: progress on
stderr, the report on stdout. Every flag can also be set as LINKRAFT_<NAME>
(--key is LINKRAFT_KEY); a flag on the command line wins over the
environment.

Flags:
`

func parseBenchFlags(args []string, stderr io.Writer) (*bench.Config, benchOutputs, error) {
	c := &bench.Config{}
	var out benchOutputs
	var targets, scenario string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&targets, "targets", "127.0.0.1:8080", "comma-separated nodes to load, host:port or http://host:port (round-robin, as DNS would); the default is a single node on :8080, the Procfile cluster is 127.0.0.1:8001,127.0.0.1:8002,127.0.0.1:8003")
	fs.StringVar(&scenario, "scenario", string(bench.ScenarioRedirect), fmt.Sprintf("what to send: one of %v", bench.Scenarios()))
	fs.IntVar(&c.Connections, "connections", 64, "closed loop: connections; open loop: most requests in flight")
	fs.IntVar(&c.Connections, "c", 64, "shorthand for --connections")
	fs.Float64Var(&c.Rate, "rate", 0, "total requests per second; > 0 runs an open loop (latency from the intended send time)")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "measured run length")
	fs.DurationVar(&c.Warmup, "warmup", 2*time.Second, "load before the measured run; its results are dropped")
	fs.IntVar(&c.SeedLinks, "seed-links", 1000, "links created before a redirect, stats or mixed run")
	fs.DurationVar(&c.Timeout, "timeout", 5*time.Second, "per-request timeout")
	fs.StringVar(&c.Key, "key", "", "API key for creates, deletes and stats reads: links:write on --workspace (and stats:read for --scenario stats); an admin key, or one with workspaces [\"*\"], works")
	fs.StringVar(&c.Workspace, "workspace", "bench", "workspace the seeds and the measured creates go to")
	fs.BoolVar(&c.KeepSeeds, "keep-seeds", false, "keep the seeded links after the run (by default they are deleted; measured creates always stay)")
	fs.BoolVar(&c.Ceiling, "ceiling", false, "also run the same load against an in-process bare fasthttp server and report linkraft as a percentage of it")
	fs.BoolVar(&out.json, "json", false, "write the report as JSON to stdout instead of the table")
	fs.StringVar(&out.html, "html", "", "also write a self-contained HTML report with latency and throughput charts to this file")
	if err := applyEnv(fs); err != nil {
		return nil, out, err
	}
	if err := fs.Parse(args); err != nil {
		return nil, out, err
	}
	if fs.NArg() > 0 {
		return nil, out, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	c.Targets = splitList(targets)
	c.Scenario = bench.Scenario(scenario)
	return c, out, nil
}

// benchCmd runs "linkraft bench": progress on stderr, the report on stdout
// (a table, or JSON with --json) and optionally as an HTML file.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	cfg, out, err := parseBenchFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "linkraft bench:", err)
		return 2
	}
	cfg.Progress = stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, *cfg)
	if err != nil {
		fmt.Fprintln(stderr, "linkraft", err)
		return 1
	}
	if err := writeBenchReport(rep, out, stdout); err != nil {
		fmt.Fprintln(stderr, "linkraft bench:", err)
		return 1
	}
	// The measurement stands, so the exit status stays 0; but links were
	// left behind, which the operator should hear about outside --json.
	if s := rep.Seeds; s != nil && s.Failed > 0 {
		fmt.Fprintf(stderr, "linkraft bench: %d of %d seeded links were not removed from workspace %s: %s\n",
			s.Failed, s.Created, s.Workspace, s.FirstError)
	}
	return 0
}

func writeBenchReport(rep *bench.Report, out benchOutputs, stdout io.Writer) error {
	if out.html != "" {
		if err := writeHTMLFile(out.html, rep); err != nil {
			return err
		}
	}
	if out.json {
		return bench.WriteJSON(stdout, rep)
	}
	return bench.WriteText(stdout, rep)
}

func writeHTMLFile(path string, rep *bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	if err := bench.WriteHTML(f, rep); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("html report: %w", err)
	}
	return nil
}
