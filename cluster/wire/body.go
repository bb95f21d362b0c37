package wire

import (
	"errors"
	"io"
	"runtime"
)

// ReadBody reads a body of length bytes from r (-1: unknown, to its end)
// into a buffer of its own, without a single copy or clear of the whole
// body. A known length gets one allocation of that size, which the runtime
// clears in steps it can preempt; an unknown one is read in pieces and
// then copied together a piece at a time, yielding between pieces. Growing a buffer instead
// (bytes.Buffer, io.ReadAll, fasthttp reading a body whole) clears and
// copies in single calls the runtime cannot preempt, and for a body of
// hundreds of megabytes that stops the whole process, Raft's heartbeats
// included, while the collector waits (cluster/DESIGN.md, "No single call
// over a large body").
func ReadBody(r io.Reader, length int) ([]byte, error) {
	if length < 0 {
		return readPieces(r)
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// Pieces of a body of unknown length start small, for the many short
// ones, and double up to maxPiece.
const (
	firstPiece = 32 << 10
	maxPiece   = 1 << 20
)

func readPieces(r io.Reader) ([]byte, error) {
	var pieces [][]byte
	total := 0
	for size := firstPiece; ; size = min(2*size, maxPiece) {
		piece := make([]byte, size)
		n, err := io.ReadFull(r, piece)
		pieces, total = append(pieces, piece[:n]), total+n
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break // the end of the body, not an error here
		}
		if err != nil {
			return nil, err
		}
	}
	body := make([]byte, 0, total)
	for _, piece := range pieces {
		body = append(body, piece...) // within capacity: one piece copied
		// The copies are nearly all the loop's time, and a preemption
		// request that lands inside one is refused: without a yield here
		// the loop as a whole stalls the process as one copy would.
		runtime.Gosched()
	}
	return body, nil
}
