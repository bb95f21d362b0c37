package agent

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Real User-Agents, as browsers and bots sent them in 2024 and 2025.
var uaTests = []struct {
	name string
	ua   string
	want Class
}{
	{"Chrome on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		Class{Chrome, Windows, Desktop, NotBot}},
	{"Chrome on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		Class{Chrome, MacOS, Desktop, NotBot}},
	{"Safari on macOS", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		Class{Safari, MacOS, Desktop, NotBot}},
	{"Safari on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		Class{Safari, IOS, Mobile, NotBot}},
	{"Safari on iPad", "Mozilla/5.0 (iPad; CPU OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.7 Mobile/15E148 Safari/604.1",
		Class{Safari, IOS, Tablet, NotBot}},
	{"Chrome on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
		Class{Chrome, IOS, Mobile, NotBot}},
	{"Chrome on an Android phone", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
		Class{Chrome, Android, Mobile, NotBot}},
	{"Chrome on an Android tablet", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		Class{Chrome, Android, Tablet, NotBot}},
	{"Chrome on a CUBOT phone", "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Mobile Safari/537.36",
		Class{Chrome, Android, Mobile, NotBot}},
	{"Chrome on ChromeOS", "Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		Class{Chrome, ChromeOS, Desktop, NotBot}},
	{"Firefox on Linux", "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		Class{Firefox, Linux, Desktop, NotBot}},
	{"Firefox on Ubuntu", "Mozilla/5.0 (X11; Ubuntu; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
		Class{Firefox, Linux, Desktop, NotBot}},
	{"Firefox on an Android phone", "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
		Class{Firefox, Android, Mobile, NotBot}},
	{"Firefox on an Android tablet", "Mozilla/5.0 (Android 14; Tablet; rv:133.0) Gecko/133.0 Firefox/133.0",
		Class{Firefox, Android, Tablet, NotBot}},
	{"Firefox on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_7 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15",
		Class{Firefox, IOS, Mobile, NotBot}},
	{"Edge on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0",
		Class{Edge, Windows, Desktop, NotBot}},
	{"Edge on Android", "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
		Class{Edge, Android, Mobile, NotBot}},
	{"Opera on Windows", "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/130.0.0.0 Safari/537.36 OPR/115.0.0.0",
		Class{Opera, Windows, Desktop, NotBot}},
	{"Samsung Internet on a phone", "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36",
		Class{SamsungInternet, Android, Mobile, NotBot}},
	{"Samsung Internet on a tablet", "Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Safari/537.36",
		Class{SamsungInternet, Android, Tablet, NotBot}},
	{"Silk on a Kindle Fire", "Mozilla/5.0 (Linux; Android 9; KFTRWI) AppleWebKit/537.36 (KHTML, like Gecko) Silk/131.2.1 like Chrome/131.0.6778.135 Safari/537.36",
		Class{OtherBrowser, Android, Tablet, NotBot}},
	{"Android WebView", "Mozilla/5.0 (Linux; Android 13; Pixel 7 Build/TQ3A.230805.001; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/116.0.0.0 Mobile Safari/537.36",
		Class{OtherBrowser, Android, Mobile, NotBot}},
	{"Facebook's browser on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [FBAN/FBIOS;FBAV/470.0.0.38.109;FBBV/630189744;FBDV/iPhone14,5;FBMD/iPhone;FBSN/iOS;FBSV/17.5;FBSS/3;FBID/phone;FBLC/en_US;FBOP/5]",
		Class{OtherBrowser, IOS, Mobile, NotBot}},
	{"Pinterest's browser on iPhone", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148 [Pinterest/iOS]",
		Class{OtherBrowser, IOS, Mobile, NotBot}},

	{"Googlebot", "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", crawler},
	{"Googlebot smartphone", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.6778.69 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", crawler},
	{"bingbot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36", crawler},
	{"Applebot", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_5) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/13.1.1 Safari/605.1.15 (Applebot/0.1; +http://www.apple.com/go/applebot)", crawler},
	{"YandexBot", "Mozilla/5.0 (compatible; YandexBot/3.0; +http://yandex.com/bots)", crawler},
	{"Baiduspider", "Mozilla/5.0 (compatible; Baiduspider/2.0; +http://www.baidu.com/search/spider.html)", crawler},
	{"GPTBot", "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)", crawler},
	{"Meta's crawler", "meta-externalagent/1.1 (+https://developers.facebook.com/docs/sharing/webmasters/crawler)", crawler},
	{"Scrapy", "Scrapy/2.11.2 (+https://scrapy.org)", crawler},
	{"headless Chrome", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36", crawler},
	{"curl", "curl/8.5.0", tool},
	{"Wget", "Wget/1.21.4", tool},
	{"python-requests", "python-requests/2.31.0", tool},
	{"Go", "Go-http-client/1.1", tool},
	{"Go, HTTP/2", "Go-http-client/2.0", tool},
	{"Java", "Java/17.0.9", tool},
	{"okhttp", "okhttp/4.12.0", tool},
	{"empty", "", tool},
	{"blank", "  ", tool},

	{"Slackbot link expanding", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)", preview},
	{"Twitterbot", "Twitterbot/1.0", preview},
	{"facebookexternalhit", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", preview},
	{"iMessage", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_11_1) AppleWebKit/601.2.4 (KHTML, like Gecko) Version/9.0.1 Safari/601.2.4 facebookexternalhit/1.1 Facebot Twitterbot/1.0", preview},
	{"WhatsApp", "WhatsApp/2.23.20.0 A", preview},
	{"TelegramBot", "TelegramBot (like TwitterBot)", preview},
	{"Discordbot", "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)", preview},
	{"LinkedInBot", "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", preview},
	{"Skype and Teams", "Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com", preview},
	{"redditbot", "Mozilla/5.0 (compatible; redditbot/1.0; +http://www.reddit.com/feedback)", preview},
	{"Pinterest", "Pinterest/0.2 (+https://www.pinterest.com/bot.html)", preview},
	{"Mastodon", "http.rb/5.1.1 (Mastodon/4.2.1; +https://mastodon.social/)", preview},
	{"Iframely", "Iframely/1.3.1 (+https://iframely.com/docs/about)", preview},
	{"Embedly", "Mozilla/5.0 (compatible; Embedly/0.2; +http://support.embed.ly/)", preview},
}

var (
	crawler = Class{OtherBrowser, OtherOS, DeviceUnknown, Crawler}
	tool    = Class{OtherBrowser, OtherOS, DeviceUnknown, NotBot}
	preview = Class{OtherBrowser, OtherOS, DeviceUnknown, Preview}
)

func TestClassify(t *testing.T) {
	for _, tc := range uaTests {
		if got := Classify([]byte(tc.ua)); got != tc.want {
			t.Errorf("%s: Classify(%q)\n got %+v\nwant %+v", tc.name, tc.ua, got, tc.want)
		}
	}
}

func TestCacheAgreesWithClassify(t *testing.T) {
	c := NewCache(64, Classify)
	for range 2 { // the second round is served from the cache
		for _, tc := range uaTests {
			if got := c.Classify([]byte(tc.ua)); got != tc.want {
				t.Errorf("%s: Cache.Classify = %+v, want %+v", tc.name, got, tc.want)
			}
		}
	}
}

// A cache of one slot keeps only the last User-Agent; every other must
// still be classified right, not served the neighbour's class.
func TestCacheCollisions(t *testing.T) {
	c := NewCache(1, Classify)
	for range 3 {
		for _, tc := range uaTests {
			if got := c.Classify([]byte(tc.ua)); got != tc.want {
				t.Fatalf("%s: Cache.Classify = %+v, want %+v", tc.name, got, tc.want)
			}
		}
	}
}

// The caller's buffer is reused by fasthttp after the request; the cache
// must have kept its own copy.
func TestCacheCopiesKey(t *testing.T) {
	c := NewCache(16, Classify)
	buf := []byte("Googlebot/2.1")
	c.Classify(buf)
	copy(buf, "Slackbot 1.0")
	if got := c.Classify([]byte("Googlebot/2.1")); got != crawler {
		t.Errorf("after the caller's buffer changed: %+v", got)
	}
}

func TestLongUserAgentsAreClassifiedNotCached(t *testing.T) {
	c := NewCache(16, Classify)
	long := []byte(uaTests[0].ua + strings.Repeat(" x", MaxCachedLen))
	if got := c.Classify(long); got != uaTests[0].want {
		t.Errorf("long User-Agent: %+v", got)
	}
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			t.Fatal("a User-Agent longer than MaxCachedLen was cached")
		}
	}
}

func TestNewCacheSize(t *testing.T) {
	for _, tc := range []struct{ size, slots int }{
		{-1, 1}, {0, 1}, {1, 1}, {2, 2}, {3, 4}, {1000, 1024}, {1024, 1024},
		{MaxCacheSize + 1, MaxCacheSize},
	} {
		if got := len(NewCache(tc.size, Classify).slots); got != tc.slots {
			t.Errorf("NewCache(%d) has %d slots, want %d", tc.size, got, tc.slots)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	c := NewCache(64, Classify)
	for _, tc := range uaTests {
		ua := []byte(tc.ua)
		c.Classify(ua)
		if n := testing.AllocsPerRun(100, func() { c.Classify(ua) }); n != 0 {
			t.Errorf("%s: a cache hit allocates %v times", tc.name, n)
		}
		if n := testing.AllocsPerRun(100, func() { Classify(ua) }); n != 0 {
			t.Errorf("%s: Classify allocates %v times", tc.name, n)
		}
	}
}

// TestCacheConcurrent is for the race detector: goroutines share slots,
// hitting and replacing each other's entries.
func TestCacheConcurrent(t *testing.T) {
	c := NewCache(8, Classify)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				tc := uaTests[(g+i)%len(uaTests)]
				if got := c.Classify([]byte(tc.ua)); got != tc.want {
					t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestStrings(t *testing.T) {
	if Tablet.String() != "tablet" || Device(200).String() != "unknown" {
		t.Error("Device.String")
	}
	if Preview.String() != "preview" || Bot(200).String() != "none" {
		t.Error("Bot.String")
	}
}

var (
	browsers = []string{Chrome, Safari, Firefox, Edge, Opera, SamsungInternet, OtherBrowser}
	systems  = []string{Windows, MacOS, IOS, Android, Linux, ChromeOS, OtherOS}
)

func FuzzClassify(f *testing.F) {
	for _, tc := range uaTests {
		f.Add([]byte(tc.ua))
	}
	c := NewCache(4, Classify)
	f.Fuzz(func(t *testing.T, ua []byte) {
		orig := bytes.Clone(ua)
		got := Classify(ua)
		if !slices.Contains(browsers, got.Browser) || !slices.Contains(systems, got.OS) ||
			got.Device > Tablet || got.Bot > Preview {
			t.Fatalf("Classify(%q) = %+v, outside the fixed lists", ua, got)
		}
		if got.Bot != NotBot && got != (Class{OtherBrowser, OtherOS, DeviceUnknown, got.Bot}) {
			t.Fatalf("Classify(%q) = %+v: a bot with a browser", ua, got)
		}
		if cached := c.Classify(ua); cached != got {
			t.Fatalf("Cache.Classify(%q) = %+v, Classify = %+v", ua, cached, got)
		}
		if again := c.Classify(ua); again != got {
			t.Fatalf("second Cache.Classify(%q) = %+v, want %+v", ua, again, got)
		}
		if !bytes.Equal(ua, orig) {
			t.Fatal("Classify changed its input")
		}
	})
}

var sink Class

func BenchmarkCacheHit(b *testing.B) {
	c := NewCache(1024, Classify)
	ua := []byte(uaTests[0].ua)
	c.Classify(ua)
	b.ReportAllocs()
	for b.Loop() {
		sink = c.Classify(ua)
	}
}

// BenchmarkCacheMiss classifies and stores on every call: a one-slot cache
// fed alternating User-Agents.
func BenchmarkCacheMiss(b *testing.B) {
	c := NewCache(1, Classify)
	uas := make([][]byte, 64)
	for i := range uas {
		uas[i] = fmt.Appendf(nil, "%s Build/%d", uaTests[0].ua, i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink = c.Classify(uas[i%len(uas)])
		i++
	}
}

func BenchmarkClassify(b *testing.B) {
	for _, tc := range uaTests {
		switch tc.name {
		case "Chrome on Windows", "Safari on iPhone", "Googlebot", "Slackbot link expanding":
		default:
			continue
		}
		b.Run(tc.name, func(b *testing.B) {
			ua := []byte(tc.ua)
			b.ReportAllocs()
			for b.Loop() {
				sink = Classify(ua)
			}
		})
	}
}
