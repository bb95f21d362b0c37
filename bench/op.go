package bench

import (
	"errors"
	"net"
	"syscall"

	"github.com/valyala/fasthttp"
)

// op is one kind of request. Its name is the route label that linkraft's
// linkraft_http_requests_total counter gives it.
type op uint8

const (
	opRedirect op = iota
	opCreate
	opStats
	opDelete // removing the seeds after a run; never part of the measured load
	numOps
)

func (o op) String() string {
	return [numOps]string{"redirect", "create", "stats", "delete"}[o]
}

// ok reports whether status is a success for o: any redirect status for a
// redirect (nodes may run with --redirect-status 301, 307 or 308), 201 or
// 200 (a deduplicated link) for a create, 204 for a delete, 200 for stats.
func (o op) ok(status int) bool {
	switch o {
	case opRedirect:
		return status == 301 || status == 302 || status == 307 || status == 308
	case opCreate:
		return status == 201 || status == 200
	case opDelete:
		return status == 204
	default:
		return status == 200
	}
}

// phase is the part of a run a request belongs to. Only phaseRun is
// measured; the others are counted so that a server's own counters can be
// reconciled with what the tool sent.
type phase uint8

const (
	phaseSeed phase = iota
	phaseWarmup
	phaseRun
	numPhases
)

// errKind sorts transport errors (no HTTP answer at all).
type errKind uint8

const (
	errTimeout errKind = iota
	errRefused
	errOther
	numErrKinds
)

func (k errKind) String() string {
	return [numErrKinds]string{"timeout", "connection refused", "other"}[k]
}

// classify sorts a client error.
func classify(err error) errKind {
	var netErr net.Error
	switch {
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return errTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return errRefused
	case errors.As(err, &netErr) && netErr.Timeout():
		return errTimeout
	}
	return errOther
}
