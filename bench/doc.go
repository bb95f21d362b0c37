// Package bench is linkraft's load generator, the engine behind
// "linkraft bench". It owns everything a load test of linkraft needs and
// nothing else:
//
//   - seeding the links a run reads (POST /api/v1/urls) in a workspace of
//     the bench's own, and deleting them after the run, so that runs leave
//     nothing behind but the links they measured creating;
//   - sending requests with fasthttp, in a closed loop (a fixed number of
//     connections, each sending its next request when the previous one was
//     answered) or an open loop (requests issued at intended times
//     t0 + i/rate; latency runs from the intended time, so a server that
//     falls behind cannot hide its queue: no coordinated omission);
//   - recording latency in HDR histograms (one per worker, merged at the
//     end) and per-second buckets;
//   - reporting as a table, JSON, or a self-contained HTML page;
//   - the ceiling server: a bare fasthttp server answering from a map, the
//     upper bound linkraft's request paths are measured against
//     (bench/baseline runs the same server as a process).
//
// Targets are loaded as clients behind round-robin DNS would load them: in
// a closed loop connection i talks to target i mod N for the whole run; in
// an open loop request i goes to target i mod N. Redirects are never
// followed.
package bench
