// Command cold times redirects that meet a node's caches cold: distinct
// codes picked at random (a fixed seed) from an import file, each read
// once, one request at a time, each checked to redirect to its imported
// URL (bench.ColdRedirects). bench/scale.sh runs it right after a restart.
// It prints one line and exits 1 if any request failed: a percentile of
// wrong answers is not a figure to compare.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/linkraft/linkraft/bench"
)

func main() {
	cfg := bench.ColdConfig{}
	flag.StringVar(&cfg.Target, "target", "127.0.0.1:8080", "the node to read, host:port or http://host:port")
	flag.StringVar(&cfg.Links, "links", "", "the NDJSON file that was imported (POST /admin/import): short_code and original_url per line")
	flag.IntVar(&cfg.Count, "n", 2000, "distinct codes to read, each once")
	flag.Uint64Var(&cfg.Seed, "seed", 1, "picks the codes: the same seed and file read the same codes in the same order")
	flag.DurationVar(&cfg.Timeout, "timeout", 5*time.Second, "per-request timeout")
	limit := flag.Duration("limit", 2*time.Minute, "the whole run's limit")
	flag.Parse()
	if cfg.Links == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: cold --links FILE [--target host:port] [--n 2000] [--seed 1]")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	res, err := bench.ColdRedirects(ctx, cfg)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cold:", err)
		os.Exit(1)
	}
	fmt.Println(res)
	if res.Failed > 0 {
		os.Exit(1)
	}
}
