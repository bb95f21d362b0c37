package fsm

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Certificates: what the cluster needs to serve HTTPS with one
// certificate per name on every node (cluster/certs orders them). The
// leader alone talks to the certificate authority; everything the other
// nodes need, and a new leader needs to go on, is here:
//
//   - the ACME account: the CA's directory, the account's URL, its key;
//   - per name, the certificate chain and its private key;
//   - the HTTP-01 and TLS-ALPN-01 challenges in flight, so whichever node
//     the CA's request reaches answers it (round-robin DNS);
//   - the orders in flight, so a new leader resumes one rather than place
//     another.
//
// Private keys arrive sealed with a key derived from the cluster key: to
// the state machine they are opaque bytes, checked only for size, and a
// snapshot or backup holds them sealed. Every value is replaced whole,
// never changed in place. All of it needs the cluster raised to
// LevelCerts: older builds would not apply these entries.

// Bounds of the certificate state, so no proposer makes it grow past
// them: a name per registered domain and some configured names.
const (
	MaxCertificates  = MaxDomains + 100
	MaxCertChain     = 32 << 10 // PEM
	MaxSealedKey     = 8 << 10
	MaxChallenges    = MaxCertificates
	MaxChallengeText = 512
	maxACMEURL       = 2048
)

// ACMEAccount is the cluster's account with its certificate authority.
type ACMEAccount struct {
	Directory string // the CA's directory URL
	URL       string // the account's URL at the CA
	Key       string // its private key, sealed (opaque here)
}

// Certificate is one name's certificate as every node serves it.
type Certificate struct {
	Name      string
	Chain     string // PEM, the leaf first
	Key       string // the private key, sealed (opaque here)
	NotBefore int64  // unix ms
	NotAfter  int64  // unix ms
}

// Challenge is an HTTP-01 challenge: the CA asks any node for
// /.well-known/acme-challenge/Token and must read KeyAuth. Or a TLS-ALPN-01
// challenge (RFC 8737), under the token TLSALPNToken(name): the CA opens a
// TLS connection to any node for name with ALPN acme-tls/1 and must get a
// certificate carrying the SHA-256 of the key authorization, which KeyAuth
// then holds, in hex. Each node makes that certificate itself; nothing of
// the account's key is in the state.
type Challenge struct {
	Token   string
	KeyAuth string
	Expires int64 // unix ms: the leader drops it after this
}

// tlsALPNTokenPrefix starts the token of a TLS-ALPN-01 challenge. An
// HTTP-01 token is base64url (RFC 8555, 8.3), which has no ':'.
const tlsALPNTokenPrefix = "tls-alpn-01:"

// TLSALPNToken is the token a TLS-ALPN-01 challenge for name is kept
// under.
func TLSALPNToken(name string) string { return tlsALPNTokenPrefix + name }

// TLSALPNName is the name of a TLS-ALPN-01 challenge's token; false for
// an HTTP-01 one.
func (c Challenge) TLSALPNName() (string, bool) {
	return strings.CutPrefix(c.Token, tlsALPNTokenPrefix)
}

// Order is an order in flight for a name, with the private key its
// certificate will have, so a new leader can finalize it.
type Order struct {
	Name    string
	URL     string
	Key     string // sealed (opaque here)
	Started int64  // unix ms
}

// CertCommand changes the certificate state: exactly one of its parts.
// One entry type for all of them, since they change together in one
// place (cluster/certs) and each is small.
type CertCommand struct {
	Kind        CertChange
	Account     ACMEAccount
	Certificate Certificate
	Challenge   Challenge
	Order       Order
}

// CertChange says what a CertCommand changes.
type CertChange byte

// The changes a CertCommand makes.
const (
	SetACMEAccount CertChange = iota + 1
	SetCertificate            // also ends the name's order
	SetChallenge
	RemoveChallenge
	SetOrder
	RemoveOrder
	RemoveCertificate
)

