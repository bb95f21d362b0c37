// Package certs owns the TLS certificates a linkraft cluster serves:
// ordering and renewing them from an RFC 8555 (ACME) certificate
// authority, as a duty of the leader (Manager), and giving every node's
// TLS handshakes the certificate for the name asked (Source, or
// FileSource for certificate files an operator manages).
//
// Everything a certificate needs lives in the replicated state (fsm,
// certs.go): the ACME account, each name's chain and private key, the
// HTTP-01 challenges in flight and the orders in flight. So one node
// orders, any node answers the CA's challenge (round-robin DNS sends the
// CA anywhere), every node serves the same certificate, and a new leader
// resumes an order the last one left. Private keys are sealed with a key
// derived from the cluster key before they are proposed.
package certs

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/crypto/acme"

	"github.com/linkraft/linkraft/fsm"
)

// State is what the Manager reads of the replicated state.
type State interface {
	Certificates
	ACMEAccount() (fsm.ACMEAccount, bool)
	Orders() []fsm.Order
	Challenges() []fsm.Challenge
	Raised() int // the level the cluster is raised to (fsm.FSM.Raised)
}

// Proposer writes a change of the certificate state through the log.
// With visible, it returns once every server has applied it: a challenge
// must be answerable by whichever node the CA reaches.
type Proposer interface {
	ProposeCert(ctx context.Context, change fsm.CertCommand, visible bool) error
}

// Sealer seals private keys with the cluster key (secure.Key).
type Sealer interface {
	Seal(plain, aad []byte) []byte
	Open(sealed, aad []byte) ([]byte, error)
}

// Config is what the Manager orders, and from whom.
type Config struct {
	Directory string // the CA's ACME directory URL
	Email     string // the account's contact; may be empty
	// HTTPClient talks to the CA (trusting --acme-ca-root); nil: the
	// default client.
	HTTPClient *http.Client
	// Names lists every name that must hold a certificate: the configured
	// ones and the registered domains. No other name is ever ordered.
	Names  func() []string
	Logger *slog.Logger
}

const (
	// checkInterval is how often the leader looks for a name that needs a
	// certificate: a domain registered a moment ago gets one within it.
	checkInterval = 5 * time.Second
	// orderTimeout bounds one order, from placing it to the stored
	// certificate; what is left is resumed by the next pass.
	orderTimeout = 5 * time.Minute
	// challengeLife is how long a challenge stays in the state at most:
	// one a dead leader left is removed after it.
	challengeLife = time.Hour
	// Failed names are tried again after a backoff that doubles from
	// retryFirst up to retryMax.
	retryFirst = time.Minute
	retryMax   = 6 * time.Hour
)

// Manager orders and renews the certificates. Run it on the leader only,
// for as long as it leads.
type Manager struct {
	cfg     Config
	state   State
	propose Proposer
	seal    Sealer
	// retry is when each failed name may be tried again, and how many
	// times in a row it failed. A new leader starts afresh: the orders in
	// the state keep it from placing a second order for a name.
	retry map[string]backoff
	now   func() time.Time
}

type backoff struct {
	at       time.Time
	failures int
}

// NewManager returns a Manager that reads state, proposes through p and
// seals keys with seal.
func NewManager(cfg Config, state State, p Proposer, seal Sealer) *Manager {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{cfg: cfg, state: state, propose: p, seal: seal, retry: map[string]backoff{}, now: time.Now}
}

