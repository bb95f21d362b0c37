package fsm

import "fmt"

// checkTarget is the state machine's own rule for a link's target: an
// absolute http or https URL without control characters. Every node
// validates a client's target in full before proposing it (fsm/input);
// this is the floor that holds whatever a proposer sent, because a stored
// target is what every replica hands to browsers in a Location header: a
// javascript: URL runs in the visitor's page, and CR or LF would split the
// header. It is pure and looks only at the request, so replicas agree, and
// it runs before anything is allocated, so a refusal leaves the counter
// and every later code as they were.
func checkTarget(url string) error {
	if !hasPrefixFold(url, "https://") && !hasPrefixFold(url, "http://") {
		return fmt.Errorf("%w: the target must be an http or https URL", ErrInvalidRequest)
	}
	for i := 0; i < len(url); i++ {
		if c := url[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: the target holds a control character (byte %#x at %d)", ErrInvalidRequest, c, i)
		}
	}
	return nil
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix,
// in any case.
func hasPrefixFold(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != prefix[i] {
			return false
		}
	}
	return true
}