// certState is the certificate part of the state.
type certState struct {
	account    ACMEAccount
	certs      map[string]Certificate
	challenges map[string]Challenge
	orders     map[string]Order
}

func newCertState() certState {
	return certState{certs: map[string]Certificate{}, challenges: map[string]Challenge{}, orders: map[string]Order{}}
}

// Encode is the change's log entry (Command).
func (c CertCommand) Encode() []byte {
	var e encoder
	e.byte(byte(cmdCert))
	e.byte(byte(c.Kind))
	switch c.Kind {
	case SetACMEAccount:
		encodeAccount(&e, c.Account)
	case SetCertificate, RemoveCertificate:
		encodeCertificate(&e, c.Certificate)
	case SetChallenge, RemoveChallenge:
		encodeChallenge(&e, c.Challenge)
	case SetOrder, RemoveOrder:
		encodeOrder(&e, c.Order)
	}
	return seal(e.buf)
}

// Level is LevelCerts (Command), and LevelVisitRows for a TLS-ALPN-01
// challenge: a build of LevelCerts would keep one as an HTTP-01 token and
// not answer the CA's handshake, so it is proposed only once no server
// runs such a build.
func (c CertCommand) Level() int {
	if _, alpn := c.Challenge.TLSALPNName(); alpn && (c.Kind == SetChallenge || c.Kind == RemoveChallenge) {
		return LevelVisitRows
	}
	return LevelCerts
}

func encodeAccount(e *encoder, a ACMEAccount) {
	e.string(a.Directory)
	e.string(a.URL)
	e.string(a.Key)
}
func decodeAccount(d *decoder) ACMEAccount {
	return ACMEAccount{Directory: d.string(), URL: d.string(), Key: d.string()}
}

func encodeCertificate(e *encoder, c Certificate) {
	e.string(c.Name)
	e.string(c.Chain)
	e.string(c.Key)
	e.varint(c.NotBefore)
	e.varint(c.NotAfter)
}

func decodeCertificate(d *decoder) Certificate {
	return Certificate{Name: d.string(), Chain: d.string(), Key: d.string(), NotBefore: d.varint(), NotAfter: d.varint()}
}

func encodeChallenge(e *encoder, c Challenge) {
	e.string(c.Token)
	e.string(c.KeyAuth)
	e.varint(c.Expires)
}
func decodeChallenge(d *decoder) Challenge {
	return Challenge{Token: d.string(), KeyAuth: d.string(), Expires: d.varint()}
}

func encodeOrder(e *encoder, o Order) {
	e.string(o.Name)
	e.string(o.URL)
	e.string(o.Key)
	e.varint(o.Started)
}
func decodeOrder(d *decoder) Order {
	return Order{Name: d.string(), URL: d.string(), Key: d.string(), Started: d.varint()}
}

func decodeCertCommand(d *decoder) CertCommand {
	c := CertCommand{Kind: CertChange(d.byte())}
	switch c.Kind {
	case SetACMEAccount:
		c.Account = decodeAccount(d)
	case SetCertificate, RemoveCertificate:
		c.Certificate = decodeCertificate(d)
	case SetChallenge, RemoveChallenge:
		c.Challenge = decodeChallenge(d)
	case SetOrder, RemoveOrder:
		c.Order = decodeOrder(d)
	default:
		d.fail(fmt.Errorf("certificate change %d", c.Kind))
	}
	return c
}

func (a ACMEAccount) check() error {
	if a.Directory == "" || len(a.Directory) > maxACMEURL || len(a.URL) > maxACMEURL || a.Key == "" || len(a.Key) > MaxSealedKey {
		return fmt.Errorf("%w: an ACME account needs a directory, and a URL and a key within bounds", ErrInvalidRequest)
	}
	return nil
}

func (c Certificate) check() error {
	if !validDomainName(c.Name) || c.Chain == "" || len(c.Chain) > MaxCertChain || c.Key == "" || len(c.Key) > MaxSealedKey || c.NotAfter <= c.NotBefore {
		return fmt.Errorf("%w: certificate for %q: a name, a chain of at most %d bytes, a key and a validity", ErrInvalidRequest, c.Name, MaxCertChain)
	}
	return nil
}

