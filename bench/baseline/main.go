// Command baseline is the ceiling linkraft's redirect path is measured
// against: a bare fasthttp server answering a fixed 302 from an in-memory
// map, with nothing else (bench.CeilingHandler, the same server
// "linkraft bench --scenario ceiling" runs in-process). Load it and a
// linkraft node with the same tool in the same run and compare the ratio
// (docs/BENCHMARKS.md).
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/bench"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9090", "listen address")
	flag.Parse()
	links := map[string]string{"abc1234": "https://example.com/some/long/path?with=query"}
	log.Fatal(fasthttp.ListenAndServe(*addr, bench.CeilingHandler(links)))
}
