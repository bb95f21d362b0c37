package wire

import (
	"errors"

	"github.com/linkraft/linkraft/fsm"
)

// Error kinds of a relayed create's result: the state machine's refusals,
// which the relaying node turns back into the same errors, and the write
// path's.
const (
	KindCodeTaken          = "code_taken"
	KindCodeDeleted        = "code_deleted"
	KindUnknownDomain      = "unknown_domain"
	KindReserved           = "reserved"
	KindHashCollision      = "hash_collision"
	KindRequestIDReused    = "request_id_reused"
	KindCodeSpaceExhausted = "code_space_exhausted"
	KindStateFull          = "state_full"
	KindInvalid            = "invalid"
	KindNotInitialized     = "not_initialized"
	KindUnauthorized       = "unauthorized"
	KindFailed             = "failed" // any other state machine error
	// KindNotApplied: the leader did not propose the create (it lost
	// leadership first): safe to send again.
	KindNotApplied = "not_applied"
	// KindUnknown: proposed, outcome unknown (leadership lost meanwhile,
	// timeout): only a create with a request id may be sent again.
	KindUnknown = "unknown"
)

// Refusals is the one table of the state machine's refusals of a create:
// the sentinel error and its name on the wire. The relay names a refusal by
// it and the relaying node turns the name back into the sentinel, so a
// create is answered alike whichever node proposed it (httpd gives each
// sentinel its status).
var Refusals = [...]struct {
	Err  error
	Kind string
}{
	// Before ErrCodeTaken, which it wraps: the first match names it.
	{fsm.ErrCodeDeleted, KindCodeDeleted},
	{fsm.ErrCodeTaken, KindCodeTaken},
	{fsm.ErrUnknownDomain, KindUnknownDomain},
	{fsm.ErrReserved, KindReserved},
	{fsm.ErrHashCollision, KindHashCollision},
	{fsm.ErrCodeSpaceExhausted, KindCodeSpaceExhausted},
	{fsm.ErrStateFull, KindStateFull},
	{fsm.ErrNotInitialized, KindNotInitialized},
	{fsm.ErrRequestIDReused, KindRequestIDReused},
	{fsm.ErrInvalidRequest, KindInvalid},
	// The key was revoked or expired between its check and the apply.
	{fsm.ErrUnauthorized, KindUnauthorized},
}

// KindOf names a refusal for the wire; KindFailed for an error the table
// does not hold.
func KindOf(err error) string {
	for _, r := range Refusals {
		if errors.Is(err, r.Err) {
			return r.Kind
		}
	}
	return KindFailed
}

// RefusalOf turns a relayed refusal back into the state machine's error:
// the same sentinel for errors.Is and the same message.
func RefusalOf(kind, detail string) error {
	for _, r := range Refusals {
		if r.Kind != kind {
			continue
		}
		if detail == "" {
			return r.Err
		}
		return &relayedError{sentinel: r.Err, msg: detail}
	}
	if detail == "" {
		detail = "the leader refused the create (" + kind + ")"
	}
	return errors.New(detail)
}

// relayedError is a refusal as the leader reported it.
type relayedError struct {
	sentinel error
	msg      string
}

func (e *relayedError) Error() string { return e.msg }
func (e *relayedError) Unwrap() error { return e.sentinel }
