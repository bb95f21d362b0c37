package input

import (
	"errors"
	"fmt"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
)

// Prepared checks a create as a node prepared it for the log (httpd's
// create handler: the target as Target returned it, the canonical form
// when it dedupes) against the rules a client's create meets. The leader
// runs it on the creates a follower relays: nothing a peer sends is
// believed blindly. Reserved words are left to the state machine, which
// refuses them as such.
func Prepared(r fsm.CreateRequest, allowPrivate bool) error {
	target, err := Target(r.URL, allowPrivate)
	if err != nil {
		return err
	}
	if target != r.URL {
		return errors.New("url: not in the form a node prepares (surrounding whitespace)")
	}
	if r.CustomCode != "" {
		if err := CustomCode(r.CustomCode); err != nil {
			return err
		}
	}
	if err := Workspace(r.Workspace); err != nil {
		return err
	}
	// The canonical form decides which link a dedupe returns: one that is
	// not the target's own would hand another target's clients this link.
	if r.Dedupe || r.Strategy == fsm.StrategyHash {
		canonical, err := codes.Canonicalize(r.URL)
		if err != nil || canonical != r.Canonical {
			return fmt.Errorf("canonical: %q is not the canonical form of the url", r.Canonical)
		}
	} else if r.Canonical != "" {
		return errors.New("canonical: set on a create that does not dedupe")
	}
	if r.Domain != "" {
		if d, err := Domain(r.Domain); err != nil || d != r.Domain {
			return fmt.Errorf("domain: %q", r.Domain)
		}
	}
	return Options(r.Options, allowPrivate)
}
