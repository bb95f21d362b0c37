package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"
)

// Resolver looks up the addresses of a host name. *net.Resolver is one;
// tests give their own, whose answers they change.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// resolveTimeout bounds one lookup of a --join name: a slow DNS server must
// not hold up the rejoin round (nor Close, which waits for it).
const resolveTimeout = 2 * time.Second

// seedResolver turns the --join entries into gossip addresses to join. A
// host name is resolved here rather than by memberlist (which would resolve
// it too, but through a resolver that cannot be injected) so that each of
// its addresses is joined and its answer can change between rounds: a
// Kubernetes headless Service, a scaled compose service, DNS round robin.
// Only keepJoined's goroutine uses it.
type seedResolver struct {
	resolver Resolver
	log      *slog.Logger
	seeds    []string
	port     string          // for an entry without one, as memberlist does: this node's gossip port
	self     map[string]bool // this node's own gossip addresses, never joined
	// answers holds, by name, what it last resolved to (or the error), so
	// a name is logged when its answer changes, not every round.
	answers map[string]string
	cached  []string  // the addresses of the last resolution
	at      time.Time // when it ran; zero: never
}

func newSeedResolver(r Resolver, log *slog.Logger, seeds []string, port string, self ...string) *seedResolver {
	s := &seedResolver{resolver: r, log: log, seeds: seeds, port: port, self: map[string]bool{}, answers: map[string]string{}}
	for _, addr := range self {
		s.self[addr] = true
	}
	return s
}

// addrs returns the gossip addresses of the seeds, deduplicated and without
// this node's own, resolving the names again unless the last resolution is
// younger than maxAge. fresh reports whether it resolved them now. A name
// that does not resolve is left out: the next round tries it again.
func (s *seedResolver) addrs(ctx context.Context, maxAge time.Duration) (addrs []string, fresh bool) {
	if !s.at.IsZero() && time.Since(s.at) < maxAge {
		return s.cached, false
	}
	var out []string
	add := func(addr string) {
		if !s.self[addr] && !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	for _, seed := range s.seeds {
		host, port, err := net.SplitHostPort(seed)
		if err != nil {
			host, port = seed, s.port
		}
		if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
			add(net.JoinHostPort(ip.String(), port))
			continue
		}
		ips, err := s.lookup(ctx, host)
		s.record(seed, ips, err)
		for _, ip := range ips {
			add(net.JoinHostPort(ip, port))
		}
	}
	s.cached, s.at = out, time.Now()
	return out, true
}

func (s *seedResolver) lookup(ctx context.Context, host string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := s.resolver.LookupHost(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("resolve --join host %q: %w", host, err)
	}
	out := make([]string, 0, len(ips))
	for _, ip := range ips {
		// Normalise (an IPv6 answer may be spelt many ways) so that it
		// compares equal to memberlist's member addresses; skip what is
		// not an IP.
		if parsed := net.ParseIP(ip); parsed != nil {
			out = append(out, parsed.String())
		}
	}
	return out, nil
}

// record logs a name's answer when it differs from the last one.
func (s *seedResolver) record(seed string, ips []string, err error) {
	answer := "error: " + fmt.Sprint(err)
	if err == nil {
		sorted := slices.Sorted(slices.Values(ips)) // round robin reorders, it does not change
		answer = strings.Join(sorted, ",")
	}
	before, seen := s.answers[seed]
	if seen && before == answer {
		return
	}
	s.answers[seed] = answer
	switch {
	case err != nil:
		s.log.Warn("a --join name does not resolve; trying again every rejoin round", "seed", seed, "err", err)
	case len(ips) == 0:
		s.log.Warn("a --join name resolves to no address; trying again every rejoin round", "seed", seed)
	default:
		s.log.Info("--join name resolved", "seed", seed, "addresses", ips)
	}
}
