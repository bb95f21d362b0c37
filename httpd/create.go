package httpd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/fsm/codes"
	"github.com/linkraft/linkraft/fsm/input"
)

const (
	defaultWorkspace = "default"
	maxExpiry        = 100 * 365 * 24 * time.Hour
	maxExpirySeconds = int64(maxExpiry / time.Second)
	maxExpiryHours   = int64(maxExpiry / time.Hour)
)

// createFields is a create request as submitted, JSON or form.
type createFields struct {
	OriginalURL      *string          `json:"original_url"`
	URL              *string          `json:"url"`
	CustomCode       *string          `json:"custom_code"`
	ExpiresInSeconds *json.RawMessage `json:"expires_in_seconds"` // a JSON number, not a string
	ExpiresInHours   *json.RawMessage `json:"expires_in_hours"`
	ExpiresAt        *string          `json:"expires_at"`
	Workspace        *string          `json:"workspace"`
	Dedupe           *bool            `json:"dedupe"`
	Strategy         *string          `json:"strategy"`
	Domain           *string          `json:"domain"`
	optionFields
	// pastExpiry: an expires_at in the past is taken, for a compatible
	// API (pastExpiryAllowed); no body sets it.
	pastExpiry bool
}

// createFormFields are the fields a form create may carry: every JSON
// field but rules.
var createFormFields = []string{"original_url", "url", "custom_code", "expires_in_seconds", "expires_in_hours",
	"expires_at", "workspace", "dedupe", "strategy", "domain",
	"title", "tags", "max_visits", "valid_since", "password", "forward_query", "public_stats"}

// badRequest is a request refused before any work is done for it, for
// its input or for what its credential may do, with the status it maps to.
type badRequest struct {
	status int
	msg    string
}

func (e *badRequest) Error() string { return e.msg }

// writeBadRequest answers a refusal with its status (a 401 with its
// challenge).
func writeBadRequest(ctx *fasthttp.RequestCtx, err error) {
	status := statusOf(err)
	if status == fasthttp.StatusUnauthorized {
		writeUnauthorized(ctx, err.Error())
		return
	}
	writeProblem(ctx, status, err.Error())
}

// statusOf is the status a refusal maps to: 400 unless it says otherwise.
func statusOf(err error) int {
	var bad *badRequest
	if errors.As(err, &bad) {
		return bad.status
	}
	return fasthttp.StatusBadRequest
}

