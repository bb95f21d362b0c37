package httpd

import (
	"container/list"
	"strconv"
	"sync"

	"github.com/skip2/go-qrcode"
	"github.com/valyala/fasthttp"
)

// Drawing a QR code costs CPU in proportion to its pixels: 1.6 ms at 256
// pixels, 63 ms at 2048 (BenchmarkQR, 2 cores), and the route is public.
// Two defences, because each alone falls short:
//
//   - A cache of drawn images keyed by short URL and size. The PNGs are
//     small (0.4 KB at 256 pixels, 2.5 KB at 2048), so a few MiB hold
//     thousands, and a link page viewed again, or a QR code embedded in a
//     popular page, costs a map lookup. But a client can dodge a cache by
//     asking for another size or another code each time.
//   - A budget of drawing per client (IPv4 address, IPv6 /64), in units of
//     a 256-pixel image: qrTokensPerSecond a second, up to qrBurst at once.
//     That is one 2048-pixel image (64 units, ~6 % of a core) or 64 small
//     ones a second per client, more than a person looking at link pages
//     needs. Only drawing spends it: cached answers are never refused.
const (
	qrCacheBytes      = 4 << 20
	qrUnitPixels      = defaultQRSize * defaultQRSize
	qrTokensPerSecond = 64
	qrBurst           = 256
)

// qrCost is what drawing a size×size image takes from a client's budget:
// its area in 256×256 units, at least one.
func qrCost(size int) int {
	return max(1, (size*size+qrUnitPixels-1)/qrUnitPixels)
}

func renderQR(shortURL string, size int) ([]byte, error) {
	return qrcode.Encode(shortURL, qrcode.Medium, size)
}

// qrCodes is the cache of drawn QR images and the per-client drawing
// budget.
type qrCodes struct {
	cache   *qrCache
	limiter *ipLimiter
}

func newQRCodes() *qrCodes {
	return &qrCodes{cache: newQRCache(qrCacheBytes), limiter: newIPLimiter(qrTokensPerSecond, qrBurst)}
}

func (q *qrCodes) stop() { q.limiter.stop() }

// drawQR returns the PNG of a size×size QR code of shortURL: the cached one,
// or a new drawing charged to the client's budget. When it cannot (429 over
// the budget, 500) it has answered the request itself.
func (api *linksAPI) drawQR(ctx *fasthttp.RequestCtx, shortURL string, size int) ([]byte, bool) {
	key := qrKey{url: shortURL, size: size}
	if png, ok := api.qrCodes.cache.get(key); ok {
		return png, true
	}
	if wait, ok := api.qrCodes.limiter.allowN(api.proxies.clientIP(ctx), qrCost(size)); !ok {
		writeProblem(ctx, fasthttp.StatusTooManyRequests,
			"too many QR codes drawn for this address; retry after "+strconv.Itoa(wait)+" s (codes drawn before are not limited)")
		ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(wait))
		return nil, false
	}
	png, err := renderQR(shortURL, size)
	if err != nil {
		api.log.Error("QR encoding failed", "url", shortURL, "size", size, "err", err)
		writeProblem(ctx, fasthttp.StatusInternalServerError, "QR encoding failed")
		return nil, false
	}
	api.qrCodes.cache.add(key, png)
	return png, true
}

// qrKey names a drawn image: what it encodes and its size. The short URL,
// not the code, since it depends on the base URL (or the Host header).
type qrKey struct {
	url  string
	size int
}

type qrEntry struct {
	key qrKey
	png []byte // never changed once added
}

// qrCache keeps the most recently used images up to a total of maxBytes.
type qrCache struct {
	maxBytes int

	mu    sync.Mutex
	bytes int
	order *list.List // of *qrEntry, most recently used first
	byKey map[qrKey]*list.Element
}

func newQRCache(maxBytes int) *qrCache {
	return &qrCache{maxBytes: maxBytes, order: list.New(), byKey: map[qrKey]*list.Element{}}
}

func (c *qrCache) get(k qrKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*qrEntry).png, true
}

// add keeps png under k, dropping the least recently used images while the
// total is over the bound; an image larger than the bound is not kept.
func (c *qrCache) add(k qrKey, png []byte) {
	if len(png) > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return // drawn twice at once: the first one stays
	}
	c.byKey[k] = c.order.PushFront(&qrEntry{key: k, png: png})
	c.bytes += len(png)
	// Each pass drops one entry, and what was just added fits alone.
	for c.bytes > c.maxBytes {
		old := c.order.Remove(c.order.Back()).(*qrEntry)
		delete(c.byKey, old.key)
		c.bytes -= len(old.png)
	}
}
