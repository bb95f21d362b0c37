package fsm

// Webhooks: registrations, the events each one has not yet had delivered,
// and the position the leader has delivered up to. Kept in the replicated
// state so that a new leader resumes where the last one was acknowledged.

// webhooks is the webhook part of the state.
type webhooks struct{}

func newWebhooks() webhooks { return webhooks{} }

// active reports whether the state holds anything only LevelVisits builds
// read.
func (w *webhooks) active() bool { return false }

// applyWebhook applies a webhook command; false when cmd is not one.
func (s *state) applyWebhook(cmd any) (any, bool) { return nil, false }

func decodeWebhookCommand(d *decoder, typ commandType) any {
	d.fail(errUnknownWebhookCommand)
	return nil
}

var errUnknownWebhookCommand = errorString("webhook commands are not applied yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// encodeWebhooks writes the webhook section of a version 6 snapshot.
func (snap *snapshot) encodeWebhooks(e *encoder) { e.uvarint(0) }

// decodeWebhooks reads what encodeWebhooks wrote.
func (st *state) decodeWebhooks(d *decoder) error {
	if n := d.count(1); n != 0 {
		d.fail(errUnknownWebhookCommand)
	}
	return d.err
}
