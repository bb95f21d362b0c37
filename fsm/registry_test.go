package fsm

import "testing"

// TestRegistryCoversEveryType holds the features table to the entry types
// this build knows: each decodes through exactly one row.
func TestRegistryCoversEveryType(t *testing.T) {
	for typ := cmdInit; typ <= cmdKeyCreateOwn; typ++ {
		if registry.entries[typ] == nil {
			t.Errorf("entry type %d has no row in features", typ)
		}
	}
	n := 0
	for _, e := range registry.entries {
		if e != nil {
			n++
		}
	}
	if want := int(cmdKeyCreateOwn); n != want {
		t.Errorf("%d entry types registered, want %d", n, want)
	}
}

// TestRegistrySections checks the stream order and that every section a
// snapshot of this build's version holds can also be written.
func TestRegistrySections(t *testing.T) {
	prev := 0
	for _, sec := range registry.sections {
		if sec.at <= prev {
			t.Errorf("section %s at %d follows place %d", sec.name, sec.at, prev)
		}
		prev = sec.at
		if sec.read == nil {
			t.Errorf("section %s has no read", sec.name)
		}
		if sec.holds(snapshotVersion) && sec.write == nil {
			t.Errorf("section %s is in version %d but never written", sec.name, snapshotVersion)
		}
	}
}
