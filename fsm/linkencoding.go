package fsm

import (
	"errors"
	"fmt"
)

// EncodeLink and DecodeLink carry one Link between nodes (a leader's
// answer with a link it holds) in this package's own encoding, so that a
// field a Link gains cannot be dropped by a copy kept elsewhere.
//
// The layout is a version byte, the fields in the order of a snapshot's
// link record (id, domain and code, URL, workspace, canonical URL, times,
// clicks, options: see snapshot.encodeLink), and the CRC-32C seal of log
// entries. It is not the record itself: a record keeps the domain inside
// the code, and the canonical URL only when it differs from the URL
// beside flags a Link does not have; an encoded Link carries both as the
// Link has them. A Link that gains a
// field gets a new version, which a node writes only once every server
// reads it (a new entry level), as with entry types.
const linkEncodingV1 = 1

// linkEncodingV2 is version 1 whose options end with the fields of
// LevelVisitRows (encodeOptionsExtended): what a link with such fields,
// which exist only once every server reads them, is sent as.
const linkEncodingV2 = 2

// linkEncodingV3 is version 2 followed by the link's author: what a link
// with an author, which links have only once every server is raised to
// LevelTargets, is sent as.
const linkEncodingV3 = 3

// errCorruptLink means an encoded link does not match its checksum.
var errCorruptLink = errors.New("encoded link does not match its checksum")

// EncodeLink is l as another node reads it with DecodeLink.
func EncodeLink(l Link) []byte {
	e := encoder{buf: make([]byte, 0, 64+len(l.Code)+len(l.Domain)+len(l.URL)+len(l.Workspace)+len(l.Canonical))}
	version := byte(linkEncodingV1)
	switch {
	case l.Author != "":
		version = linkEncodingV3
	case l.Options.extended():
		version = linkEncodingV2
	}
	e.byte(version)
	e.uvarint(l.ID)
	e.string(l.Domain)
	e.string(l.Code)
	e.string(l.URL)
	e.string(l.Workspace)
	e.string(l.Canonical)
	e.varint(l.CreatedAt)
	e.varint(l.ExpiresAt)
	e.uvarint(l.Clicks)
	e.varint(l.LastAccess)
	if version == linkEncodingV1 {
		encodeOptions(&e, l.Options)
	} else {
		encodeOptionsExtended(&e, l.Options)
	}
	if version == linkEncodingV3 {
		e.string(l.Author)
	}
	return seal(e.buf)
}

// DecodeLink reads what EncodeLink wrote. It refuses bytes whose checksum
// does not match, an unknown version and trailing bytes.
func DecodeLink(data []byte) (Link, error) {
	if len(data) < 1+sealedBytes || data[0]&sealedFlag == 0 {
		return Link{}, errors.New("decode link: not a sealed link")
	}
	body, ok := sealedBody(data)
	if !ok {
		return Link{}, fmt.Errorf("decode link: %w", errCorruptLink)
	}
	version := body[0] &^ sealedFlag
	if version < linkEncodingV1 || version > linkEncodingV3 {
		return Link{}, fmt.Errorf("decode link: unknown version %d", version)
	}
	d := decoder{buf: body[1:]}
	l := Link{
		ID:         d.uvarint(),
		Domain:     d.string(),
		Code:       d.string(),
		URL:        d.string(),
		Workspace:  d.string(),
		Canonical:  d.string(),
		CreatedAt:  d.varint(),
		ExpiresAt:  d.varint(),
		Clicks:     d.uvarint(),
		LastAccess: d.varint(),
	}
	if version == linkEncodingV1 {
		l.Options = decodeOptions(&d)
	} else {
		l.Options = decodeOptionsExtended(&d)
	}
	if version == linkEncodingV3 {
		l.Author = d.string()
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail(fmt.Errorf("%d trailing bytes", len(d.buf)))
	}
	if d.err != nil {
		return Link{}, fmt.Errorf("decode link: %w", d.err)
	}
	return l, nil
}
