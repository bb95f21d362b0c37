package httpd

import (
	"github.com/valyala/fasthttp"
)

// transparentGIF is a 1×1 transparent GIF image.
const transparentGIF = "GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"

// pixelVisit marks a request as a tracking pixel's: a code it does not
// find is no orphan visit (Shlink's PixelAction tracks none).
const pixelVisit = "linkraft.pixel"

// handleTrack answers GET /{code}/track, a tracking pixel for emails and
// pages that cannot follow a redirect (Shlink's PixelAction): the visit
// counts as the redirect's would, and the answer is always the 1×1 image,
// whether the link exists, is disabled or protected (then nothing counts).
func (r *redirector) handleTrack(ctx *fasthttp.RequestCtx) {
	if code := []byte(pathParam(ctx, "code")); codeShaped(code) {
		ctx.SetUserValue(pixelVisit, true)
		r.redirect(ctx, code)
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("image/gif")
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, cacheControlNoStore) // every open counts
	ctx.SetBodyString(transparentGIF)
}
