package fsm

// visitTable holds, per link and day, what the link's clicks said about
// their visitors.
type visitTable struct{}

func (v *visitTable) active() bool { return false }

func (snap *snapshot) encodeVisits(e *encoder, flush func(bool)) { e.uvarint(0) }

func (st *state) decodeVisits(d *decoder) error {
	if n := d.count(1); n != 0 {
		d.fail(errorString("visits not read yet"))
	}
	return d.err
}
