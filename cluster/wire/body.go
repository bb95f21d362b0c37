package wire

import "io"

// ReadBody reads a body of length bytes from r (-1: unknown, to its end)
// into a buffer of its own. A known length gets one allocation of that
// size, which the runtime clears in steps it can preempt. Growing a buffer
// instead (bytes.Buffer, io.ReadAll, fasthttp reading a body whole) clears
// and copies in single calls it cannot preempt, and for a body of hundreds
// of megabytes that stops the whole process, Raft's heartbeats included,
// while the collector waits (cluster/DESIGN.md, "No single call over a
// large body").
func ReadBody(r io.Reader, length int) ([]byte, error) {
	if length < 0 {
		return io.ReadAll(r)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}