func invalid(format string, args ...any) error {
	return &badRequest{status: fasthttp.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func forbidden(msg string) error {
	return &badRequest{status: fasthttp.StatusForbidden, msg: msg}
}

// parseCreate reads the body by its content type and validates every field
// into a CreateRequest, and the password to hash for it (see
// validateCreate). Nothing is stored unless this succeeds.
func (li linkInput) parseCreate(ctx *fasthttp.RequestCtx, now time.Time, workspace string) (fsm.CreateRequest, string, error) {
	var f createFields
	mediaType, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	switch {
	case err == nil && (mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")):
		if err := decodeJSONBody(ctx.PostBody(), &f); err != nil {
			return fsm.CreateRequest{}, "", err
		}
	case err == nil && mediaType == "application/x-www-form-urlencoded" && looksLikeJSON(ctx.PostBody()):
		// curl -d '{"url":...}' sends JSON labelled as a form; a form body
		// cannot start with "{", so take it for what it is.
		if err := decodeJSONBody(ctx.PostBody(), &f); err != nil {
			return fsm.CreateRequest{}, "", err
		}
	case err == nil && mediaType == "application/x-www-form-urlencoded":
		if err := decodeFormBody(ctx.PostArgs(), &f); err != nil {
			return fsm.CreateRequest{}, "", err
		}
	default:
		return fsm.CreateRequest{}, "", &badRequest{status: fasthttp.StatusUnsupportedMediaType,
			msg: "send the body as application/json or application/x-www-form-urlencoded"}
	}
	if ws, ok := ctx.UserValue("workspace").(string); ok {
		f.Workspace = &ws
	}
	f.pastExpiry = pastExpiryAllowed(ctx)
	return li.validateCreate(&f, now, workspace)
}

func looksLikeJSON(body []byte) bool {
	b := bytes.TrimSpace(body)
	return len(b) > 0 && b[0] == '{'
}

func decodeJSONBody(body []byte, f *createFields) error {
	if !utf8.Valid(body) {
		return invalid("body is not valid UTF-8")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("body is empty: send a JSON object with an \"original_url\"")
	}
	return decodeStrict(body, f)
}

// decodeStrict decodes one JSON object into v, refusing fields v does not
// have: a create with a field this build does not know must not succeed
// without it (a "password" silently dropped would make an open link).
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err == nil {
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return invalid("field %q has the wrong type: want %s", typeErr.Field, typeErr.Type)
	}
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalid("unknown field %s: this API does not have it", field)
	}
	return invalid("body is not a valid JSON object: %v", err)
}

func decodeFormBody(args *fasthttp.Args, f *createFields) error {
	var unknown string
	args.VisitAll(func(k, _ []byte) {
		if unknown == "" && !slices.Contains(createFormFields, string(k)) {
			unknown = string(k)
		}
	})
	if unknown != "" {
		return invalid("unknown field %q: this API does not have it", unknown)
	}
	str := func(key string) *string {
		if !args.Has(key) {
			return nil
		}
		v := string(args.Peek(key))
		return &v
	}
	num := func(key string) *json.RawMessage {
		if v := str(key); v != nil {
			n := json.RawMessage(*v)
			return &n
		}
		return nil
	}
	f.OriginalURL, f.URL, f.CustomCode = str("original_url"), str("url"), str("custom_code")
	f.ExpiresInSeconds, f.ExpiresInHours, f.ExpiresAt = num("expires_in_seconds"), num("expires_in_hours"), str("expires_at")
	f.Workspace, f.Strategy, f.Domain = str("workspace"), str("strategy"), str("domain")
	var err error
	if f.Dedupe, err = formBool("dedupe", str("dedupe")); err != nil {
		return err
	}
	return formOptions(str, &f.optionFields)
}

// validateCreate checks the fields of a create; a create that names no
// workspace goes to workspace. A password is returned to be hashed into
// the request's Options once nothing can refuse it any more (edit says
// why).
func (li linkInput) validateCreate(f *createFields, now time.Time, workspace string) (fsm.CreateRequest, string, error) {
	req := fsm.CreateRequest{Workspace: workspace, CodeLength: li.codeLength}
	var err error
	if req.URL, err = li.createTarget(f); err != nil {
		return req, "", err
	}
	if req.CustomCode, err = customCode(f); err != nil {
		return req, "", err
	}
	if f.Workspace != nil {
		if err := input.Workspace(*f.Workspace); err != nil {
			return req, "", invalid("%s", err.Error())
		}
		req.Workspace = *f.Workspace
	}
	if f.Dedupe != nil {
		req.Dedupe = *f.Dedupe
	}
	if f.Strategy != nil {
		switch *f.Strategy {
		case "", "counter":
		case "hash":
			req.Strategy, req.Dedupe = fsm.StrategyHash, true
		default:
			return req, "", invalid("strategy must be \"counter\" or \"hash\"")
		}
	}
	if req.ExpiresAt, err = expiry(f, now); err != nil {
		return req, "", err
	}
	if req.Dedupe {
		if req.Canonical, err = codes.Canonicalize(req.URL); err != nil {
			return req, "", invalid("url cannot be canonicalised for dedupe: %v", err)
		}
	}
	if f.Domain != nil && *f.Domain != "" {
		if req.Domain, err = input.Domain(*f.Domain); err != nil {
			return req, "", invalid("%s", err.Error())
		}
	}
	opts, password, err := li.edit(&f.optionFields)
	if err != nil {
		return req, "", err
	}
	req.Options = optionsOf(opts)
	return req, password, nil
}

// createTarget is a create's target: original_url, or url.
func (li linkInput) createTarget(f *createFields) (string, error) {
	raw := f.OriginalURL
	if raw == nil {
		raw = f.URL
	}
	if raw == nil {
		return "", invalid("original_url (or url) is required")
	}
	target, err := input.Target(*raw, li.allowPrivateTargets)
	if errors.Is(err, input.ErrURLTooLong) {
		return "", &badRequest{status: fasthttp.StatusRequestEntityTooLarge, msg: err.Error()}
	}
	if err != nil {
		return "", invalid("%s", err.Error())
	}
	return target, nil
}

// customCode is a create's custom_code, "" for none.
func customCode(f *createFields) (string, error) {
	if f.CustomCode == nil || *f.CustomCode == "" {
		return "", nil
	}
	// A reserved word is a conflict (409) even where it is not
	// code-shaped, like "ui" or "robots.txt"; the FSM refuses it too.
	if codes.IsReserved(*f.CustomCode) {
		return "", &badRequest{status: fasthttp.StatusConflict, msg: "custom_code " + *f.CustomCode + " is a reserved word"}
	}
	if err := input.CustomCode(*f.CustomCode); err != nil {
		return "", invalid("%s", err.Error())
	}
	return *f.CustomCode, nil
}

// expiry turns the one optional expiry field into unix milliseconds. An
// expires_at in the past is refused as a likely mistake (docs/API.md),
// unless a compatible API whose original takes it asked (f.pastExpiry):
// the link is then disabled, kept until an edit enables it.
func expiry(f *createFields, now time.Time) (int64, error) {
	set := 0
	for _, present := range []bool{f.ExpiresInSeconds != nil, f.ExpiresInHours != nil, f.ExpiresAt != nil} {
		if present {
			set++
		}
	}
	switch {
	case set == 0:
		return 0, nil
	case set > 1:
		return 0, invalid("give at most one of expires_in_seconds, expires_in_hours and expires_at")
	case f.ExpiresInSeconds != nil:
		n, err := boundedInt("expires_in_seconds", *f.ExpiresInSeconds, maxExpirySeconds)
		return now.Add(time.Duration(n) * time.Second).UnixMilli(), err
	case f.ExpiresInHours != nil:
		n, err := boundedInt("expires_in_hours", *f.ExpiresInHours, maxExpiryHours)
		return now.Add(time.Duration(n) * time.Hour).UnixMilli(), err
	}
	at, err := time.Parse(time.RFC3339, *f.ExpiresAt)
	if err != nil {
		return 0, invalid("expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z")
	}
	switch {
	case at.UnixMilli() <= 0:
		// 0 is no expiry at all, and no link expired before 1970.
		return 0, invalid("expires_at is before 1970")
	case !at.After(now) && !f.pastExpiry:
		return 0, invalid("expires_at is in the past")
	}
	if at.Sub(now) > maxExpiry {
		return 0, invalid("expires_at is more than 100 years away")
	}
	return at.UnixMilli(), nil
}

func boundedInt(field string, v json.RawMessage, max int64) (int64, error) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, invalid("%s must be a whole number", field)
	}
	if n < 1 || n > max {
		return 0, invalid("%s must be between 1 and %d", field, max)
	}
	return n, nil
}
