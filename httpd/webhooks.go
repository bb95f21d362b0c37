package httpd

import (
	"context"
	"crypto/rand"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/cluster/webhooks"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/input"
)

// webhooksAPI serves the webhook registrations (/admin/webhooks).
type webhooksAPI struct {
	writes Writes
	// hooks is the delivery state, which the list shows.
	hooks               Hooks
	allowPrivateTargets bool // for a webhook's URL
	log                 *slog.Logger
}

func (api *webhooksAPI) register(rt routing) {
	// Webhooks, like domains, are written with entries older builds do
	// not apply; their list is the leader's, which alone delivers and so
	// alone knows the attempts' outcomes.
	hooks := func(method, path string, h fasthttp.RequestHandler, mode forwardMode) {
		rt.handle(method, path, "admin_webhooks", rt.require(fsm.ScopeAdmin, rt.forwarder(h, mode.needs(fsm.LevelVisits))))
	}
	hooks("POST", "/admin/webhooks", api.handleCreateWebhook, forwardAdmin)
	hooks("GET", "/admin/webhooks", api.handleListWebhooks, forwardAdminRead)
	hooks("DELETE", "/admin/webhooks/{id}", api.handleDeleteWebhook, forwardAdmin)
}

// webhookRequest is the body of POST /admin/webhooks.
type webhookRequest struct {
	URL    *string  `json:"url"`
	Events []string `json:"events"`
	Secret *string  `json:"secret"`
}

// webhookJSON is a webhook as the API shows it: never its secret.
type webhookJSON struct {
	ID        string   `json:"id"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	CreatedAt string   `json:"created_at"`
}

// webhookStatusJSON is a webhook with its delivery state, as the list
// shows it.
type webhookStatusJSON struct {
	webhookJSON
	Pending        int     `json:"pending_events"`
	Delivered      uint64  `json:"delivered"`
	Dropped        uint64  `json:"dropped"`
	FailedAttempts uint64  `json:"failed_attempts"`
	LastDeliveryAt *string `json:"last_delivery_at"`
	LastError      *string `json:"last_error"`
	LastErrorAt    *string `json:"last_error_at"`
}

func webhookView(w *fsm.Webhook) webhookJSON {
	return webhookJSON{ID: w.ID, URL: w.URL, Events: w.Events.Names(), CreatedAt: timestamp(w.CreatedAt)}
}

// parseWebhookRequest validates a webhook registration into the webhook
// to store, without its id.
func (api *webhooksAPI) parseWebhookRequest(body []byte) (fsm.Webhook, error) {
	if !utf8.Valid(body) {
		return fsm.Webhook{}, invalid("body is not valid UTF-8")
	}
	var req webhookRequest
	if err := decodeStrict(body, &req); err != nil {
		return fsm.Webhook{}, err
	}
	var w fsm.Webhook
	if req.URL == nil {
		return w, invalid("url is required: the absolute http or https URL events are POSTed to")
	}
	target, err := input.WebTarget(*req.URL, api.allowPrivateTargets)
	if err != nil {
		return w, invalid("url: %v", err)
	}
	if len(target) > fsm.MaxWebhookURL {
		return w, invalid("url is longer than %d bytes", fsm.MaxWebhookURL)
	}
	w.URL = target
	if len(req.Events) == 0 {
		return w, invalid("events is required: a list of link.created, link.updated, link.deleted, link.clicked")
	}
	for _, name := range req.Events {
		t, ok := fsm.ParseEventType(name)
		if !ok {
			return w, invalid("events: unknown event %q: want link.created, link.updated, link.deleted or link.clicked", name)
		}
		w.Events = w.Events.With(t)
	}
	if req.Secret == nil {
		return w, invalid("secret is required: %d to %d bytes the deliveries are signed with", fsm.MinWebhookSecret, fsm.MaxWebhookSecret)
	}
	if n := len(*req.Secret); n < fsm.MinWebhookSecret || n > fsm.MaxWebhookSecret {
		return w, invalid("secret must be %d to %d bytes, not %d", fsm.MinWebhookSecret, fsm.MaxWebhookSecret, n)
	}
	w.Secret = *req.Secret
	return w, nil
}

// newWebhookID draws a webhook id: WebhookIDLength lower-case letters and
// digits.
func newWebhookID() (string, error) {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var raw [fsm.WebhookIDLength]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	for i, b := range raw {
		raw[i] = alphabet[int(b)%len(alphabet)] // the bias is harmless: ids are names, not secrets
	}
	return string(raw[:]), nil
}

func (api *webhooksAPI) handleCreateWebhook(ctx *fasthttp.RequestCtx) {
	w, err := api.parseWebhookRequest(ctx.PostBody())
	if err != nil {
		writeBadRequest(ctx, err)
		return
	}
	if w.ID, err = newWebhookID(); err != nil {
		api.log.Error("webhook id", "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "could not draw a webhook id")
		return
	}
	cmd := fsm.WebhookSetCommand{Webhook: w, By: keyID(ctx), Now: time.Now().UnixMilli()}
	stored, index, err := cluster.ProposeFor[fsm.Webhook](context.Background(), api.writes, cmd, cluster.ProposeOptions{})
	if err != nil {
		writeError(ctx, api.log, err)
		return
	}
	markApplied(ctx, index)
	writeJSON(ctx, fasthttp.StatusCreated, webhookView(&stored))
}

func (api *webhooksAPI) handleListWebhooks(ctx *fasthttp.RequestCtx) {
	list := api.hooks.Statuses()
	out := make([]webhookStatusJSON, len(list))
	for i := range list {
		out[i] = webhookStatusView(&list[i])
	}
	writeJSON(ctx, fasthttp.StatusOK, map[string]any{"webhooks": out})
}

func webhookStatusView(st *webhooks.Status) webhookStatusJSON {
	v := webhookStatusJSON{
		webhookJSON: webhookView(&st.Webhook),
		Pending:     st.Pending, Delivered: st.Delivered, Dropped: st.Dropped, FailedAttempts: st.FailedAttempts,
	}
	if !st.LastDelivery.IsZero() {
		v.LastDeliveryAt = optionalTimestamp(st.LastDelivery.UnixMilli())
	}
	if st.LastError != "" {
		v.LastError = &st.LastError
		v.LastErrorAt = optionalTimestamp(st.LastErrorAt.UnixMilli())
	}
	return v
}

func (api *webhooksAPI) handleDeleteWebhook(ctx *fasthttp.RequestCtx) {
	id, _ := ctx.UserValue("id").(string)
	if !fsm.ValidWebhookID(id) {
		writeProblem(ctx, fasthttp.StatusNotFound, "no webhook "+id)
		return
	}
	res, err := api.writes.Propose(context.Background(),
		fsm.WebhookDeleteCommand{ID: id, By: keyID(ctx), Now: time.Now().UnixMilli()}, cluster.ProposeOptions{})
	if err != nil {
		writeError(ctx, api.log, err, errorDetail{fsm.ErrWebhookNotFound, "no webhook " + id})
		return
	}
	markApplied(ctx, res.Index)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}
