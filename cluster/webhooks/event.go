package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/linkraft/linkraft/fsm"
)

// Delivery headers.
const (
	HeaderWebhookEvent     = "X-Linkraft-Event"
	HeaderWebhookDelivery  = "X-Linkraft-Delivery"
	HeaderWebhookSignature = "X-Linkraft-Signature"
)

// post makes one delivery attempt of ev to the webhook.
func (d *Delivery) post(ctx context.Context, w *fsm.Webhook, ev *fsm.WebhookEvent) error {
	body, err := EventBody(w.ID, ev)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "linkraft-webhooks")
	req.Header.Set(HeaderWebhookEvent, ev.Type.String())
	req.Header.Set(HeaderWebhookDelivery, DeliveryID(w.ID, ev.Seq))
	req.Header.Set(HeaderWebhookSignature, Signature(w.Secret, body))
	resp, err := d.client.Do(req)
	if err != nil {
		// The URL may hold credentials: say what failed without it.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("POST: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, answerBytes))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}

// DeliveryID is an event's X-Linkraft-Delivery and body id: the webhook's
// id and the event's Seq, the same for every attempt.
func DeliveryID(webhook string, seq uint64) string {
	return webhook + "-" + strconv.FormatUint(seq, 10)
}

// Signature is X-Linkraft-Signature for body: "sha256=" and the hex
// HMAC-SHA256 of the exact body with the webhook's secret.
func Signature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// eventJSON is the body of a delivery.
type eventJSON struct {
	ID        string `json:"id"`
	Event     string `json:"event"`
	Webhook   string `json:"webhook"`
	CreatedAt string `json:"created_at"`
	Data      any    `json:"data"`
}

type eventLinkJSON struct {
	ShortCode   string   `json:"short_code"`
	Domain      string   `json:"domain"`
	OriginalURL string   `json:"original_url"`
	Workspace   string   `json:"workspace"`
	Title       string   `json:"title"`
	Tags        []string `json:"tags"`
	ExpiresAt   *string  `json:"expires_at"`
	// PreviousCode is the code a rename retired; only a rename's
	// link.updated has it.
	PreviousCode string `json:"previous_short_code,omitempty"`
}

type eventHitJSON struct {
	ShortCode string `json:"short_code"`
	Domain    string `json:"domain"`
	Clicks    uint64 `json:"clicks"`
}

// EventBody is the JSON body delivered for ev.
func EventBody(webhook string, ev *fsm.WebhookEvent) ([]byte, error) {
	b := eventJSON{ID: DeliveryID(webhook, ev.Seq), Event: ev.Type.String(), Webhook: webhook, CreatedAt: rfc3339(ev.At)}
	if ev.Type == fsm.EventLinkClicked {
		hits := make([]eventHitJSON, len(ev.Hits))
		for i, h := range ev.Hits {
			hits[i] = eventHitJSON{ShortCode: h.Code, Domain: h.Domain, Clicks: h.Clicks}
		}
		b.Data = map[string]any{"clicks": hits}
	} else {
		l := ev.Link
		d := eventLinkJSON{ShortCode: l.Code, Domain: l.Domain, OriginalURL: l.URL, Workspace: l.Workspace, Title: l.Title, Tags: l.Tags,
			PreviousCode: l.PreviousCode}
		if d.Tags == nil {
			d.Tags = []string{}
		}
		if l.ExpiresAt != 0 {
			at := rfc3339(l.ExpiresAt)
			d.ExpiresAt = &at
		}
		b.Data = d
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("webhook event body: %w", err)
	}
	return body, nil
}

// rfc3339 formats unix milliseconds as the API does everywhere.
func rfc3339(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
