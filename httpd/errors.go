package httpd

import (
	"errors"
	"log/slog"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/fsm"
)

// errorStatus is the answer to err and to every error that wraps it.
type errorStatus struct {
	err    error
	status int
	// detail replaces the error's own text in the answer; "" shows the
	// error's text.
	detail string
}

// errorStatuses is the one table of the statuses a client gets for the
// errors the cluster returns to a handler: the state machine's refusals
// (relayed ones come back as the same sentinels), the write path's
// failures and the admin API's refusals. writeError answers with the first
// row err matches, so an error that wraps another comes before it. An
// error no row holds is a failure of this node, not something the client
// can act on: 500.
var errorStatuses = [...]errorStatus{
	// Before ErrCodeTaken, which it wraps.
	{fsm.ErrCodeDeleted, fasthttp.StatusConflict, ""},
	{fsm.ErrCodeTaken, fasthttp.StatusConflict, ""},
	// A create into a domain no admin added. Removing such a domain is
	// answered 404 by proposeDomain.
	{fsm.ErrUnknownDomain, fasthttp.StatusBadRequest, ""},
	{fsm.ErrReserved, fasthttp.StatusConflict, ""},
	// The client may send the same create again: another code, or the
	// counter's next length, may be free by then.
	{fsm.ErrHashCollision, fasthttp.StatusServiceUnavailable, ""},
	{fsm.ErrCodeSpaceExhausted, fasthttp.StatusServiceUnavailable, ""},
	// Not a retry: the cluster can create no more links (fsm.MaxRecords
	// before it is raised to fsm.LevelPositions).
	{fsm.ErrStateFull, fasthttp.StatusInsufficientStorage, ""},
	{fsm.ErrNotInitialized, fasthttp.StatusServiceUnavailable, ""},
	{fsm.ErrRequestIDReused, fasthttp.StatusUnprocessableEntity, ""},
	// Before ErrInvalidRequest, which they wrap.
	{fsm.ErrTooManyWebhooks, fasthttp.StatusConflict, ""},
	{fsm.ErrTooManyKeys, fasthttp.StatusConflict, ""},
	{fsm.ErrTooManyDomains, fasthttp.StatusConflict, ""},
	{fsm.ErrInvalidRequest, fasthttp.StatusBadRequest, ""},
	{fsm.ErrTagNotFound, fasthttp.StatusNotFound, ""},
	{fsm.ErrTagConflict, fasthttp.StatusConflict, ""},
	// The key was revoked or expired between its check and the apply;
	// writeError adds the challenge.
	{fsm.ErrUnauthorized, fasthttp.StatusUnauthorized, "the API key was revoked or expired before the write was applied"},
	{fsm.ErrNotFound, fasthttp.StatusNotFound, ""},
	{fsm.ErrKeyNotFound, fasthttp.StatusNotFound, ""},
	{fsm.ErrWebhookNotFound, fasthttp.StatusNotFound, ""},
	{fsm.ErrDomainInUse, fasthttp.StatusConflict, ""},
	{fsm.ErrCorruptSnapshot, fasthttp.StatusBadRequest, ""},
	// A restore's backup: not this cluster's, or a record no client's
	// write could make. The messages say which, and what to do.
	{cluster.ErrBackupUnauthenticated, fasthttp.StatusBadRequest, ""},
	{fsm.ErrRefusedRecord, fasthttp.StatusBadRequest, ""},

	// The write may succeed if sent again (writeProblem adds Retry-After).
	{cluster.ErrNoLeader, fasthttp.StatusServiceUnavailable, ""},
	{cluster.ErrTimeout, fasthttp.StatusServiceUnavailable, ""},
	{cluster.ErrClosed, fasthttp.StatusServiceUnavailable, ""},
	{cluster.ErrUpgrading, fasthttp.StatusServiceUnavailable, ""},
	{fsm.ErrNotRaised, fasthttp.StatusServiceUnavailable, ""},
	{cluster.ErrRestoreNotReady, fasthttp.StatusServiceUnavailable, ""},

	// Membership changes.
	{cluster.ErrInvalidServer, fasthttp.StatusBadRequest, ""},
	{cluster.ErrUnreachable, fasthttp.StatusBadRequest, ""},
	{cluster.ErrUnknownServer, fasthttp.StatusNotFound, ""},
	{cluster.ErrServerConflict, fasthttp.StatusConflict, ""},
	{cluster.ErrLastVoter, fasthttp.StatusConflict, ""},
	{cluster.ErrAlreadyVoter, fasthttp.StatusConflict, ""},
	{cluster.ErrNoTransferTarget, fasthttp.StatusConflict, ""},
	{cluster.ErrOtherCluster, fasthttp.StatusConflict, ""},
}

// errorStatusOf is the row of errorStatuses that answers err, and false
// for an error no row holds.
func errorStatusOf(err error) (errorStatus, bool) {
	for _, r := range errorStatuses {
		if errors.Is(err, r.err) {
			return r, true
		}
	}
	return errorStatus{}, false
}

// errorDetail is a handler's message for err, naming what the client sent
// ("short link x does not exist") where the error's own text cannot.
type errorDetail struct {
	err    error
	detail string
}

// detailOf is the detail of the first of details that err matches.
func detailOf(err error, details []errorDetail) (string, bool) {
	for _, d := range details {
		if errors.Is(err, d.err) {
			return d.detail, true
		}
	}
	return "", false
}

// writeError answers err with its status from errorStatuses, as
// problem+json, and 401 with its challenge. The message is the first of
// details that err matches, else the row's. An error no row holds is
// logged and answered 500 without its text, which would tell the client
// only about this node's internals.
func writeError(ctx *fasthttp.RequestCtx, log *slog.Logger, err error, details ...errorDetail) {
	r, ok := errorStatusOf(err)
	if !ok {
		log.Error("write failed", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "write failed")
		return
	}
	detail, ok := detailOf(err, details)
	switch {
	case ok:
	case r.detail != "":
		detail = r.detail
	default:
		detail = err.Error()
	}
	if r.status == fasthttp.StatusUnauthorized {
		writeUnauthorized(ctx, detail)
		return
	}
	writeProblem(ctx, r.status, detail)
}