func (c Challenge) check() error {
	if c.Token == "" || len(c.Token) > MaxChallengeText || len(c.KeyAuth) > MaxChallengeText {
		return fmt.Errorf("%w: a challenge needs a token and a key authorization of at most %d bytes", ErrInvalidRequest, MaxChallengeText)
	}
	if name, alpn := c.TLSALPNName(); alpn {
		if digest, err := hex.DecodeString(c.KeyAuth); !validDomainName(name) || err != nil || len(digest) != sha256.Size {
			return fmt.Errorf("%w: a TLS-ALPN-01 challenge needs a name and the hex SHA-256 of its key authorization", ErrInvalidRequest)
		}
	}
	return nil
}

func (o Order) check() error {
	if !validDomainName(o.Name) || len(o.URL) > maxACMEURL || len(o.Key) > MaxSealedKey {
		return fmt.Errorf("%w: an order needs a name, and a URL and a key within bounds", ErrInvalidRequest)
	}
	return nil
}

// apply applies a CertCommand, only once the cluster is raised to
// LevelCerts.
func (cs *certState) apply(c CertCommand, raised int) error {
	if raised < LevelCerts {
		return fmt.Errorf("%w: certificates need the cluster raised to level %d", ErrInvalidRequest, LevelCerts)
	}
	switch c.Kind {
	case SetACMEAccount:
		if err := c.Account.check(); err != nil {
			return err
		}
		cs.account = c.Account
	case SetCertificate:
		if err := c.Certificate.check(); err != nil {
			return err
		}
		if _, known := cs.certs[c.Certificate.Name]; !known && len(cs.certs) >= MaxCertificates {
			return fmt.Errorf("%w: at most %d certificates", ErrInvalidRequest, MaxCertificates)
		}
		cs.certs[c.Certificate.Name] = c.Certificate
		delete(cs.orders, c.Certificate.Name)
	case RemoveCertificate:
		delete(cs.certs, c.Certificate.Name)
	case SetChallenge:
		return cs.setChallenge(c.Challenge, raised)
	case RemoveChallenge:
		delete(cs.challenges, c.Challenge.Token)
	case SetOrder:
		if err := c.Order.check(); err != nil {
			return err
		}
		if _, known := cs.orders[c.Order.Name]; !known && len(cs.orders) >= MaxCertificates {
			return fmt.Errorf("%w: at most %d orders in flight", ErrInvalidRequest, MaxCertificates)
		}
		cs.orders[c.Order.Name] = c.Order
	case RemoveOrder:
		delete(cs.orders, c.Order.Name)
	default:
		return fmt.Errorf("%w: certificate change %d", ErrInvalidRequest, c.Kind)
	}
	return nil
}

// setChallenge adds or replaces a challenge in flight: TLS-ALPN-01 ones
// only once raised to LevelVisitRows, at most MaxChallenges.
func (cs *certState) setChallenge(ch Challenge, raised int) error {
	if err := ch.check(); err != nil {
		return err
	}
	if _, alpn := ch.TLSALPNName(); alpn && raised < LevelVisitRows {
		return fmt.Errorf("%w: TLS-ALPN-01 challenges need the cluster raised to level %d", ErrInvalidRequest, LevelVisitRows)
	}
	if _, known := cs.challenges[ch.Token]; !known && len(cs.challenges) >= MaxChallenges {
		return fmt.Errorf("%w: at most %d challenges in flight", ErrInvalidRequest, MaxChallenges)
	}
	cs.challenges[ch.Token] = ch
	return nil
}

// ACMEAccount is the cluster's account; false before one was made.
func (f *FSM) ACMEAccount() (ACMEAccount, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	a := f.s.certs.account
	return a, a.Directory != ""
}

// Certificate is the certificate for name.
func (f *FSM) Certificate(name string) (Certificate, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.s.certs.certs[name]
	return c, ok
}