// Run orders what is due at once and every checkInterval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	m.retry = map[string]backoff{}
	tick := time.NewTicker(checkInterval)
	defer tick.Stop()
	for {
		m.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// pass removes stale challenges, then obtains a certificate for each
// name that needs one, one at a time.
func (m *Manager) pass(ctx context.Context) {
	now := m.now()
	for _, c := range m.state.Challenges() {
		if time.UnixMilli(c.Expires).Before(now) {
			m.removeChallenge(ctx, c.Token)
		}
	}
	for _, name := range m.cfg.Names() {
		if ctx.Err() != nil {
			return
		}
		if !m.due(name, now) {
			continue
		}
		if err := m.obtain(ctx, name); err != nil {
			m.failed(name, err)
			continue
		}
		delete(m.retry, name)
	}
}

// due reports whether name needs a certificate now: it has none, or a
// third of its lifetime is left, and no backoff holds it back.
func (m *Manager) due(name string, now time.Time) bool {
	if b, ok := m.retry[name]; ok && now.Before(b.at) {
		return false
	}
	c, ok := m.state.Certificate(name)
	return !ok || !now.Before(RenewAt(c))
}

// RenewAt is when a certificate is renewed: a third of its lifetime
// before its end.
func RenewAt(c fsm.Certificate) time.Time {
	return time.UnixMilli(c.NotAfter - (c.NotAfter-c.NotBefore)/3)
}

func (m *Manager) failed(name string, err error) {
	b := m.retry[name]
	wait := min(retryFirst<<min(b.failures, 16), retryMax)
	if after, ok := acme.RateLimit(err); ok {
		wait = max(wait, after)
	}
	m.retry[name] = backoff{at: m.now().Add(wait), failures: b.failures + 1}
	m.cfg.Logger.Warn("certificate not obtained; trying again later", "name", name, "retry_in", wait.Round(time.Second), "err", err)
}

// obtain gets name a certificate: it resumes the order the state holds
// for it, or places one, has the CA validate the name through HTTP-01,
// and stores the certificate with its sealed key.
func (m *Manager) obtain(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, orderTimeout)
	defer cancel()
	client, err := m.client(ctx)
	if err != nil {
		return err
	}
	order, key, sealedKey, err := m.order(ctx, client, name)
	if err != nil {
		return err
	}
	if order.Status == acme.StatusPending {
		for _, url := range order.AuthzURLs {
			if err := m.authorize(ctx, client, url); err != nil {
				return err
			}
		}
	}
	if order, err = client.WaitOrder(ctx, order.URI); err != nil {
		m.dropOrder(ctx, name)
		return fmt.Errorf("order for %s: %w", name, err)
	}
	der, err := m.issued(ctx, client, order, name, key)
	if err != nil {
		return err
	}
	cert, err := certificateOf(name, der, key, sealedKey)
	if err != nil {
		m.dropOrder(ctx, name)
		return err
	}
	if err := m.propose.ProposeCert(ctx, fsm.CertCommand{Kind: fsm.SetCertificate, Certificate: cert}, false); err != nil {
		return fmt.Errorf("store the certificate for %s: %w", name, err)
	}
	m.cfg.Logger.Info("certificate obtained", "name", name, "not_after", time.UnixMilli(cert.NotAfter).UTC())
	return nil
}

// issued finalizes a ready order, or fetches a valid one's certificate.
func (m *Manager) issued(ctx context.Context, client *acme.Client, order *acme.Order, name string, key crypto.Signer) ([][]byte, error) {
	if order.Status == acme.StatusValid {
		der, err := client.FetchCert(ctx, order.CertURL, true)
		if err != nil {
			return nil, fmt.Errorf("fetch the certificate for %s: %w", name, err)
		}
		return der, nil
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{DNSNames: []string{name}}, key)
	if err != nil {
		return nil, fmt.Errorf("certificate request for %s: %w", name, err)
	}
	der, _, err := client.CreateOrderCert(ctx, order.FinalizeURL, csr, true)
	if err != nil {
		return nil, fmt.Errorf("finalize the order for %s: %w", name, err)
	}
	return der, nil
}

// client is an ACME client with the cluster's account, made and stored
// first when there is none for the configured CA.
func (m *Manager) client(ctx context.Context) (*acme.Client, error) {
	client := &acme.Client{DirectoryURL: m.cfg.Directory, HTTPClient: m.cfg.HTTPClient, UserAgent: "linkraft"}
	aad := []byte("acme account " + m.cfg.Directory)
	if acct, ok := m.state.ACMEAccount(); ok && acct.Directory == m.cfg.Directory {
		key, err := m.openKey(acct.Key, aad)
		if err != nil {
			return nil, fmt.Errorf("the ACME account's key: %w", err)
		}
		client.Key, client.KID = key, acme.KeyID(acct.URL)
		return client, nil
	}
	key, sealed, err := m.newKey(aad)
	if err != nil {
		return nil, err
	}
	client.Key = key
	var contact []string
	if m.cfg.Email != "" {
		contact = []string{"mailto:" + m.cfg.Email}
	}
	acct, err := client.Register(ctx, &acme.Account{Contact: contact}, acme.AcceptTOS)
	if err != nil {
		return nil, fmt.Errorf("register an ACME account at %s: %w", m.cfg.Directory, err)
	}
	change := fsm.CertCommand{Kind: fsm.SetACMEAccount, Account: fsm.ACMEAccount{Directory: m.cfg.Directory, URL: acct.URI, Key: string(sealed)}}
	if err := m.propose.ProposeCert(ctx, change, false); err != nil {
		return nil, fmt.Errorf("store the ACME account: %w", err)
	}
	m.cfg.Logger.Info("ACME account registered", "directory", m.cfg.Directory, "account", acct.URI)
	return client, nil
}