// Certificates lists every certificate, by name.
func (f *FSM) Certificates() []Certificate {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.s.certs.certs, func(c Certificate) string { return c.Name })
}

// Challenge is the key authorization for an HTTP-01 token, or the
// TLS-ALPN-01 challenge kept under TLSALPNToken(name).
func (f *FSM) Challenge(token string) (Challenge, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	c, ok := f.s.certs.challenges[token]
	return c, ok
}

// Challenges lists the challenges in flight, by token.
func (f *FSM) Challenges() []Challenge {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.s.certs.challenges, func(c Challenge) string { return c.Token })
}

// Orders lists the orders in flight, by name.
func (f *FSM) Orders() []Order {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return sortedValues(f.s.certs.orders, func(o Order) string { return o.Name })
}

func sortedValues[V any](m map[string]V, key func(V) string) []V {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b V) int { return cmp.Compare(key(a), key(b)) })
	return out
}

// encodeCerts writes the certificate section of a version 9 snapshot.
func (snap *snapshot) encodeCerts(e *encoder) {
	cs := &snap.certs
	encodeAccount(e, cs.account)
	certs := sortedValues(cs.certs, func(c Certificate) string { return c.Name })
	e.uvarint(uint64(len(certs)))
	for _, c := range certs {
		encodeCertificate(e, c)
	}
	challenges := sortedValues(cs.challenges, func(c Challenge) string { return c.Token })
	e.uvarint(uint64(len(challenges)))
	for _, c := range challenges {
		encodeChallenge(e, c)
	}
	orders := sortedValues(cs.orders, func(o Order) string { return o.Name })
	e.uvarint(uint64(len(orders)))
	for _, o := range orders {
		encodeOrder(e, o)
	}
}

// decode reads what encodeCerts wrote, each value one Apply would
// accept, keys in increasing order.
func (cs *certState) decode(d *decoder) error {
	if a := decodeAccount(d); a != (ACMEAccount{}) {
		if err := a.check(); d.err == nil && err != nil {
			return err
		}
		cs.account = a
	}
	prev := ""
	for n := d.count(5); n > 0 && d.err == nil; n-- {
		c := decodeCertificate(d)
		if err := c.check(); d.err == nil && (err != nil || c.Name <= prev || len(cs.certs) >= MaxCertificates) {
			return fmt.Errorf("certificate %q invalid, out of order or too many: %v", c.Name, err)
		}
		prev = c.Name
		cs.certs[c.Name] = c
	}
	if err := cs.decodeChallenges(d); err != nil {
		return err
	}
	return cs.decodeOrders(d)
}

// decodeChallenges reads the challenges in flight, by token.
func (cs *certState) decodeChallenges(d *decoder) error {
	prev := ""
	for n := d.count(3); n > 0 && d.err == nil; n-- {
		c := decodeChallenge(d)
		if err := c.check(); d.err == nil && (err != nil || c.Token <= prev || len(cs.challenges) >= MaxChallenges) {
			return fmt.Errorf("challenge invalid, out of order or too many: %v", err)
		}
		prev = c.Token
		cs.challenges[c.Token] = c
	}
	return nil
}

// decodeOrders reads the orders in flight, by name.
func (cs *certState) decodeOrders(d *decoder) error {
	prev := ""
	for n := d.count(4); n > 0 && d.err == nil; n-- {
		o := decodeOrder(d)
		if err := o.check(); d.err == nil && (err != nil || o.Name <= prev || len(cs.orders) >= MaxCertificates) {
			return fmt.Errorf("order %q invalid, out of order or too many: %v", o.Name, err)
		}
		prev = o.Name
		cs.orders[o.Name] = o
	}
	return d.err
}

// clone copies the maps; the values are never changed in place.
func (cs *certState) clone() certState {
	return certState{account: cs.account, certs: maps.Clone(cs.certs), challenges: maps.Clone(cs.challenges), orders: maps.Clone(cs.orders)}
}