// order is the order the state holds for name, if the CA still knows it
// and it is not invalid, else a new one, stored before anything is done
// for it, with the key its certificate will have.
func (m *Manager) order(ctx context.Context, client *acme.Client, name string) (*acme.Order, crypto.Signer, string, error) {
	aad := []byte("certificate " + name)
	for _, o := range m.state.Orders() {
		if o.Name != name {
			continue
		}
		order, err := client.GetOrder(ctx, o.URL)
		if err == nil && order.Status != acme.StatusInvalid {
			key, err := m.openKey(o.Key, aad)
			if err == nil {
				m.cfg.Logger.Info("resuming an order", "name", name, "order", o.URL, "status", order.Status)
				return order, key, o.Key, nil
			}
		}
		m.dropOrder(ctx, name) // expired, invalid or unreadable: order again
	}
	key, sealed, err := m.newKey(aad)
	if err != nil {
		return nil, nil, "", err
	}
	order, err := client.AuthorizeOrder(ctx, acme.DomainIDs(name))
	if err != nil {
		return nil, nil, "", fmt.Errorf("order a certificate for %s: %w", name, err)
	}
	stored := fsm.Order{Name: name, URL: order.URI, Key: string(sealed), Started: m.now().UnixMilli()}
	if err := m.propose.ProposeCert(ctx, fsm.CertCommand{Kind: fsm.SetOrder, Order: stored}, false); err != nil {
		return nil, nil, "", fmt.Errorf("store the order for %s: %w", name, err)
	}
	m.cfg.Logger.Info("order placed", "name", name, "order", order.URI)
	return order, key, string(sealed), nil
}

// authorize proves control of an authorization's name through HTTP-01 or
// TLS-ALPN-01 (challengeOf): the challenge is in every node's state
// before the CA is told to look.
func (m *Manager) authorize(ctx context.Context, client *acme.Client, url string) error {
	z, err := client.GetAuthorization(ctx, url)
	if err != nil {
		return fmt.Errorf("authorization %s: %w", url, err)
	}
	switch z.Status {
	case acme.StatusValid:
		return nil
	case acme.StatusPending:
	default:
		return fmt.Errorf("authorization for %s is %s", z.Identifier.Value, z.Status)
	}
	chal, c, err := m.challengeOf(client, z)
	if err != nil {
		return err
	}
	c.Expires = m.now().Add(challengeLife).UnixMilli()
	if err := m.propose.ProposeCert(ctx, fsm.CertCommand{Kind: fsm.SetChallenge, Challenge: c}, true); err != nil {
		return fmt.Errorf("publish the %s challenge for %s: %w", chal.Type, z.Identifier.Value, err)
	}
	defer m.removeChallenge(context.WithoutCancel(ctx), c.Token)
	if _, err := client.Accept(ctx, chal); err != nil {
		return fmt.Errorf("accept the challenge for %s: %w", z.Identifier.Value, err)
	}
	if _, err := client.WaitAuthorization(ctx, z.URI); err != nil {
		return fmt.Errorf("validation of %s: %w", z.Identifier.Value, err)
	}
	return nil
}

func (m *Manager) removeChallenge(ctx context.Context, token string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.propose.ProposeCert(ctx, fsm.CertCommand{Kind: fsm.RemoveChallenge, Challenge: fsm.Challenge{Token: token}}, false); err != nil {
		m.cfg.Logger.Warn("remove a finished challenge; a later pass retries", "err", err)
	}
}

func (m *Manager) dropOrder(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := m.propose.ProposeCert(ctx, fsm.CertCommand{Kind: fsm.RemoveOrder, Order: fsm.Order{Name: name}}, false); err != nil {
		m.cfg.Logger.Warn("drop an order; a later pass retries", "name", name, "err", err)
	}
}

// newKey makes an ECDSA P-256 key and its sealed PKCS #8 form.
func (m *Manager) newKey(aad []byte) (crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate a key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode a key: %w", err)
	}
	return key, m.seal.Seal(der, aad), nil
}

func (m *Manager) openKey(sealed string, aad []byte) (crypto.Signer, error) {
	der, err := m.seal.Open([]byte(sealed), aad)
	if err != nil {
		return nil, err
	}
	return parseKey(der)
}

func parseKey(der []byte) (crypto.Signer, error) {
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse a key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("a stored key cannot sign")
	}
	return signer, nil
}

// certificateOf checks what the CA issued (a chain whose leaf is for
// name and holds key's public half) and makes the state's record of it.
func certificateOf(name string, der [][]byte, key crypto.Signer, sealedKey string) (fsm.Certificate, error) {
	if len(der) == 0 {
		return fsm.Certificate{}, fmt.Errorf("the CA issued no certificate for %s", name)
	}
	leaf, err := x509.ParseCertificate(der[0])
	if err != nil {
		return fsm.Certificate{}, fmt.Errorf("the certificate issued for %s: %w", name, err)
	}
	if err := leaf.VerifyHostname(name); err != nil {
		return fsm.Certificate{}, fmt.Errorf("the certificate issued for %s: %w", name, err)
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return fsm.Certificate{}, fmt.Errorf("the certificate issued for %s is not for the key ordered with", name)
	}
	var chain strings.Builder
	for _, b := range der {
		if err := pem.Encode(&chain, &pem.Block{Type: "CERTIFICATE", Bytes: b}); err != nil {
			return fsm.Certificate{}, err
		}
	}
	return fsm.Certificate{Name: name, Chain: chain.String(), Key: sealedKey,
		NotBefore: leaf.NotBefore.UnixMilli(), NotAfter: leaf.NotAfter.UnixMilli()}, nil
}
